from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from shop_stub import make_server

REPO = Path(__file__).resolve().parents[1]


class Client:
    def __init__(self, base: str) -> None:
        self.base = base

    def request(self, method: str, path: str, body=None, headers=None, raw: bytes | None = None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.load(resp), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, json.load(err), dict(err.headers)


@pytest.fixture
def stub(tmp_path):
    """A stub on a free 127.0.0.1 port; yields (base url, state file)."""
    state = tmp_path / "state.json"
    servers = []

    def start():
        server = make_server("127.0.0.1", 0, state)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start, state
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def shop(stub):
    start, _ = stub
    return Client(start())
