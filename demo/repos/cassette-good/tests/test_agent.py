from __future__ import annotations

import json

from triage.__main__ import main
from triage.agent import triage_all, triage_ticket
from triage.cassette import CassetteTransport

from .conftest import REPO

EXPECTED = {
    "T-1001": ("incident", "P1", "payments-platform", ["get_service_status"]),
    "T-1002": ("account", "P3", "identity", ["get_service_status"]),
    "T-1003": ("billing", "P2", "billing-ops", ["get_customer", "get_service_status"]),
    "T-1004": ("feature_request", "P4", "product", []),
}


def test_all_tickets_replay_offline(tickets, toolbox, replay, no_network):
    answers = triage_all(tickets, replay, toolbox)
    got = {a["ticket_id"]: (a["category"], a["priority"], a["team"], a["tools_used"]) for a in answers}
    assert got == EXPECTED


def test_a_tool_call_conversation_spans_one_cassette_per_turn(tickets, toolbox, no_network):
    seen = []

    class Spy(CassetteTransport):
        def send(self, payload):
            seen.append(payload)
            return super().send(payload)

    ticket = next(t for t in tickets if t["id"] == "T-1003")
    answer = triage_ticket(ticket, Spy("replay", REPO / "cassettes"), toolbox)
    assert answer["turns"] == 3 == len(seen)
    for before, after in zip(seen, seen[1:]):
        # each request = the previous messages + the model's tool call + the tool result
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert [m["role"] for m in after["messages"][len(before["messages"]) :]] == ["assistant", "tool"]


def test_request_ids_differ_per_run_but_keys_do_not(tickets, toolbox, no_network):
    ids = iter(f"rid-{n}" for n in range(100))
    first = CassetteTransport("replay", REPO / "cassettes")
    triage_all(tickets, first, toolbox, new_request_id=lambda: next(ids))
    second = CassetteTransport("replay", REPO / "cassettes")
    triage_all(tickets, second, toolbox)
    assert first.used == second.used


def test_every_committed_cassette_is_used(tickets, toolbox, replay, no_network):
    triage_all(tickets, replay, toolbox)
    on_disk = {p.stem for p in (REPO / "cassettes").glob("*.json")}
    assert on_disk == set(replay.used), "orphan cassettes: prune them"


def test_demo_writes_sorted_answers(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("CASSETTE_MODE", "replay")
    monkeypatch.chdir(REPO)
    out = tmp_path / "answers.json"
    assert main(["--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [a["ticket_id"] for a in data["answers"]] == sorted(EXPECTED)
