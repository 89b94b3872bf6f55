"""Order agent harness: the model drives the shop stub through one tool, create_order.

Every HTTP hop (model chat and stub) becomes one line of replay.jsonl:
{url, method, status, req, resp, trace_id, headers}.

    python harness.py --spawn-stub                 # replay recorded model turns, fresh stub on :8080
    python harness.py --shop-url http://127.0.0.1:8080
    OPENAI_API_KEY=... python harness.py --mode record --spawn-stub

In replay mode the model turns come from recordings/<key>.json (key = first 16 hex of
sha256 of the canonical request); a missing recording stops the run with its key.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4o-mini-2024-07-18"
MODEL_URL = os.environ.get("MODEL_URL", "https://api.openai.com/v1/chat/completions")
MAX_TURNS = 4
VOLATILE = ("user", "request_id", "id", "created")

SYSTEM_PROMPT = (
    "You place orders in the Beanery shop with the create_order tool. Catalog: A-1 espresso "
    "beans 1 kg, B-2 paper filters 100 pack, C-3 hand grinder. Place each requested item with "
    "one call. Then confirm every order with its order id exactly as the tool returned it, or "
    "say what failed. Never make up an order id."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Create one order in the shop.",
            "parameters": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
        },
    }
]


class MissingRecording(RuntimeError):
    pass


def cassette_key(payload: dict[str, Any]) -> str:
    kept = {k: v for k, v in payload.items() if k not in VOLATILE}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def short_hash(prefix: str, text: str, n: int) -> str:
    return prefix + hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


# ------------------------------------------------------------------ model side


class RecordedModel:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        key = cassette_key(payload)
        path = self.directory / f"{key}.json"
        if not path.is_file():
            raise MissingRecording(f"no recording for model request {key}: {path} (run --mode record)")
        return json.loads(path.read_text(encoding="utf-8"))["response"]


class LiveModel:
    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        api_key = os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise SystemExit("error: --mode record needs OPENAI_API_KEY")
        request = urllib.request.Request(
            MODEL_URL,
            data=json.dumps(payload).encode("utf-8"),
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)


class RecordingModel:
    """Record mode: ask the live model and keep one recording per request."""

    def __init__(self, live: Any, directory: Path, clock=lambda: datetime.now(timezone.utc)) -> None:
        self.live, self.directory, self.clock = live, directory, clock

    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        response = self.live.complete(payload)
        key = cassette_key(payload)
        record = {
            "key": key,
            "request": payload,
            "response": response,
            "recorded_at": self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "model": response.get("model", payload["model"]),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"{key}.json").write_text(
            json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return response


# ------------------------------------------------------------------ shop side


def post_order(shop_url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(
        shop_url.rstrip("/") + "/orders", data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:  # 4xx/5xx still carry a JSON body
        return err.code, json.load(err)


def tool_result(status: int, body: dict) -> dict:
    # 200 (replayed) and 201 (created) mean the same to the model, so the next model
    # request, and its recording key, do not depend on whether the stub was fresh.
    if status in (200, 201):
        return {"ok": True, "order": body}
    return {"ok": False, "status": status, "error": body.get("error", "")}


# ------------------------------------------------------------------ the loop


class HopLog:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, **row: Any) -> None:
        self.rows.append(row)

    def write(self, path: Path) -> None:
        path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in self.rows), encoding="utf-8")


def run_scenario(scenario: dict[str, str], model: Any, shop_url: str, log: HopLog) -> str:
    name = scenario["name"]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": scenario["user"]},
    ]
    hop = 0

    def next_trace_id() -> str:
        nonlocal hop
        hop += 1
        return short_hash("tr_", f"{name}:{hop}", 16)

    for _ in range(MAX_TURNS):
        payload = {"model": MODEL, "messages": list(messages), "tools": TOOLS, "tool_choice": "auto", "temperature": 0}
        trace_id = next_trace_id()
        response = model.complete(payload)
        log.add(url=MODEL_URL, method="POST", status=200, req=payload, resp=response, trace_id=trace_id,
                headers={"Content-Type": "application/json", "X-Trace-Id": trace_id})
        message = response["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return message.get("content") or ""
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            args = json.loads(call["function"]["arguments"])
            body = {"sku": args.get("sku"), "qty": args.get("qty")}
            trace_id = next_trace_id()
            # One key per tool call: a retried call reuses it, a new call gets a new one.
            headers = {
                "Content-Type": "application/json",
                "Idempotency-Key": short_hash("idem_", f"{name}:{call['id']}", 20),
                "X-Trace-Id": trace_id,
            }
            status, resp = post_order(shop_url, body, headers)
            log.add(url=shop_url.rstrip("/") + "/orders", method="POST", status=status, req=body, resp=resp,
                    trace_id=trace_id, headers=headers)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps(tool_result(status, resp), sort_keys=True)})
    raise RuntimeError(f"{name}: no final answer after {MAX_TURNS} turns")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def spawned_stub(port: int) -> Iterator[str]:
    """A fresh stub (empty state) for one run, stopped afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1", "STUB_STATE": f"{tmp}/state.json", "STUB_QUIET": "1"}
        proc = subprocess.Popen([sys.executable, str(HERE / "shop_stub.py")], env=env, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"shop stub did not start on port {port}")
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def run_all(scenarios: list[dict], model: Any, shop_url: str) -> tuple[HopLog, dict[str, str]]:
    log = HopLog()
    answers = {s["name"]: run_scenario(s, model, shop_url, log) for s in scenarios}
    return log, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.py")
    parser.add_argument("--mode", choices=["replay", "record"], default="replay")
    parser.add_argument("--shop-url", default=os.environ.get("SHOP_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--spawn-stub", action="store_true", help="start a fresh shop_stub.py for this run")
    parser.add_argument("--port", type=int, default=8080, help="port for --spawn-stub (0 = any free port)")
    parser.add_argument("--scenarios", type=Path, default=HERE / "scenarios.json")
    parser.add_argument("--recordings", type=Path, default=HERE / "recordings")
    parser.add_argument("--out", type=Path, default=HERE / "replay.jsonl")
    args = parser.parse_args(argv)

    scenarios = json.loads(args.scenarios.read_text(encoding="utf-8"))
    model = RecordedModel(args.recordings) if args.mode == "replay" else RecordingModel(LiveModel(), args.recordings)
    try:
        if args.spawn_stub:
            with spawned_stub(args.port or free_port()) as url:
                log, answers = run_all(scenarios, model, url)
        else:
            log, answers = run_all(scenarios, model, args.shop_url)
    except MissingRecording as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.write(args.out)
    for name, text in answers.items():
        print(f"[{name}] {text}")
    print(f"{len(log.rows)} hops -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
