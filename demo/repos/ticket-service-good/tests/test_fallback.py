from __future__ import annotations

import pytest

from ticketing import fallback_ticket, find_timestamp, ticket_problem

from .conftest import LINES


@pytest.mark.parametrize(
    "line, service, severity, first_seen",
    [
        (LINES[0], "checkout-api", "high", "2026-11-12T08:14:03Z"),
        (LINES[1], "auth-svc", "medium", "Nov 12 08:15:44"),
        (LINES[2], "search-indexer", "critical", "2026-11-12T09:01:17"),
        (LINES[3], "payments", "critical", None),
        (LINES[4], "unknown", "medium", None),
        (LINES[5], "mailer", "low", "2026-11-12T10:42:00+01:00"),
    ],
)
def test_fallback_ticket_from_rules(line, service, severity, first_seen):
    ticket = fallback_ticket(line)
    assert (ticket["service"], ticket["severity"], ticket["first_seen"]) == (service, severity, first_seen)
    assert ticket["needs_human"] is True and ticket["confidence"] <= 0.3
    assert ticket["evidence"] and ticket["evidence"] in line
    assert ticket_problem(ticket, line) is None


def test_a_date_without_a_time_is_not_a_timestamp():
    assert find_timestamp("batch 2026-11-11 halted") == (None, 0)


def test_no_zone_is_invented():
    assert find_timestamp("[2026-11-12 09:01:17] x")[0] == "2026-11-12T09:01:17"


def test_evidence_is_capped_but_still_a_quote():
    line = "2026-11-12T08:14:03Z api ERROR " + "x" * 500
    ticket = fallback_ticket(line)
    assert len(ticket["evidence"]) == 200 and ticket["evidence"] in line


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"severity": "urgent"}, "severity"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"evidence": "not in the line"}, "evidence"),
        ({"needs_human": "no"}, "needs_human"),
        ({"first_seen": 1763000000}, "first_seen"),
    ],
)
def test_ticket_problems_are_named(change, problem):
    ticket = {**fallback_ticket(LINES[0]), **change}
    assert problem in ticket_problem(ticket, LINES[0])
