"""Pure judgements for the replay job: why two outputs differ, and how a probe run ended."""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"
    r"|\b1[5-9]\d{8}(\.\d+)?\b"  # unix seconds 2017..2033
    r"|\b1[5-9]\d{11}\b"  # unix milliseconds
)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_FLOAT = re.compile(r"-?\d+\.\d+(e[+-]?\d+)?", re.I)
DIFF_MAX_LINES = 400


@dataclass
class OutputDiff:
    """How two runs' copies of one graded output differ."""

    path: str
    kind: str  # identical | missing | timestamp | uuid | ordering | float | other
    first_json_path: str | None
    diff: str


def unified_diff(a: bytes, b: bytes, path: str) -> str:
    """A capped unified diff of two outputs (text, or a note for binary data)."""
    try:
        left = a.decode("utf-8").splitlines(keepends=True)
        right = b.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return f"binary outputs differ ({len(a)} vs {len(b)} bytes)\n"
    lines = list(difflib.unified_diff(left, right, f"run1/{path}", f"run2/{path}", n=2))[
        :DIFF_MAX_LINES
    ]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _NOT_JSON


_NOT_JSON = object()


def first_json_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path of the first place two values differ, or None when equal."""
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}.{key}"
            found = first_json_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_json_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return f"{path}[{min(len(a), len(b))}]" if len(a) != len(b) else None
    return None if a == b else path


def _canonical(value: Any) -> Any:
    """Value with every list sorted by its canonical text: equal when only ordering differs."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return value


def classify(a: bytes, b: bytes, path: str) -> OutputDiff:
    """Name the most likely cause of a difference between two runs' outputs."""
    if a == b:
        return OutputDiff(path, "identical", None, "")
    diff = unified_diff(a, b, path)
    ja, jb = _json(a), _json(b)
    json_path = None
    if ja is not _NOT_JSON and jb is not _NOT_JSON:
        json_path = first_json_difference(ja, jb)
        if json.dumps(_canonical(ja), sort_keys=True) == json.dumps(_canonical(jb), sort_keys=True):
            return OutputDiff(path, "ordering", json_path, diff)
    text_a = a.decode("utf-8", "replace")
    text_b = b.decode("utf-8", "replace")
    if sorted(text_a.splitlines()) == sorted(text_b.splitlines()):
        return OutputDiff(path, "ordering", json_path, diff)
    for kind, pattern in (("timestamp", _TIMESTAMP), ("uuid", _UUID), ("float", _FLOAT)):
        if pattern.sub("<X>", text_a) == pattern.sub("<X>", text_b):
            return OutputDiff(path, kind, json_path, diff)
    # Several causes at once: mask each kind in turn and name those whose values differed.
    masked_a, masked_b = text_a, text_b
    causes = []
    for kind, pattern in (("timestamp", _TIMESTAMP), ("uuid", _UUID), ("float", _FLOAT)):
        found_a = [m.group(0) for m in pattern.finditer(masked_a)]
        found_b = [m.group(0) for m in pattern.finditer(masked_b)]
        if found_a != found_b:
            causes.append(kind)
            masked_a, masked_b = pattern.sub("<X>", masked_a), pattern.sub("<X>", masked_b)
    if causes and masked_a == masked_b:
        return OutputDiff(path, "+".join(causes), json_path, diff)
    if causes and sorted(masked_a.splitlines()) == sorted(masked_b.splitlines()):
        return OutputDiff(path, "+".join([*causes, "ordering"]), json_path, diff)
    kind = "+".join([*causes, "other"]) if causes else "other"
    return OutputDiff(path, kind, json_path, diff)


def _changed(a: str, b: str) -> int:
    left, right = Counter(a.splitlines()), Counter(b.splitlines())
    return sum(((left - right) + (right - left)).values())


# ------------------------------------------------------------------ audit events


def _is_loopback(host: Any) -> bool:
    if not isinstance(host, str):
        return False
    if host in {"localhost", "ip6-localhost", "ip6-loopback", ""}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_TUPLE_HOST = re.compile(r"""^\(\s*['"]([^'"]*)['"]""")


def _address_host(address: Any) -> str | None:
    """The host of a socket address as the audit hook wrote it (a tuple, or its text)."""
    if isinstance(address, list | tuple) and address:
        return str(address[0])
    if isinstance(address, str):
        found = _TUPLE_HOST.match(address)
        return found.group(1) if found else address
    return None


def network_attempts(events: list[dict]) -> list[dict]:
    """Connect and resolve events aimed anywhere but loopback (local stubs are fine)."""
    out = []
    for event in events:
        name = event.get("event")
        if name not in {"socket.connect", "socket.getaddrinfo", "socket.sendto"}:
            continue
        host = event.get("host")
        address = event.get("address")
        if host is None:
            host = _address_host(address)
        if isinstance(address, str) and address.startswith("/"):
            continue  # a Unix socket, not the network
        if _is_loopback(host):
            continue
        out.append(event)
    return out


def _address_text(address: Any) -> str:
    """'host:port' from an audit-hook address."""
    if isinstance(address, list | tuple):
        return ":".join(str(p) for p in address[:2])
    text = str(address)
    found = re.match(r"""^\(\s*['"]([^'"]*)['"]\s*,\s*(\d+)""", text)
    return f"{found.group(1)}:{found.group(2)}" if found else text


def describe_attempts(attempts: list[dict]) -> str:
    """'3 connect attempts to api.openai.com:443 from agent/transport.py:41'."""
    groups: Counter[tuple[str, str, str]] = Counter()
    for event in attempts:
        kind = "resolve" if event.get("event") == "socket.getaddrinfo" else "connect"
        if event.get("host") is not None:
            target = f"{event['host']}:{event.get('port')}"
        else:
            target = _address_text(event.get("address"))
        groups[(kind, str(target), str(event.get("caller") or event.get("where") or "?"))] += 1
    return "; ".join(
        f"{n} {kind} attempt{'s' if n > 1 else ''} to {target} from {caller}"
        for (kind, target, caller), n in groups.most_common(10)
    )


def files_read(events: list[dict]) -> set[str]:
    """Relative paths the suite opened under the watched recording folders."""
    read = set()
    for event in events:
        if event.get("event") == "open" and isinstance(event.get("path"), str):
            read.add(event["path"].lstrip("./"))
    return read


# ------------------------------------------------------------------ the missing-recording probe


def probe_outcome(
    *, exit_code: int | None, output: str, removed: str, key: str | None, attempts: list[dict]
) -> tuple[str, str]:
    """(outcome, reason) of a run with one used recording removed."""
    if attempts:
        return "network_fallback", describe_attempts(attempts)
    if exit_code == 0:
        return "passes_silently", f"the run passed with {removed} removed"
    name = removed.rsplit("/", 1)[-1]
    stem = name.split(".", 1)[0]
    lowered = output.lower()
    named = [
        token
        for token in {name, stem, key or ""}
        if token and len(token) >= 4 and token.lower() in lowered
    ]
    if named or any(word in lowered for word in ("cassette", "fixture", "recording")):
        mention = f"names {', '.join(sorted(named))}" if named else "mentions the missing recording"
        return "fails_loudly", f"exit {exit_code}; the output {mention}"
    return "fails_unclearly", f"exit {exit_code}, but the output never names {removed}"


MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def missing_module(output: str) -> str | None:
    """The module a failed run could not import, if that is why it failed."""
    found = MISSING_MODULE.search(output)
    return found.group(1) if found else None
