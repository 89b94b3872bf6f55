"""ledger.consistent: event synonyms, retry bounds, fallbacks, agreement with recordings."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from cassettes_app.checks.ledger import classify_event, ledger_consistent
from cassettes_app.formats import parse_path
from cassettes_app.parsed import LedgerEntry
from tests.paths import DEMO_REPOS

DEMO = DEMO_REPOS
PATH = "ledger.jsonl"


def ledger(*rows: dict[str, Any]) -> list[LedgerEntry]:
    return [
        LedgerEntry(line, row.get("event", row.get("type")), row)
        for line, row in enumerate(rows, 1)
    ]


def messages(outcome: Any) -> str:
    return "\n".join(item["message"] for item in outcome.evidence)


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        ("model_call", "model_call"),
        ("model", "model_call"),
        ("llm_call", "model_call"),
        ("LLM-Request", "model_call"),
        ("cache_hit", "cache_hit"),
        ("cache", "cache_hit"),
        ("cached", "cache_hit"),
        ("cache_miss", "other"),
        ("fallback", "fallback"),
        ("fallback_used", "fallback"),
        ("rule_based", "fallback"),
        ("model_error", "other"),
        ("startup", "other"),
        (None, "other"),
    ],
)
def test_classify_event(event: str | None, kind: str) -> None:
    assert classify_event(event) == kind


def test_one_retry_then_fallback_passes() -> None:
    entries = ledger(
        {"event": "model_call", "input": "a", "attempt": 1, "reason": "ok"},
        {"event": "llm_call", "input": "b", "attempt": 1, "reason": "timeout"},
        {"event": "llm_call", "input": "b", "attempt": 2, "reason": "timeout"},
        {"event": "fallback_used", "input": "b", "reason": "model down", "needs_human": True},
        {"event": "cache", "input": "a"},
    )
    outcome = ledger_consistent(entries, PATH)
    assert outcome.status == "pass", outcome.evidence
    assert "3 model calls, 1 cache hit, 1 fallback" in outcome.summary
    assert "at most 2 attempts" in outcome.summary
    one = ledger({"event": "model_call", "input": "a", "attempt": 1, "reason": "ok"})
    assert "at most 1 attempt per input" in ledger_consistent(one, PATH).summary


def test_retry_storm_by_attempt_field_fails() -> None:
    rows = [{"event": "model_call", "line_sha": "x", "attempt": n} for n in range(1, 6)]
    rows.append({"event": "fallback", "line_sha": "x", "reason": "junk", "needs_human": True})
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "fail"
    assert "retry storm (5 attempts for one input)" in outcome.summary
    assert outcome.evidence[0]["line"] == 1
    assert "lines 1, 2, 3, 4, 5" in outcome.evidence[0]["message"]


def test_consecutive_unnumbered_calls_for_one_input_are_retries() -> None:
    rows = [{"type": "llm", "request_id": "r1"}] * 3
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "fail"
    assert "3 attempts" in outcome.summary


def test_repeat_calls_for_one_input_apart_are_not_retries() -> None:
    # No cache (a service.caches matter), but no retry storm either.
    rows = [
        {"event": "model_call", "line_sha": "a", "attempt": 1},
        {"event": "model_call", "line_sha": "b", "attempt": 1},
        {"event": "model_call", "line_sha": "a", "attempt": 1},
        {"event": "model_call", "line_sha": "a", "attempt": 1},
    ]
    assert ledger_consistent(ledger(*rows), PATH).status == "pass"


def test_zero_based_attempts() -> None:
    rows = [{"event": "model_call", "key": "k", "attempt": n} for n in (0, 1)]
    assert ledger_consistent(ledger(*rows), PATH).status == "pass"
    rows.append({"event": "model_call", "key": "k", "attempt": 2})
    assert ledger_consistent(ledger(*rows), PATH).status == "fail"


def test_fallback_alone_with_high_attempt_is_a_storm() -> None:
    rows = [{"event": "fallback", "input": "x", "attempt": 4, "reason": "r", "needs_human": True}]
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "fail" and "4 attempts" in outcome.summary


def test_a_fallback_line_need_not_repeat_needs_human_or_give_a_reason() -> None:
    """The ticket carries needs_human; the ledger line records the fallback event."""
    rows = [
        {"event": "model_call", "input": "a", "attempt": 1},
        {"event": "fallback", "input": "a"},
        {"event": "fallback", "input": "b", "reason": "  ", "needs_human": "true"},
    ]
    assert ledger_consistent(ledger(*rows), PATH).status == "pass"


def test_a_fallback_line_saying_no_human_is_needed_fails() -> None:
    rows = [
        {"event": "model_call", "input": "a", "attempt": 1},
        {"event": "fallback", "input": "a", "needs_human": False},
    ]
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "fail"
    assert "fallback at line 2 for input a: needs_human is False after a fallback" in messages(
        outcome
    )
    assert "1 fallback marked as needing no human" in outcome.summary


def test_recorded_model_calls_mismatch_warns_with_both_numbers() -> None:
    rows = [{"event": "model_call", "input": str(i), "attempt": 1} for i in range(4)]
    outcome = ledger_consistent(ledger(*rows), PATH, recorded_model_calls=6)
    assert outcome.status == "warn"
    assert "4 model_call entries, but 6 recorded model calls" in messages(outcome)
    assert ledger_consistent(ledger(*rows), PATH, recorded_model_calls=4).status == "pass"


def test_retries_of_one_recording_match_distinct_keys() -> None:
    rows = [
        {"event": "model_call", "line_sha": "a", "key": "k1", "attempt": 1},
        {"event": "model_call", "line_sha": "a", "key": "k1", "attempt": 2},
        {"event": "fallback", "line_sha": "a", "reason": "junk", "needs_human": True},
        {"event": "model_call", "line_sha": "b", "key": "k2", "attempt": 1},
    ]
    outcome = ledger_consistent(
        ledger(*rows), PATH, recorded_model_calls=2, recording_keys=["k1", "k2"]
    )
    assert outcome.status == "pass", outcome.evidence
    outcome = ledger_consistent(ledger(*rows), PATH, recording_keys=["k1"])
    assert outcome.status == "warn"
    assert "model_call key k2 names no recording" in messages(outcome)


def test_no_input_key_nor_attempt_warns() -> None:
    rows = [{"event": "model_call"}, {"event": "cache_hit"}, {"event": "model_call"}]
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "warn"
    assert "retries cannot be bounded" in messages(outcome)


def test_empty_ledger_skips() -> None:
    assert ledger_consistent([], PATH).status == "skip"


def test_unknown_events_are_noted_not_failed() -> None:
    rows = [{"event": "startup"}, {"event": "model_call", "input": "a", "attempt": 1}]
    outcome = ledger_consistent(ledger(*rows), PATH)
    assert outcome.status == "pass"
    assert "1 entries with other events, not counted: startup" in messages(outcome)


def test_hostile_entries_never_raise() -> None:
    entries = [
        LedgerEntry(1, None, {}),
        LedgerEntry(2, "model_call", {"attempt": "x", "input": {"nested": 1}}),
        LedgerEntry(3, "model_call", {"attempt": True, "line_sha": None}),
        LedgerEntry(4, "fallback", {"reason": {"code": 1}, "needs_human": 1}),
        LedgerEntry(5, "model_call", {"attempt": 10**30, "key": ["k"]}),
        LedgerEntry(6, "cache_hit", {"input": 3.5}),
        LedgerEntry(7, "fallback", {"attempt": "99999999", "reason": "r", "needs_human": True}),
    ]
    outcome = ledger_consistent(entries, PATH, recorded_model_calls=-1, recording_keys=[])
    assert outcome.status in ("pass", "warn", "fail")
    json.dumps(outcome.as_dict())


@pytest.mark.scale
def test_large_ledger_is_linear() -> None:
    rows = []
    for i in range(20_000):
        rows.append({"event": "model_call", "line_sha": f"s{i}", "attempt": 1})
        rows.append({"event": "cache_hit", "line_sha": f"s{i}"})
    entries = ledger(*rows)
    start = time.process_time()
    outcome = ledger_consistent(entries, PATH, recorded_model_calls=20_000)
    assert time.process_time() - start < 1.0
    assert outcome.status == "pass"


# --------------------------------------------------------------------------- demo cohort


def demo_ledger(repo: str) -> list[LedgerEntry]:
    result = parse_path(str(DEMO / repo / "ledger.jsonl"), "ledger.jsonl")
    assert result.format == "ledger" and result.ledger
    return result.ledger


def recording_keys(repo: str) -> list[str]:
    return [p.stem for p in (DEMO / repo / "recordings").glob("*.json")]


def test_demo_good_ledger_passes() -> None:
    entries = demo_ledger("ticket-service-good")
    outcome = ledger_consistent(entries, PATH)
    assert outcome.status == "pass", outcome.evidence
    # Its model_call keys name the files in recordings/ (the retried one twice).
    keys = recording_keys("ticket-service-good")
    outcome = ledger_consistent(entries, PATH, recorded_model_calls=len(keys), recording_keys=keys)
    assert outcome.status == "pass", outcome.evidence


def test_demo_flawed_ledger_fails_on_five_attempts() -> None:
    outcome = ledger_consistent(demo_ledger("ticket-service-flawed"), PATH)
    assert outcome.status == "fail"
    assert "retry storm (5 attempts for one input)" in outcome.summary
    [storm] = [e for e in outcome.evidence if "model attempts" in e["message"]]
    assert storm["line"] == 5
