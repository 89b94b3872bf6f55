"""Replay samples/lines.txt with recorded model answers from recordings/ (no API key needed)."""

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Recorded(BaseHTTPRequestHandler):
    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        path = os.path.join("recordings", key + ".json")
        if os.path.exists(path):
            with open(path) as f:
                body, code = json.dumps(json.load(f)["response"]).encode(), 200
        else:
            body, code = b'{"error": "not recorded"}', 404
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    fake = HTTPServer(("127.0.0.1", 0), Recorded)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    os.environ["MODEL_URL"] = f"http://127.0.0.1:{fake.server_address[1]}/v1/chat/completions"
    os.makedirs("out", exist_ok=True)
    os.environ["LEDGER_PATH"] = "out/ledger.jsonl"
    import app  # reads MODEL_URL / LEDGER_PATH at import

    with open("samples/lines.txt") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    tickets = [{"line": l, "ticket": app.extract(l)} for l in lines]
    with open("out/tickets.json", "w") as f:
        json.dump(tickets, f, indent=2)
    fake.shutdown()
    print(f"{len(tickets)} tickets written to out/tickets.json")


if __name__ == "__main__":
    main()
