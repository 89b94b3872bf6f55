"""Which reader claims a JSON Lines file: decided from a sample of lines, not the first one."""

from __future__ import annotations

import json

from cassettes_app.checks.ledger import ledger_consistent
from cassettes_app.formats import base, detect, parse_file


def _jsonl(*objs: dict) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


OTEL = _jsonl(
    {
        "trace_id": "a1",
        "span_id": "b1",
        "name": "chat gpt-4o",
        "attributes": {"gen_ai.system": "openai"},
    },
    {"trace_id": "a1", "span_id": "b2", "name": "tool call", "attributes": {}},
)


def test_a_ledger_is_claimed_when_every_sampled_line_is_an_event() -> None:
    data = _jsonl(
        {"event": "model_call", "line_sha": "x", "attempt": 1},
        {"event": "cache_hit", "line_sha": "x"},
        {"event": "fallback", "line_sha": "y", "reason": "timeout", "needs_human": True},
    )
    assert detect("out/calls.jsonl", data).NAME == "ledger"


def test_a_file_whose_later_lines_are_chat_messages_is_not_a_ledger() -> None:
    data = _jsonl({"type": "session", "id": "s1"}, {"role": "user", "content": "hi"})
    module = detect("logs/session.jsonl", data)
    assert module is None or module.NAME != "ledger"


def test_an_opentelemetry_export_is_named_not_passed_as_a_ledger() -> None:
    assert detect("traces/spans.jsonl", OTEL) is None
    result = parse_file("traces/spans.jsonl", OTEL)
    (finding,) = result.findings
    assert finding.kind == "unknown_format"
    assert "looks like an OpenTelemetry span export" in finding.message
    assert result.ledger == []


def test_the_sample_skips_a_line_cut_by_the_head() -> None:
    head = _jsonl({"event": "model_call"}) + b'{"event": "cache_h'
    assert base.jsonl_sample(head) == [{"event": "model_call"}]


def test_a_ledger_of_only_other_events_is_not_passed() -> None:
    result = parse_file("ledger.jsonl", _jsonl({"event": "started"}, {"event": "heartbeat"}))
    outcome = ledger_consistent(result.ledger, "ledger.jsonl")
    assert outcome.status == "skip"
    assert "none of the 2 entries" in outcome.summary and "heartbeat" in outcome.summary
