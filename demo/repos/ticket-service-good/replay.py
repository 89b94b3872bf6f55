"""make replay: run samples/lines.txt through the real HTTP service, model answers from recordings/.

Writes out/tickets.json (deterministic) and out/ledger.jsonl. Exits 2, naming the
recording, if any model request was not recorded.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import urllib.request
from pathlib import Path

from app import make_server
from fake_model import FakeModel
from ticketing import Ledger, ModelClient, TicketService

HERE = Path(__file__).resolve().parent


def post_line(base: str, line: str) -> dict:
    request = urllib.request.Request(
        base + "/extract", data=json.dumps({"line": line}).encode("utf-8"),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def main() -> int:
    os.environ.setdefault("QUIET", "1")
    lines = [l for l in (HERE / "samples" / "lines.txt").read_text(encoding="utf-8").splitlines() if l.strip()]
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    ledger_path = out / "ledger.jsonl"
    ledger_path.unlink(missing_ok=True)
    with FakeModel(HERE / "recordings") as model:
        service = TicketService(ModelClient(model.url, timeout=5), Ledger(ledger_path))
        server = make_server("127.0.0.1", 0, service)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        try:
            base = f"http://127.0.0.1:{server.server_address[1]}"
            results = [{"line": line, "ticket": post_line(base, line)} for line in lines]
        finally:
            server.shutdown()
            server.server_close()
    if model.misses:
        for path in sorted(set(model.misses)):
            print(f"error: model request not recorded: {path}", file=sys.stderr)
        return 2
    (out / "tickets.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(results)} tickets -> out/tickets.json, ledger -> out/ledger.jsonl", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
