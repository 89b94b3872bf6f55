"""A recorded stand-in for the chat completions endpoint, for tests and `make replay`.

Answers a request from recordings/<key>.json (key = first 16 hex of sha256 of the
canonical request, see RUNBOOK.md). An unknown request gets a 404 and is remembered
in `misses`, so the replay can fail loudly instead of quietly falling back.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ticketing import cassette_key


class FakeModel:
    def __init__(self, recordings: Path, down: bool = False) -> None:
        self.recordings, self.down = recordings, down
        self.requests: list[str] = []
        self.misses: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                key = cassette_key(payload)
                fake.requests.append(key)
                if fake.down:
                    return self._send(503, {"error": {"message": "model overloaded"}})
                path = fake.recordings / f"{key}.json"
                if not path.is_file():
                    fake.misses.append(str(path))
                    return self._send(404, {"error": {"message": f"no recording for key {key}: {path}"}})
                self._send(200, json.loads(path.read_text(encoding="utf-8"))["response"])

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"

    def __enter__(self) -> FakeModel:
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
