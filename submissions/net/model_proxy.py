"""The host-side model proxy of a re-record pass: the sandbox's only way to the team's model.

A hand-in's record mode runs in the sandbox with no network but its own loopback. A relay
inside it (`submissions/sandbox/runtime/relay.py`, ours) forwards the bytes of every
connection to a Unix socket bound into the sandbox; this proxy serves that socket on the
host. The sandbox is given the endpoint's base URL pointing at the relay and a PLACEHOLDER
key, never the real one. For each request the proxy:

- allows only POST to the endpoint API's one path (`/v1/chat/completions`, `/v1/messages`):
  any other method, path, query, host, a chunked or oversized body is refused (403/405/411/
  413) and never sent on;
- drops every header the sandbox sent but the few the API needs (content type, accept,
  `anthropic-version`/`anthropic-beta`) and sets the team's key in the API family's header:
  the placeholder is swapped for the key here, on the host, in this process only;
- counts calls and tokens (the answer's usage block) against its caps, takes each call from
  the caller's ledger first (`reserve`, the month caps under a row lock), and past a cap
  answers 429 with a body that names the cap, without calling the model;
- sends the call through the outbound guard (`SafeClient`: pinned address, allowlist,
  deadline, byte cap), and answers the sandbox with the status and body, the key replaced by
  the placeholder wherever an answer quotes it (some providers' 401 bodies do);
- logs every exchange: method, path, status, tokens, time; never a header or the key.

No model is called on a path the guard refuses, and the proxy's own state (counts, the
exchanges) is what the re-record pass reports. Pure networking: no models.
"""

from __future__ import annotations

import json
import logging
import os
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cassettes_app.providers.sse import event_payloads
from submissions.net.endpoints import APIS, Endpoint
from submissions.net.outbound import OutboundError, OutboundRefused, SafeClient
from submissions.net.reask import ANTHROPIC_VERSION, MAX_ANSWER_BYTES

logger = logging.getLogger(__name__)

PLACEHOLDER = "cr-placeholder-key-not-a-secret"
MAX_REQUEST_BYTES = 1_000_000
# Request headers the sandbox may set that travel on; every other one is dropped.
_PASSED_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta")


class CapRefused(Exception):
    """A call the caller's ledger refused (the month caps); the message names the cap."""


# reserve(estimate) -> settle(tokens or None): take one call before it is made, correct it after.
Reserve = Callable[[int], Callable[[int | None], None]]


@dataclass(slots=True)
class Exchange:
    """One request the sandbox made through the relay, as logged (no header, no key)."""

    number: int
    method: str
    path: str
    status: int
    tokens: int | None = None
    refused: str = ""  # why it was not sent on ("" when it was)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "tokens": self.tokens,
            "refused": self.refused,
            "seconds": round(self.seconds, 3),
        }


@dataclass(slots=True)
class _Answer:
    status: int
    body: bytes
    content_type: str = "application/json"


def _error(status: int, kind: str, message: str) -> _Answer:
    body = {"error": {"type": kind, "message": message, "from": "cassette-review model proxy"}}
    return _Answer(status, json.dumps(body).encode())


def _usage_total(usage: Any) -> int | None:
    """The tokens a usage block counts: its `total_tokens`, else input + output."""
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int) and not isinstance(total, bool):
        return total
    inp, out = usage.get("input_tokens"), usage.get("output_tokens")
    if isinstance(inp, int) and isinstance(out, int) and not isinstance(inp | out, bool):
        return inp + out
    return None


def _stream_usage(text: str) -> dict[str, Any] | None:
    """The usage a streamed (SSE) answer reports, or None when it reports none.

    OpenAI chat sends one last chunk with `usage` when asked (`stream_options.include_usage`);
    Anthropic sends the input tokens in `message_start`'s message and the output tokens so
    far in each `message_delta` (cumulative: the last one counts)."""
    usage: dict[str, Any] | None = None
    for event in event_payloads(text):
        if not isinstance(event, dict):
            continue
        if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
            started = event["message"].get("usage")
            if isinstance(started, dict):
                usage = {**(usage or {}), **started}
        elif event.get("type") == "message_delta" and isinstance(event.get("usage"), dict):
            usage = {**(usage or {}), **event["usage"]}
        elif isinstance(event.get("usage"), dict):
            usage = event["usage"]  # an OpenAI chunk carries the whole count
    return usage


def answer_tokens(body: bytes) -> int | None:
    """The tokens an answer reports (OpenAI or Anthropic shapes, whole or streamed), else None."""
    try:
        data = json.loads(body)
    except ValueError:
        # Not one JSON document: a server-sent event stream, read for its usage events.
        return _usage_total(_stream_usage(body.decode("utf-8", "replace")))
    return _usage_total(data.get("usage") if isinstance(data, dict) else None)


@dataclass
class ModelProxy:
    """Serves the relay's Unix socket; `start()` it, `close()` it (or use `with`)."""

    endpoint: Endpoint
    key: str
    socket_path: Path
    allow: Iterable[str] = ()
    max_calls: int = 3
    max_tokens: int = 20_000
    timeout: float = 60.0
    reserve: Reserve | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    calls: int = 0
    tokens: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        parts = urlsplit(self.endpoint.url)
        self.path = parts.path  # the one path the sandbox may post to

    # --- the sandbox's view -------------------------------------------------------------

    def base_path(self) -> str:
        """The base URL's path the sandbox is given after the relay's address (`/v1`)."""
        return self.path[: -len(APIS[self.endpoint.api])] or ""

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> ModelProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        server.daemon_threads = True
        # The sandbox's uid connects to it; the folder around it decides who else can.
        os.chmod(self.socket_path, 0o666)  # noqa: S103
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one exchange -------------------------------------------------------------------

    def _scrub(self, data: bytes) -> bytes:
        """An answer with the key replaced by the placeholder wherever it is quoted."""
        return data.replace(self.key.encode(), PLACEHOLDER.encode()) if self.key else data

    def _headers(self, sent: dict[str, str]) -> dict[str, str]:
        headers = {k: sent[k] for k in _PASSED_HEADERS if k in sent}
        headers.setdefault("content-type", "application/json")
        if self.endpoint.api == "anthropic-messages":
            headers["x-api-key"] = self.key
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        else:
            headers["authorization"] = f"Bearer {self.key}"
        return headers

    def _take(self) -> str:
        """Count one call against the caps, or say which cap refuses it."""
        with self._lock:
            if self.calls + 1 > self.max_calls:
                return (
                    f"cap reached: this record pass may make {self.max_calls} model calls "
                    f"and has made {self.calls}"
                )
            if self.tokens >= self.max_tokens:
                return (
                    f"cap reached: this record pass may spend {self.max_tokens} tokens "
                    f"and has spent {self.tokens}"
                )
            self.calls += 1
            return ""

    def _forward(self, body: bytes, sent: dict[str, str]) -> tuple[_Answer, int | None]:
        settle: Callable[[int | None], None] | None = None
        if self.reserve is not None:
            try:
                settle = self.reserve(0)
            except CapRefused as exc:
                return _error(429, "cap_reached", str(exc)), None
        try:
            with SafeClient(
                self.allow, timeout=self.timeout, max_bytes=MAX_ANSWER_BYTES, retries=1
            ) as client:
                response = client.post(self.endpoint.url, headers=self._headers(sent), content=body)
        except (OutboundRefused, OutboundError) as exc:
            if settle is not None:
                settle(0)
            message = self._scrub(str(exc).encode()).decode("utf-8", "replace")
            return _error(502, "upstream_unreachable", message), None
        tokens = answer_tokens(response.body) if response.status < 400 else 0
        if settle is not None:
            settle(tokens)
        kind = response.header("content-type") or "application/json"
        return _Answer(response.status, self._scrub(response.body), kind), tokens

    def handle(self, method: str, target: str, sent: dict[str, str], read: Callable) -> _Answer:
        """Answer one request of the sandbox (refused, capped or sent on)."""
        started = time.monotonic()
        tokens: int | None = None
        refusal = self._refusal(method, target, sent)
        if refusal is not None:
            answer = refusal
        else:
            body = read(int(sent["content-length"]))
            if (refusal_text := self._take()) != "":
                answer = _error(429, "cap_reached", refusal_text)
            else:
                answer, tokens = self._forward(body, sent)
                if tokens:
                    with self._lock:
                        self.tokens += tokens
        refused = ""
        if answer.status in (403, 405, 411, 413, 429) or answer.status == 502:
            try:
                refused = json.loads(answer.body)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                refused = ""
        with self._lock:
            exchange = Exchange(
                len(self.exchanges) + 1,
                method[:10],
                target[:200],
                answer.status,
                tokens,
                refused,
                time.monotonic() - started,
            )
            self.exchanges.append(exchange)
        logger.info(
            "model proxy %s: %s %s -> %s (%s tokens)%s",
            self.endpoint.name,
            exchange.method,
            exchange.path,
            exchange.status,
            tokens,
            f": {refused}" if refused else "",
        )
        return answer

    def _refusal(self, method: str, target: str, sent: dict[str, str]) -> _Answer | None:
        if method != "POST":
            return _error(405, "method_not_allowed", f"only POST {self.path} is relayed")
        if target != self.path:
            return _error(403, "path_not_allowed", f"only POST {self.path} is relayed")
        if "transfer-encoding" in sent or "content-length" not in sent:
            return _error(411, "length_required", "send the body with a Content-Length")
        length = sent["content-length"]
        if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
            return _error(413, "too_large", f"a request body is at most {MAX_REQUEST_BYTES} bytes")
        return None


class _Handler(BaseHTTPRequestHandler):
    """One connection from the relay: one request, one answer, then closed."""

    owner: ModelProxy
    protocol_version = "HTTP/1.0"
    timeout = 30  # a sandbox that opens a connection and sends nothing

    def _serve(self) -> None:
        sent = {k.lower(): v for k, v in self.headers.items()}
        answer = self.owner.handle(self.command, self.path, sent, self.rfile.read)
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer.body)

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve
    do_CONNECT = _serve

    def version_string(self) -> str:
        return "cassette-review-model-proxy"

    def log_message(self, fmt: str, *args: Any) -> None:
        pass  # every exchange is logged by ModelProxy.handle, without headers
