from __future__ import annotations

import json
import re

import harness

from .conftest import REPO, Client

COMMITTED = REPO / "replay.jsonl"
ORDER_ID = re.compile(r"ord_[0-9a-f]+")


def rows():
    return [json.loads(line) for line in COMMITTED.read_text(encoding="utf-8").splitlines()]


def is_stub(row):
    return row["url"] != harness.MODEL_URL


def test_replay_against_a_fresh_stub_reproduces_replay_jsonl(shop, tmp_path):
    model = harness.RecordedModel(REPO / "recordings")
    scenarios = json.loads((REPO / "scenarios.json").read_text())
    log, answers = harness.run_all(scenarios, model, shop.base)
    out = tmp_path / "replay.jsonl"
    log.write(out)
    assert out.read_text().replace(shop.base, "http://127.0.0.1:8080") == COMMITTED.read_text()
    # and the live stub agrees with every stub row it served
    for row in log.rows:
        if is_stub(row):
            status, hop, _ = shop.request("GET", f"/_trace/{row['trace_id']}")
            assert status == 200
            assert (hop["status"], hop["req"], hop["resp"], hop["idempotency_key"]) == (
                row["status"], row["req"], row["resp"], row["headers"]["Idempotency-Key"])


def test_every_tool_call_reaches_the_stub_with_the_same_arguments():
    pending = []
    for row in rows():
        if is_stub(row):
            assert pending, f"stub hop without a tool call: {row['trace_id']}"
            assert row["req"] == pending.pop(0)
        else:
            assert not pending, f"tool calls never sent: {pending}"
            for call in row["resp"]["choices"][0]["message"].get("tool_calls") or []:
                pending.append(json.loads(call["function"]["arguments"]))
    assert not pending


def test_model_output_only_mentions_ids_the_stub_issued():
    issued = {row["resp"]["id"] for row in rows() if is_stub(row) and row["status"] in (200, 201)}
    mentioned = set()
    for row in rows():
        if not is_stub(row):
            mentioned |= set(ORDER_ID.findall(row["resp"]["choices"][0]["message"].get("content") or ""))
    assert mentioned and mentioned <= issued


def test_every_stub_write_logs_its_idempotency_key():
    for row in rows():
        if is_stub(row) and row["method"] == "POST":
            assert row["headers"].get("Idempotency-Key", "").startswith("idem_")


def test_a_missing_recording_stops_the_run_with_its_key(shop, tmp_path):
    scenarios = json.loads((REPO / "scenarios.json").read_text())
    try:
        harness.run_all(scenarios, harness.RecordedModel(tmp_path), shop.base)
    except harness.MissingRecording as exc:
        assert re.search(r"[0-9a-f]{16}", str(exc)) and str(tmp_path) in str(exc)
    else:
        raise AssertionError("replay without recordings must fail")


def test_recordings_are_keyed_by_their_request():
    for path in (REPO / "recordings").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.stem == data["key"] == harness.cassette_key(data["request"])
