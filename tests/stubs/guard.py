"""A connect guard: any socket connection outside 127.0.0.0/8 and ::1 fails the test."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
LOOPBACK_V6 = ipaddress.ip_address("::1")


def is_loopback_literal(host: Any) -> bool:
    """True for an IP literal in 127.0.0.0/8 or ::1 (names are not accepted: pinning is)."""
    try:
        ip = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    return ip in LOOPBACK_V4 if ip.version == 4 else ip == LOOPBACK_V6


class ConnectGuard:
    """Records every connect attempt; blocks and reports those that leave loopback."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []
        self.violations: list[str] = []

    def _check(self, address: Any, via: str) -> None:
        if not isinstance(address, tuple) or not is_loopback_literal(address[0]):
            self.violations.append(f"{via}({address!r})")
            raise PermissionError(f"test guard: connection to {address!r} is not allowed")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Wrap socket.socket.connect/connect_ex and socket.create_connection."""
        guard = self
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        real_create = socket.create_connection

        def connect(sock: socket.socket, address: Any) -> Any:
            guard._check(address, "connect")
            guard.attempts.append((str(address[0]), int(address[1])))
            return real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> Any:
            guard._check(address, "connect_ex")
            guard.attempts.append((str(address[0]), int(address[1])))
            return real_connect_ex(sock, address)

        def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
            guard._check(address, "create_connection")
            return real_create(address, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket, "create_connection", create_connection)

    def assert_clean(self) -> None:
        """Fail the test when anything tried to leave loopback (even if the code caught it)."""
        if self.violations:
            pytest.fail("connection attempts outside loopback: " + ", ".join(self.violations))


class FakeResolver:
    """getaddrinfo without DNS: IP literals (inet_aton forms too) and a name table."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.names: dict[str, list[str] | list[list[str]]] = {}
        self.calls: list[str] = []

    def set(self, name: str, *answers: str | list[str]) -> None:
        """Answer `name` with the given addresses; several lists = successive answers."""
        if answers and isinstance(answers[0], list):
            self.names[name] = [list(a) for a in answers]  # type: ignore[arg-type]
        else:
            self.names[name] = [list(answers)]  # type: ignore[list-item]

    def __call__(self, host: Any, port: Any, family: int = 0, type: int = 0, *args: Any,
                 **kwargs: Any) -> list:  # fmt: skip
        name = host.decode() if isinstance(host, bytes) else str(host)
        self.calls.append(name)
        try:
            ipaddress.ip_address(name.split("%", 1)[0])
            literal = [name]
        except ValueError:
            literal = None
        if literal is None:
            try:  # the forms glibc accepts without DNS: 2130706433, 0x7f.1, 127.1
                literal = [socket.inet_ntoa(socket.inet_aton(name))]
            except OSError:
                literal = None
        if literal is None:
            answers = self.names.get(name.lower().rstrip("."))
            if not answers:
                raise socket.gaierror(socket.EAI_NONAME, f"fake resolver: unknown name {name}")
            literal = answers.pop(0) if len(answers) > 1 else answers[0]
        result = []
        for address in literal:
            if ":" in address:
                result.append(
                    (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, int(port or 0), 0, 0))
                )
            else:
                result.append(
                    (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))
                )
        return result
