from __future__ import annotations

import hashlib
import json

import pytest

from triage.cassette import (
    CassetteMismatch,
    CassetteMiss,
    CassetteTransport,
    canonical,
    cassette_key,
)

from .conftest import REPO

PAYLOAD = {"model": "m", "messages": [{"role": "user", "content": "Grüße"}], "temperature": 0}


class FakeLive:
    def __init__(self):
        self.calls = []

    def send(self, payload):
        self.calls.append(payload)
        return {"model": "m-2024", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}


def test_volatile_keys_do_not_change_the_key():
    noisy = {**PAYLOAD, "user": "u1", "request_id": "r-9", "id": "x", "created": 1763000000}
    assert cassette_key(noisy) == cassette_key(PAYLOAD)


def test_key_is_first_16_hex_of_sha256_of_sorted_compact_json():
    text = '{"messages":[{"content":"Grüße","role":"user"}],"model":"m","temperature":0}'
    assert canonical(PAYLOAD) == text
    assert cassette_key(PAYLOAD) == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_real_change_changes_the_key():
    assert cassette_key({**PAYLOAD, "temperature": 0.2}) != cassette_key(PAYLOAD)


def test_replay_of_a_missing_key_names_key_and_path(tmp_path):
    transport = CassetteTransport("replay", tmp_path, live=FakeLive())
    with pytest.raises(CassetteMiss) as exc:
        transport.send(PAYLOAD)
    key = cassette_key(PAYLOAD)
    assert key in str(exc.value)
    assert str(tmp_path / f"{key}.json") in str(exc.value)
    assert transport.live.calls == []


def test_replay_refuses_a_cassette_holding_another_request(tmp_path):
    key = cassette_key(PAYLOAD)
    other = {**PAYLOAD, "temperature": 1}
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": key, "request": other, "response": {}}))
    with pytest.raises(CassetteMismatch):
        CassetteTransport("replay", tmp_path).send(PAYLOAD)


def test_record_writes_one_cassette_per_request_then_replays_it(tmp_path):
    live = FakeLive()
    recorder = CassetteTransport("record", tmp_path, live=live, clock=lambda: "2026-11-10T09:00:00Z")
    recorder.send({**PAYLOAD, "request_id": "a"})
    recorder.send({**PAYLOAD, "messages": PAYLOAD["messages"] * 2, "request_id": "b"})
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    stored = json.loads(files[0].read_text())
    assert set(stored) == {"key", "request", "response", "recorded_at", "model"}
    assert stored["model"] == "m-2024"
    assert stored["recorded_at"] == "2026-11-10T09:00:00Z"
    replayed = CassetteTransport("replay", tmp_path).send({**PAYLOAD, "request_id": "c"})
    assert replayed["choices"][0]["message"]["content"] == "ok"
    assert len(live.calls) == 2


def test_passthrough_neither_reads_nor_writes_cassettes(tmp_path):
    live = FakeLive()
    CassetteTransport("passthrough", tmp_path, live=live).send(PAYLOAD)
    assert list(tmp_path.iterdir()) == []
    assert len(live.calls) == 1


def test_unknown_mode_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="CASSETTE_MODE"):
        CassetteTransport("live", tmp_path)


@pytest.mark.parametrize("path", sorted((REPO / "cassettes").glob("*.json")), ids=lambda p: p.name)
def test_committed_cassette_is_consistent(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data) == {"key", "request", "response", "recorded_at", "model"}
    assert path.stem == data["key"] == cassette_key(data["request"])
    assert data["model"] == data["response"]["model"]
    assert data["recorded_at"].endswith("Z")
