"""A deterministic OpenAI-compatible chat endpoint on loopback, with switches a test flips.

A message that mentions an order gets a `create_order` tool call (`qty` from the switch);
any other gets the switch's text. Every answer reports usage (15 tokens). With `reject`,
it answers 401 quoting the key it was given, as some providers' error bodies do.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def answer(request: dict[str, Any], *, qty: int = 1, text: str = "bug") -> dict[str, Any]:
    """The chat completion this model gives `request`."""
    last = str(request["messages"][-1]["content"])
    if "order" in last.lower():
        call = {"name": "create_order", "arguments": json.dumps({"sku": "A-1", "qty": qty})}
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "call_1", "type": "function", "function": call}]}  # fmt: skip
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": text}, "stop"
    return {
        "id": "chatcmpl-fake0001",
        "object": "chat.completion",
        "model": request.get("model", "gpt-4o-mini"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


class ChatModel:
    """The server; `url` is its base URL (…/v1), `seen` the Authorization headers it got."""

    def __init__(self) -> None:
        self.qty, self.text, self.reject = 1, "bug", False
        self.seen: list[str] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization", "")
                model.seen.append(auth)
                if model.reject:
                    status, out = 401, {"error": {"message": f"Incorrect API key: {auth[7:]}"}}
                else:
                    status, out = 200, answer(body, qty=model.qty, text=model.text)
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
