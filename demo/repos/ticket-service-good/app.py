"""Ticket service: POST /extract {"line": "..."} -> ticket JSON.

    PORT=8000 MODEL_URL=https://api.openai.com/v1/chat/completions OPENAI_API_KEY=... python app.py

Environment: PORT (8000), HOST (127.0.0.1), MODEL_URL (unset = rule-based only),
OPENAI_API_KEY (optional), MODEL_TIMEOUT seconds (5), LEDGER_PATH (ledger.jsonl),
FALLBACK_TTL seconds a fallback ticket stays cached (300).
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ticketing import Ledger, ModelClient, TicketService

MAX_LINE = 4096


class Handler(BaseHTTPRequestHandler):
    server_version = "TicketService/1.0"
    service: TicketService  # set by make_server

    def do_GET(self) -> None:
        if self.path == "/healthz":
            return self._send(200, {"ok": True})
        self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/extract":
            return self._send(404, {"error": "not found"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(min(length, 2 * MAX_LINE + 1024)) or b"null")
        except (ValueError, json.JSONDecodeError):
            return self._send(400, {"error": "body must be JSON"})
        line = body.get("line") if isinstance(body, dict) else None
        if not isinstance(line, str) or not line.strip():
            return self._send(400, {"error": 'expected {"line": "<non-empty string>"}'})
        if len(line) > MAX_LINE:
            return self._send(400, {"error": f"line longer than {MAX_LINE} characters"})
        self._send(200, self.service.extract(line))

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args: Any) -> None:
        if os.environ.get("QUIET") != "1":
            super().log_message(fmt, *args)


def make_server(host: str, port: int, service: TicketService) -> ThreadingHTTPServer:
    return ThreadingHTTPServer((host, port), type("BoundHandler", (Handler,), {"service": service}))


def service_from_env() -> TicketService:
    url = os.environ.get("MODEL_URL")
    model = ModelClient(url, os.environ.get("OPENAI_API_KEY"), float(os.environ.get("MODEL_TIMEOUT", "5"))) if url else None
    ledger = Ledger(Path(os.environ.get("LEDGER_PATH", "ledger.jsonl")))
    return TicketService(model, ledger, fallback_ttl=float(os.environ.get("FALLBACK_TTL", "300")))


def main() -> None:
    host, port = os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000"))
    server = make_server(host, port, service_from_env())
    print(f"ticket service on http://{host}:{server.server_address[1]}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
