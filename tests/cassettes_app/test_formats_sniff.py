"""Which reader claims a JSON Lines file: decided from a sample of lines, not the first one."""

from __future__ import annotations

import json

from cassettes_app.checks.ledger import ledger_consistent
from cassettes_app.formats import detect, parse_file, sniff


def _jsonl(*objs: dict) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


OTEL = _jsonl(
    {
        "trace_id": "a1",
        "span_id": "b1",
        "name": "chat gpt-4o",
        "attributes": {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o"},
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


def test_an_opentelemetry_export_is_read_as_spans_not_passed_as_a_ledger() -> None:
    assert detect("traces/spans.jsonl", OTEL).NAME == "otel_spans"
    result = parse_file("traces/spans.jsonl", OTEL)
    assert result.ledger == []
    (recording,) = result.recordings
    assert recording.meta["spans"] == 2  # the chat span is a call (no messages kept)
    assert len(recording.interactions) == 1
    forced = parse_file("traces/spans.jsonl", OTEL, format_hint="ledger")
    assert ledger_consistent(forced.ledger, "traces/spans.jsonl").status != "pass"


def test_a_known_family_this_tool_cannot_read_is_named_with_the_reason() -> None:
    from cassettes_app.formats import sniff

    # A line shape no reader takes, of a family looks_like knows: named, never passed.
    lines = [{"trace_id": "t", "span_id": "s", "name": "x", "attributes": {}}] * 2
    result = parse_file("spans.jsonl", _jsonl(*lines))
    assert sniff.looks_like(lines) == "an OpenTelemetry span export"
    (finding,) = result.findings
    assert finding.kind == "unknown_format"
    assert "looks like an OpenTelemetry span export" in finding.message


def test_the_sample_skips_a_line_cut_by_the_head() -> None:
    head = _jsonl({"event": "model_call"}) + b'{"event": "cache_h'
    assert sniff.jsonl_sample(head) == [{"event": "model_call"}]


def test_a_ledger_of_only_other_events_is_not_passed() -> None:
    result = parse_file("ledger.jsonl", _jsonl({"event": "started"}, {"event": "heartbeat"}))
    outcome = ledger_consistent(result.ledger, "ledger.jsonl")
    assert outcome.status == "skip"
    assert "none of the 2 entries" in outcome.summary and "heartbeat" in outcome.summary


CAPTURE = {
    "request": {
        "method": "POST",
        "url": "https://api.openai.com/v1/chat/completions",
        "headers": {"content-type": "application/json"},
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    },
    "response": {
        "status_code": 200,
        "headers": {"content-type": "application/json"},
        "body": {
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
        },
    },
}


def test_a_request_response_capture_keeps_its_url_status_and_turn() -> None:
    from cassettes_app.analysis.turns import body_payload
    from cassettes_app.providers import normalise

    result = parse_file("captures/call.json", json.dumps(CAPTURE).encode())
    assert result.format == "http_exchange"
    (interaction,) = result.recordings[0].interactions
    assert interaction.url == "https://api.openai.com/v1/chat/completions"
    assert (interaction.method, interaction.status) == ("POST", 200)
    exchange = normalise(
        body_payload(interaction.request_body),
        body_payload(interaction.response_body),
        interaction.url,
    )
    assert exchange.provider == "openai-chat" and exchange.response.text == "hello"


def test_the_cassette_tasks_own_file_stays_with_its_reader() -> None:
    task = {
        "key": "k1",
        "request": CAPTURE["request"]["body"],
        "response": CAPTURE["response"]["body"],
        "recorded_at": "2026-11-01T00:00:00Z",
        "model": "gpt-4o-mini",
    }
    assert parse_file("cassettes/k1.json", json.dumps(task).encode()).format == "cassette_json"
    # Without key and recorded_at, payload-shaped request/response still read as the task's.
    bare = {"request": task["request"], "response": task["response"]}
    assert parse_file("cassettes/k1.json", json.dumps(bare).encode()).format == "cassette_json"
    # ... and with key, even an HTTP-shaped request stays the task's file (it said so).
    keyed = {**CAPTURE, "key": "k2"}
    assert parse_file("cassettes/k2.json", json.dumps(keyed).encode()).format == "cassette_json"


def test_every_reader_is_asked_and_the_surest_wins() -> None:
    from cassettes_app.formats import rank

    ranked = rank("captures/call.json", json.dumps(CAPTURE).encode())
    names = [module.NAME for _, module in ranked]
    assert names[0] == "http_exchange" and "cassette_json" in names
    scores = [score for score, _ in ranked]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]


def test_a_capture_whose_response_never_came_says_so() -> None:
    lone = {"request": CAPTURE["request"], "response": None}
    result = parse_file("captures/lost.json", json.dumps(lone).encode())
    assert result.format == "http_exchange"
    assert result.recordings[0].interactions[0].status is None
    assert any("no response recorded" in f.message for f in result.findings)


def test_model_calls_with_their_payloads_are_an_agent_log_unless_named_a_ledger() -> None:
    data = _jsonl({"event": "model_call", "request": {"model": "m"}, "response": {}})
    assert parse_file("out/calls.jsonl", data).format == "agent_log"
    assert parse_file("out/ledger.jsonl", data).format == "ledger"
