from __future__ import annotations

import json

from fake_model import FakeModel
from ticketing import Ledger, ModelClient, TicketService, ticket_problem

from .conftest import LINES, REPO, closed_port_url, ledger_entries, post


def make(tmp_path, url, **kw):
    ledger = tmp_path / "ledger.jsonl"
    return TicketService(ModelClient(url, timeout=2) if url else None, Ledger(ledger), **kw), ledger


def test_model_ticket_then_cache_hit(tmp_path, serve):
    with FakeModel(REPO / "recordings") as model:
        service, ledger = make(tmp_path, model.url)
        base = serve(service)
        status, first = post(base, {"line": LINES[0]})
        _, again = post(base, {"line": LINES[0]})
    assert status == 200 and first["cached"] is False and first["needs_human"] is False
    assert again == {**first, "cached": True}
    assert len(model.requests) == 1
    assert [e["event"] for e in ledger_entries(ledger)] == ["model_call", "cache_hit"]


def test_junk_is_retried_once_then_falls_back(tmp_path, serve):
    with FakeModel(REPO / "recordings") as model:
        service, ledger = make(tmp_path, model.url)
        status, ticket = post(serve(service), {"line": LINES[4]})
    assert status == 200 and ticket["needs_human"] is True and ticket["first_seen"] is None
    assert len(model.requests) == 2
    events = ledger_entries(ledger)
    assert [(e["event"], e["attempt"]) for e in events] == [("model_call", 1), ("model_call", 2), ("fallback", 2)]
    assert events[0]["reason"].startswith("model junk")


def test_model_down_still_gives_a_valid_ticket(tmp_path, serve):
    with FakeModel(REPO / "recordings", down=True) as model:
        service, ledger = make(tmp_path, model.url)
        base = serve(service)
        tickets = [post(base, {"line": line}) for line in LINES]
    assert len(model.requests) == 2 * len(set(LINES))  # repeated line served from cache
    for line, (status, ticket) in zip(LINES, tickets):
        assert status == 200
        assert ticket_problem(ticket, line) is None
        assert ticket["needs_human"] is True and ticket["confidence"] <= 0.3
        assert ticket["evidence"] in line
    assert max(e["attempt"] for e in ledger_entries(ledger)) <= 2


def test_unreachable_model_port(tmp_path, serve):
    service, ledger = make(tmp_path, closed_port_url())
    status, ticket = post(serve(service), {"line": LINES[3]})
    assert status == 200 and ticket["needs_human"] is True and ticket["first_seen"] is None
    assert ledger_entries(ledger)[-1]["reason"].startswith("model unavailable")


def test_without_a_model_url_rules_answer(tmp_path, serve):
    service, ledger = make(tmp_path, None)
    status, ticket = post(serve(service), {"line": LINES[1]})
    assert status == 200 and ticket["first_seen"] == "Nov 12 08:15:44"
    assert ledger_entries(ledger) == [
        {"event": "fallback", "line_sha": ledger_entries(ledger)[0]["line_sha"], "attempt": 0,
         "reason": "model not configured (MODEL_URL unset)", "needs_human": True}
    ]


def test_cached_fallback_expires(tmp_path):
    now = [0.0]
    service, _ = make(tmp_path, closed_port_url(), fallback_ttl=60, clock=lambda: now[0])
    assert service.extract(LINES[0])["cached"] is False
    assert service.extract(LINES[0])["cached"] is True
    now[0] = 61
    assert service.extract(LINES[0])["cached"] is False


def test_bad_requests_are_400(tmp_path, serve):
    base = serve(make(tmp_path, None)[0])
    for body in ({}, {"line": ""}, {"line": 7}, ["x"], b"{nope", {"line": "x" * 5000}):
        assert post(base, body)[0] == 400, body
