"""A deterministic Anthropic-messages endpoint on loopback, with switches a test flips.

`POST /v1/messages` with `x-api-key` and `anthropic-version`: a last user message that
mentions an order gets a `tool_use` block for `create_order` (`qty` from the switch), any
other gets the switch's text. Every answer reports usage (12 input, 8 output tokens); a
streamed one (`"stream": true`) comes as Anthropic's SSE events, its usage in `message_start`
and `message_delta`. With
`reject`, it answers 401 quoting the key it was given, as some providers' error bodies do.
A request without the version header, or to another path, is refused as the real API does.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.stubs.chat_model import LoopbackModel

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


def stream(whole: dict[str, Any]) -> bytes:
    """`whole` as Anthropic's message stream: input tokens in `message_start`, the output
    tokens (cumulative) in `message_delta`."""
    start = {k: v for k, v in whole.items() if k not in ("content", "usage")}
    start["usage"] = {"input_tokens": USAGE["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**start, "content": []}})
    ]
    for n, block in enumerate(whole["content"]):
        if block["type"] == "tool_use":
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        events += [
            ("content_block_start", {"type": "content_block_start", "index": n, "content_block": opened}),
            ("content_block_delta", {"type": "content_block_delta", "index": n, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": n}),
        ]  # fmt: skip
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": USAGE["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


class AnthropicModel(LoopbackModel):
    """The server; `url` is its base URL (…/v1), `seen` the x-api-key headers it got."""

    def __init__(self, port: int = 0) -> None:
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
                whole = answer(body, qty=model.qty, text=model.text)
                if body.get("stream"):
                    data = stream(whole)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                return self._send(200, whole)

            def log_message(self, *args: Any) -> None:
                pass

        self._serve(Handler, port)


if __name__ == "__main__":
    import sys

    AnthropicModel.main(sys.argv)
