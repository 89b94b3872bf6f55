"""Log line to ticket service. POST /extract {"line": ...}"""

import hashlib
import json
import os
import re
import time
import urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer

MODEL = "gpt-4o-mini-2024-07-18"
MODEL_URL = os.environ.get("MODEL_URL", "http://127.0.0.1:9000/v1/chat/completions")
LEDGER = os.environ.get("LEDGER_PATH", "ledger.jsonl")
RETRIES = 5

PROMPT = """You convert a log line to a JSON ticket with keys service, severity (low/medium/high/critical),
first_seen, evidence, confidence (0-1), needs_human. JSON only."""


def log_event(**event):
    with open(LEDGER, "a") as f:
        f.write(json.dumps(event) + "\n")


def ask_model(line):
    payload = {
        "model": MODEL,
        "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": line}],
        "temperature": 0,
    }
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    req = urllib.request.Request(MODEL_URL, json.dumps(payload).encode(), headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        data = json.loads(resp.read())
    return json.loads(data["choices"][0]["message"]["content"])


def rule_based(line):
    m = re.search(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}\S*", line)
    # every ticket needs a first_seen
    first_seen = m.group(0) if m else datetime.now(timezone.utc).isoformat()
    severity = "low"
    for word, sev in [("FATAL", "critical"), ("CRITICAL", "critical"), ("ERROR", "high"), ("WARN", "medium")]:
        if word in line:
            severity = sev
            break
    svc = re.search(r"([a-z]+-[a-z]+|[a-z]+):", line)
    return {
        "service": svc.group(1) if svc else "unknown",
        "severity": severity,
        "first_seen": first_seen,
        "evidence": line.strip(),
        "confidence": 0.3,
        "needs_human": True,
    }


def extract(line):
    sha = hashlib.sha256(line.encode()).hexdigest()
    last_error = None
    for attempt in range(1, RETRIES + 1):
        try:
            ticket = ask_model(line)
            if not isinstance(ticket, dict) or "severity" not in ticket:
                raise ValueError("bad ticket")
            if not ticket.get("first_seen"):
                ticket["first_seen"] = datetime.now(timezone.utc).isoformat()
            log_event(event="model_call", line_sha=sha, attempt=attempt, reason="ok",
                      needs_human=ticket.get("needs_human", False))
            return ticket
        except (ValueError, KeyError) as e:  # model answered but not with a ticket
            last_error = e
            log_event(event="model_call", line_sha=sha, attempt=attempt, reason=f"junk: {e}", needs_human=None)
        except OSError as e:  # connection problems: retry, then give up
            last_error = e
            log_event(event="model_call", line_sha=sha, attempt=attempt, reason=f"error: {e}", needs_human=None)
            if attempt == RETRIES:
                raise
        time.sleep(0.05 * attempt)
    log_event(event="fallback", line_sha=sha, attempt=RETRIES, reason=str(last_error), needs_human=True)
    return rule_based(line)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/extract":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        try:
            result = extract(body["line"])
            code = 200
        except Exception as e:
            result = {"error": str(e)}
            code = 500
        out = json.dumps(result).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def run(port=None):
    port = port if port is not None else int(os.environ.get("PORT", "8000"))
    server = HTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {port}")
    server.serve_forever()


if __name__ == "__main__":
    run()
