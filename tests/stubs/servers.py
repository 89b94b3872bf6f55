"""Small loopback HTTP servers with hostile or broken behaviour, each in a daemon thread."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GiB = 1024**3


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class StubServer:
    """A handler class served on loopback in a thread; `url` is its base URL."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None, **attrs: Any) -> None:  # fmt: skip
        self.hits: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        bound = type("Bound" + handler.__name__, (handler,), {"stub": self, **attrs})
        server_cls = _Server6 if ":" in host else _Server
        self.server = server_cls((host, 0), bound)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        port = self.server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.host = host
        self.port = port
        self.url = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class Handler(BaseHTTPRequestHandler):
    """Base: records hits, quiet logs, JSON replies."""

    stub: StubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def _record(self) -> None:
        with self.stub.lock:
            self.stub.hits.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers)}
            )

    def _enter(self) -> None:
        with self.stub.lock:
            self.stub.active += 1
            self.stub.max_active = max(self.stub.max_active, self.stub.active)

    def _leave(self) -> None:
        with self.stub.lock:
            self.stub.active -= 1

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


class EchoHandler(Handler):
    """Answers with what it received (Host, headers, body); sets a cookie each time."""

    def do_GET(self) -> None:
        self._record()
        self.send_json(
            200,
            {"host": self.headers.get("Host"), "path": self.path, "method": self.command,
             "cookie": self.headers.get("Cookie"), "headers": dict(self.headers)},
            {"Set-Cookie": "session=abc123; Path=/"},
        )  # fmt: skip

    def do_POST(self) -> None:
        self._record()
        self.send_json(200, {"body": self.body().decode("utf-8", "replace")})


class TraceStoreHandler(Handler):
    """`/_trace/{id}` from a dict; ids in `slow_ids` (or all, when slow_all) sleep first."""

    records: dict[str, Any] = {}
    slow_ids: frozenset[str] = frozenset()
    slow_all: bool = False
    delay: float = 2.0

    def do_GET(self) -> None:
        self._record()
        self._enter()
        try:
            if not self.path.startswith("/_trace/"):
                return self.send_json(404, {"error": "not found"})
            trace_id = self.path[len("/_trace/") :]
            if self.slow_all or trace_id in self.slow_ids:
                time.sleep(self.delay)
            time.sleep(0.02)  # keep requests overlapping so concurrency is observable
            record = self.records.get(trace_id)
            if record is None:
                return self.send_json(404, {"error": "unknown trace id"})
            return self.send_json(200, record)
        finally:
            self._leave()


class SlowHandler(Handler):
    """Sleeps `delay` seconds before answering anything."""

    delay: float = 2.0

    def do_GET(self) -> None:
        self._record()
        time.sleep(self.delay)
        with contextlib.suppress(OSError):
            self.send_json(200, {"late": True})

    do_POST = do_GET


class DripHandler(Handler):
    """Sends headers at once, then one body byte every `interval` seconds."""

    interval: float = 0.05

    def do_GET(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(self.interval)
        except OSError:
            pass


class RedirectHandler(Handler):
    """Redirects (302) every request to `location(path)`; `/final` answers 200."""

    location: Callable[[str], str] | str = "/final"
    code: int = 302

    def do_GET(self) -> None:
        self._record()
        if self.path == "/final":
            return self.send_json(200, {"final": True})
        target = self.location(self.path) if callable(self.location) else self.location
        self.send_response(self.code)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET


class HugeHandler(Handler):
    """Declares 2 GiB and streams it lazily until the client hangs up; counts bytes sent."""

    size: int = 2 * GiB
    chunked: bool = False
    block = b"A" * (64 * 1024)

    def do_GET(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(self.size))
        self.end_headers()
        sent = 0
        try:
            while sent < self.size:
                if self.chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(self.block), self.block))
                else:
                    self.wfile.write(self.block)
                sent += len(self.block)
        except OSError:
            pass
        finally:
            with self.stub.lock:
                self.stub.hits[-1]["sent"] = sent


class GzipBombHandler(Handler):
    """A small gzip body that inflates to `inflated` bytes of zeros."""

    inflated: int = 64 * 1024 * 1024
    _cache: dict[int, bytes] = {}

    def do_GET(self) -> None:
        self._record()
        data = self._cache.get(self.inflated)
        if data is None:
            data = gzip.compress(bytes(self.inflated), compresslevel=9)
            self._cache[self.inflated] = data
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ResetServer:
    """Accepts TCP connections, reads the request, then resets them (RST via SO_LINGER 0)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            try:
                conn.settimeout(1.0)
                conn.recv(65536)
            except OSError:
                pass
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def __enter__(self) -> ResetServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(2)
        self.sock.close()


def free_port() -> int:
    """A loopback port with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
