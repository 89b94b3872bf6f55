"""Shop stub for the order agent.

POST /orders            create an order; Idempotency-Key header required
                        201 created, 200 same key + same body (replayed),
                        409 same key + different body, 400 bad input or no key
GET  /orders/{id}       one order
GET  /_trace/{trace_id} what the stub stored for that hop (method, path, status,
                        request body, idempotency key, response body)

The trace id of a hop comes from the X-Trace-Id request header (or is generated) and
is echoed in the response. State (orders, keys, traces) is written to STUB_STATE
after every change, so a restarted stub still answers /_trace for earlier hops.

    PORT=8080 STUB_STATE=stub_state.json python shop_stub.py
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CATALOG = {"A-1": "Espresso beans, 1 kg", "B-2": "Paper filters, 100 pack", "C-3": "Hand grinder"}
MAX_QTY = 100
MAX_BODY = 64 * 1024
TRACE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def order_id_for(key: str) -> str:
    # Derived from the key, not random: re-driving the same hops against a fresh stub
    # issues the same ids, so a recorded trace can be compared with a live one.
    return "ord_" + hashlib.sha256(f"order:{key}".encode()).hexdigest()[:12]


def fingerprint(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def validate(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "body must be a JSON object"
    extra = set(body) - {"sku", "qty"}
    if extra:
        return f"unexpected fields: {', '.join(sorted(extra))}"
    if body.get("sku") not in CATALOG:
        return f"unknown sku {body.get('sku')!r}; known: {', '.join(CATALOG)}"
    qty = body.get("qty")
    if not isinstance(qty, int) or isinstance(qty, bool) or not 1 <= qty <= MAX_QTY:
        return f"qty must be an integer between 1 and {MAX_QTY}"
    return None


class ShopState:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.orders: dict[str, dict] = {}
        self.keys: dict[str, dict] = {}
        self.traces: dict[str, dict] = {}
        if path and path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            self.orders, self.keys, self.traces = saved["orders"], saved["keys"], saved["traces"]

    def create_order(self, key: str | None, body: Any) -> tuple[int, dict]:
        if not key:
            return 400, {"error": "missing Idempotency-Key header"}
        problem = validate(body)
        if problem:
            return 400, {"error": problem}
        with self.lock:
            seen = self.keys.get(key)
            if seen is not None:
                if seen["fingerprint"] != fingerprint(body):
                    return 409, {"error": "Idempotency-Key was already used with a different body"}
                return 200, self.orders[seen["order_id"]]
            order = {"id": order_id_for(key), "sku": body["sku"], "qty": body["qty"], "status": "created"}
            self.orders[order["id"]] = order
            self.keys[key] = {"fingerprint": fingerprint(body), "order_id": order["id"]}
            return 201, order

    def get_order(self, order_id: str) -> tuple[int, dict]:
        with self.lock:
            order = self.orders.get(order_id)
        return (200, order) if order else (404, {"error": f"no order {order_id}"})

    def record(self, trace_id: str, hop: dict) -> None:
        with self.lock:
            self.traces[trace_id] = hop
            self._save()

    def trace(self, trace_id: str) -> dict | None:
        with self.lock:
            return self.traces.get(trace_id)

    def _save(self) -> None:
        if not self.path:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = {"orders": self.orders, "keys": self.keys, "traces": self.traces}
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)


class Handler(BaseHTTPRequestHandler):
    server_version = "ShopStub/1.0"
    state: ShopState  # set by make_server

    def do_POST(self) -> None:
        if self.path != "/orders":
            return self._send(404, {"error": "not found"})
        trace_id = self._trace_id()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._send(413, {"error": "body too large"}, trace_id)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except json.JSONDecodeError:
            body = None
        key = self.headers.get("Idempotency-Key")
        status, resp = self.state.create_order(key, body)
        self.state.record(
            trace_id,
            {
                "trace_id": trace_id,
                "method": "POST",
                "path": self.path,
                "status": status,
                "req": body if body is not None else raw,
                "idempotency_key": key,
                "resp": resp,
            },
        )
        self._send(status, resp, trace_id)

    def do_GET(self) -> None:
        if self.path.startswith("/_trace/"):
            hop = self.state.trace(self.path[len("/_trace/") :])
            return self._send(200, hop) if hop else self._send(404, {"error": "unknown trace id"})
        if self.path.startswith("/orders/"):
            trace_id = self._trace_id()
            status, resp = self.state.get_order(self.path[len("/orders/") :])
            hop = {"trace_id": trace_id, "method": "GET", "path": self.path, "status": status,
                   "req": None, "idempotency_key": None, "resp": resp}
            self.state.record(trace_id, hop)
            return self._send(status, resp, trace_id)
        self._send(404, {"error": "not found"})

    def _trace_id(self) -> str:
        given = self.headers.get("X-Trace-Id", "")
        return given if TRACE_ID.match(given) else "tr_" + uuid.uuid4().hex[:16]

    def _send(self, status: int, body: dict, trace_id: str | None = None) -> None:
        data = json.dumps(body, sort_keys=True).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if trace_id:
            self.send_header("X-Trace-Id", trace_id)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args: Any) -> None:
        if os.environ.get("STUB_QUIET") != "1":
            super().log_message(fmt, *args)


def make_server(host: str, port: int, state_path: Path | None) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": ShopState(state_path)})
    return ThreadingHTTPServer((host, port), handler)


def main() -> None:
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8080"))
    state_path = Path(os.environ.get("STUB_STATE", "stub_state.json"))
    server = make_server(host, port, state_path)
    print(f"shop stub on http://{host}:{server.server_address[1]} (state: {state_path})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
