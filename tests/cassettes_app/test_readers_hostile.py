"""Every reader, handed shapes it does not expect, says what is wrong and never crashes.

`parse_file` turns a reader's exception into a "parser crashed" finding so one file cannot
stop the others; these inputs must not get that far. Each is valid JSON of the wrong
types in the places each reader looks (types swapped, nulls, lists for objects), plus a
few non-JSON bodies.
"""

from __future__ import annotations

import json
import time

import pytest

from cassettes_app.formats import FORMATS, parse_file
from cassettes_app.formats.conversation import HISTORY_TAIL, MAX_HISTORY_REFS

WRONG = [None, 0, -1, 1.5, True, "x", "", [], [None], [[]], {}, {"a": None}, [{"a": []}]]

# fmt: off
SHAPES = [
    lambda w: {"request": w, "response": w},
    lambda w: {"request": {"url": w, "method": w, "headers": w, "body": w}, "response": w},
    lambda w: {"log": {"entries": [w, {"request": w, "response": w}]}},
    lambda w: {"interactions": [w, {"request": w, "response": w}]},
    lambda w: [{"scope": "https://x", "method": w, "status": w, "response": w, "rawHeaders": w}],
    lambda w: {"resourceSpans": [w, {"scopeSpans": [w, {"spans": [w, {"attributes": w}]}]}]},
    lambda w: {"batches": [{"scopeSpans": [{"spans": [{"name": "x", "attributes": [
        {"key": "gen_ai.request.model", "value": w},
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(w)}},
        {"key": "gen_ai.output", "value": {"stringValue": json.dumps(w)}},
        {"key": "gen_ai.prompt.0.role", "value": w}]}]}]}]},
    lambda w: [{"name": "x", "context": {"trace_id": 1, "span_id": 2}, "attributes": {
        "llm.model_name": w, "llm.input_messages.0.message.role": w,
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": w,
        "ai.prompt.messages": json.dumps(w), "ai.response.toolCalls": json.dumps(w)},
        "events": [w, {"name": "gen_ai.choice", "attributes": w}], "startTime": w}],
    lambda w: {"post": [w, {"id": "1", "run_type": "llm", "inputs": w, "outputs": w,
               "extra": w, "start_time": w}], "patch": [w, {"trace_id": w}]},
    lambda w: [{"run_type": "llm", "inputs": {"messages": [[w]]}, "outputs": {"generations": w},
                "child_runs": w}],
    lambda w: {"trace": w, "observations": [w, {"type": "GENERATION", "input": w,
               "output": w, "usageDetails": w, "model": w, "startTime": w}]},
    lambda w: {"version": 2, "eval": w, "samples": [w, {"events": [w, {"event": "model",
               "input": w, "output": {"choices": [w, {"message": w}], "usage": w}}],
               "messages": w, "output": w}]},
    lambda w: {"object": "trace", "spans": [w, {"object": "trace.span", "span_data": {
        "type": "generation", "input": w, "output": w, "usage": w, "model": w}},
        {"span_data": {"type": "response", "response": w, "input": w}, "parent_id": w}]},
    lambda w: [{"type": "system", "session_id": "s", "message": w},
               {"type": "assistant", "session_id": "s", "message": {"content": w, "id": w}}],
]

LINES = [
    lambda w: [{"type": "assistant", "parentUuid": "p", "sessionId": "s", "message": {
        "role": "assistant", "content": w, "model": w, "usage": w}}] * 2,
    lambda w: [{"type": "response_item", "payload": {"type": "function_call",
                "arguments": w, "name": w}}, {"type": "turn_context", "payload": w}],
    lambda w: [{"metadata": w}, [{"role": "user", "content": w}, {"role": "assistant",
               "content": w, "tool_calls": w}]],
    lambda w: [{"messages": [{"role": w, "content": w}]}, {"messages": w}],
    lambda w: [{"event": "model_call", "line_sha": w}, {"event": w}],
    lambda w: [{"url": "http://x", "method": w, "status": w, "trace_id": w, "req": w}] * 2,
    lambda w: [{"role": "assistant", "content": w, "tool_calls": [w]},
               {"request": w, "response": w}],
]
# fmt: on


def _cases() -> list[tuple[str, bytes]]:
    cases = []
    for s, shape in enumerate(SHAPES):
        for w, wrong in enumerate(WRONG):
            cases.append((f"doc{s}-{w}.json", json.dumps(shape(wrong)).encode()))
    for s, lines in enumerate(LINES):
        for w, wrong in enumerate(WRONG):
            text = "\n".join(json.dumps(x) for x in lines(wrong)) + "\n"
            cases.append((f"lines{s}-{w}.jsonl", text.encode()))
    return cases


CASES = _cases()
READERS = [module.NAME for module in FORMATS]


@pytest.mark.parametrize("reader", READERS)
def test_no_reader_crashes_on_wrong_types(reader: str) -> None:
    crashes = []
    for name, data in CASES:
        for hint in (reader, None):
            result = parse_file(name, data, format_hint=hint)
            crashed = [f.message for f in result.findings if "parser crashed" in f.message]
            if crashed:
                crashes.append((name, hint, crashed[0]))
    assert crashes == []


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    "data", [b"\x00\x01garbage", b"{", b"[", b'{"a": ', b"\xff\xfe\xfd", b"PK\x03\x04junk"]
)
def test_no_reader_crashes_on_broken_bytes(reader: str, data: bytes) -> None:
    result = parse_file("x.eval" if data.startswith(b"PK") else "x.json", data, format_hint=reader)
    assert not [f for f in result.findings if "parser crashed" in f.message]
    assert result.findings  # and it says what is wrong


@pytest.mark.scale
def test_a_huge_span_export_is_read_in_linear_time() -> None:
    def export(n: int) -> bytes:
        spans = [
            {
                "name": "chat",
                "context": {"trace_id": "t", "span_id": str(i)},
                "start_time": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "attributes": {
                    "gen_ai.request.model": "m",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": f"q{i}",
                    "gen_ai.completion.0.content": f"a{i}",
                },
            }
            for i in range(n)
        ]
        return json.dumps(spans).encode()

    small, big = export(2_000), export(20_000)
    started = time.perf_counter()
    parse_file("s.json", small)
    small_s = time.perf_counter() - started
    started = time.perf_counter()
    result = parse_file("b.json", big)
    big_s = time.perf_counter() - started
    assert len(result.recordings[0].interactions) == 20_000
    assert big_s < small_s * 30  # ten times the spans, not a hundred times the work


def test_a_transcript_too_long_to_repeat_keeps_a_tail_of_history_and_says_so() -> None:
    from cassettes_app.formats.conversation import model_calls
    from cassettes_app.parsed import ParsedMessage, ParseResult

    messages = []
    for i in range(4_200):
        messages.append(ParsedMessage("user", f"q{i}", raw={"role": "user", "content": f"q{i}"}))
        messages.append(
            ParsedMessage("assistant", f"a{i}", raw={"role": "assistant", "content": f"a{i}"})
        )
    result = ParseResult("agent_log")
    calls = model_calls(result, "t.jsonl", messages)
    assert len(calls) == 4_200
    sizes = [len(c.request_body.json["messages"]) for c in calls]
    assert sum(sizes) <= MAX_HISTORY_REFS + HISTORY_TAIL * len(calls)
    assert sizes[-1] == HISTORY_TAIL and sizes[10] == 21
    assert any("long transcript" in f.message for f in result.findings)
