"""A deterministic Anthropic-messages endpoint on loopback, with switches a test flips.

`POST /v1/messages` with `x-api-key` and `anthropic-version`: a last user message that
mentions an order gets a `tool_use` block for `create_order` (`qty` from the switch), any
other gets the switch's text. Every answer reports usage (12 input, 8 output tokens). With
`reject`, it answers 401 quoting the key it was given, as some providers' error bodies do.
A request without the version header, or to another path, is refused as the real API does.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"input_tokens": 12, "output_tokens": 8}


def _last_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def answer(request: dict[str, Any], *, qty: int = 1, text: str = "bug") -> dict[str, Any]:
    """The message this model gives `request`."""
    if "order" in _last_text(request).lower():
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": "toolu_01", "name": "create_order",
             "input": {"sku": "A-1", "qty": qty}},
        ]  # fmt: skip
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": text}], "end_turn"
    return {
        "id": "msg_fake0001",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "claude-3-5-haiku-20241022"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": USAGE,
    }


class AnthropicModel:
    """The server; `url` is its base URL (…/v1), `seen` the x-api-key headers it got."""

    def __init__(self) -> None:
        self.qty, self.text, self.reject = 1, "bug", False
        self.seen: list[str] = []
        self.paths: list[str] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, out: Any) -> None:
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("x-api-key", "")
                model.seen.append(key)
                model.paths.append(self.path)
                if self.path != "/v1/messages":
                    return self._send(404, {"type": "error", "error": {"type": "not_found_error"}})
                if not self.headers.get("anthropic-version"):
                    return self._send(400, {"type": "error", "error": {"message": "version"}})
                if model.reject:
                    error = {"type": "authentication_error", "message": f"invalid x-api-key {key}"}
                    return self._send(401, {"type": "error", "error": error})
                return self._send(200, answer(body, qty=model.qty, text=model.text))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
