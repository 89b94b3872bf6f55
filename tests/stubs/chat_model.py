"""A deterministic OpenAI-compatible chat endpoint on loopback, with switches a test flips.

A message that mentions an order gets a `create_order` tool call (`qty` from the switch);
any other gets the switch's text. Every answer reports usage (15 tokens); a streamed one
(`"stream": true`) comes as SSE chunks, its usage in a last chunk only when
`stream_options.include_usage` asks for it, as OpenAI's does. With `reject`,
it answers 401 quoting the key it was given, as some providers' error bodies do.
"""

from __future__ import annotations

import json
import threading
import time
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


def stream(request: dict[str, Any], whole: dict[str, Any]) -> bytes:
    """`whole` as the SSE chunks a streamed request gets; usage last when it asks for it."""
    head = {k: whole[k] for k in ("id", "model")} | {"object": "chat.completion.chunk"}
    choice = whole["choices"][0]
    delta = {k: v for k, v in choice["message"].items() if v is not None}
    for n, call in enumerate(delta.get("tool_calls", [])):
        delta["tool_calls"][n] = {**call, "index": n}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
    ]
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": whole["usage"]})
    events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def use_as_team_endpoint(settings, monkeypatch, url: str, *, key_env: str, key: str,
                         api: str = "openai-chat", **caps: int) -> None:  # fmt: skip
    """Make the model at `url` the team's one spot-check endpoint ("team"), reachable on
    loopback, its key in the environment variable `key_env`."""
    from submissions.net.endpoints import parse_endpoints

    endpoint: dict[str, Any] = {"name": "team", "base_url": url, "api": api, "key_env": key_env}
    if caps:
        endpoint["caps"] = caps
    settings.OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.SPOT_CHECK_ENDPOINTS = parse_endpoints(json.dumps([endpoint]))
    monkeypatch.setenv(key_env, key)


class LoopbackModel:
    """A model API served on loopback in a daemon thread: `url` is its base URL (…/v1)."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @classmethod
    def main(cls, argv: list[str]) -> None:
        """`python -m tests.stubs.MODULE [PORT]`: a loopback endpoint to try spot checks with."""
        served = cls(int(argv[1]) if len(argv) > 1 else 0)  # type: ignore[call-arg]
        print(served.url, flush=True)
        try:
            served.thread.join()
        except KeyboardInterrupt:
            served.close()


class ChatModel(LoopbackModel):
    """The server; `url` is its base URL (…/v1), `seen` the Authorization headers it got."""

    def __init__(self, port: int = 0) -> None:
        self.qty, self.text, self.reject = 1, "bug", False
        self.delay = 0.0  # seconds each answer takes (lets concurrent callers interleave)
        self.seen: list[str] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization", "")
                model.seen.append(auth)
                if model.delay:
                    time.sleep(model.delay)
                if model.reject:
                    status, out = 401, {"error": {"message": f"Incorrect API key: {auth[7:]}"}}
                else:
                    status, out = 200, answer(body, qty=model.qty, text=model.text)
                kind = "application/json"
                if status == 200 and body.get("stream"):
                    data, kind = stream(body, out), "text/event-stream"
                else:
                    data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._serve(Handler, port)


if __name__ == "__main__":
    import sys

    ChatModel.main(sys.argv)
