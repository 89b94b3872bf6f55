"""Body decoding: encodings, JSON, binary, and SSE streams folded into one provider response."""

from __future__ import annotations

import gzip
import json
import zlib

import brotli
import pytest

from cassettes_app.bodies import decode_body
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.sse import parse_sse

SSE = {"Content-Type": "text/event-stream"}


def stream(*payloads: object, events: list[str] | None = None, end: str = "\n\n") -> str:
    names = events or [""] * len(payloads)
    blocks = []
    for name, payload in zip(names, payloads, strict=True):
        data = payload if isinstance(payload, str) else json.dumps(payload)
        blocks.append((f"event: {name}\n" if name else "") + f"data: {data}")
    return "\n\n".join(blocks) + end


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


def test_plain_text_json_and_dict_bodies() -> None:
    text = decode_body("hello", {"Content-Type": "text/plain"})
    assert (text.text, text.json, text.data, text.is_binary) == ("hello", None, b"hello", False)
    parsed = decode_body('{"a": [1, 2]}', None)
    assert parsed.json == {"a": [1, 2]} and parsed.encoding_note == "json"
    given = decode_body({"model": "m"}, None)
    assert given.json == {"model": "m"} and given.data == b'{"model": "m"}'
    assert decode_body(None, None).data == b""


def test_invalid_json_is_a_problem_only_when_it_claims_to_be_json() -> None:
    claimed = decode_body('{"a": ', {"Content-Type": "application/json"})
    assert claimed.json is None and claimed.text == '{"a": '
    assert claimed.problems[0].startswith("invalid JSON body")
    log_line = decode_body("[INFO] started", {"Content-Type": "text/plain"})
    assert log_line.problems == () and "not JSON" in log_line.encoding_note


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", lambda b: gzip.compress(b, mtime=0)),
        ("deflate", zlib.compress),
        ("deflate", lambda b: raw_deflate(b)),
        ("br", brotli.compress),
    ],
)
def test_content_encodings(encoding: str, compress: object) -> None:
    raw = compress(b'{"ok": true}')  # type: ignore[operator]
    body = decode_body(raw, {"Content-Encoding": encoding, "Content-Type": "application/json"})
    assert body.json == {"ok": True}
    assert body.encoding_note == f"{encoding}; json"


def test_stacked_encodings_are_undone_in_reverse() -> None:
    raw = brotli.compress(gzip.compress(b"plain", mtime=0))
    assert decode_body(raw, {"Content-Encoding": "gzip, br"}).text == "plain"


def test_unsupported_encoding_leaves_bytes_as_they_are() -> None:
    body = decode_body(b"\x28\xb5\x2f\xfd\x00", {"Content-Encoding": "zstd"})
    assert body.is_binary and "zstd" in body.encoding_note


def test_base64_and_invalid_base64() -> None:
    assert decode_body("aGVs\nbG8=", None, base64_encoded=True).text == "hello"
    bad = decode_body("not base64!", None, base64_encoded=True)
    assert bad.text == "not base64!" and bad.problems[0].startswith("invalid base64")


def test_binary_and_declared_charsets() -> None:
    assert decode_body(b"\xff\xd8\xff\xe0", {"Content-Type": "image/jpeg"}).is_binary
    latin = decode_body(
        "café".encode("latin-1"), {"Content-Type": "text/plain; charset=ISO-8859-1"}
    )
    assert latin.text == "café"


def test_body_over_the_cap_is_truncated() -> None:
    body = decode_body("x" * 100, None, ParseLimits(max_body_bytes=10))
    assert body.truncated and body.data == b"x" * 10


def test_sse_parsing_follows_the_event_stream_rules() -> None:
    text = "data: a\r\n\r\n: comment\n\nevent: x\ndata: b\ndata:c\n\nid: 7\ndata: tail"
    events, capped = parse_sse(text, 10)
    assert [(e.event, e.data, e.id) for e in events] == [
        (None, "a", None),
        ("x", "b\nc", None),
        (None, "tail", "7"),
    ]
    assert not capped
    assert parse_sse("data: 1\n\ndata: 2\n\ndata: 3\n\n", 2) == (
        parse_sse("data: 1\n\ndata: 2", 9)[0],
        True,
    )


@pytest.mark.parametrize("end", ["\r\n", "\r"])
def test_sse_events_are_the_same_whatever_the_line_ends(end: str) -> None:
    text = "data: a\n\n\n: note\nevent: x\ndata: b\ndata: c\n\n\n\nid: 7\ndata: tail\n"
    assert parse_sse(text.replace("\n", end), 10) == parse_sse(text, 10)
    assert [e.data for e in parse_sse(text, 10)[0]] == ["a", "b\nc", "tail"]


def test_openai_chat_stream_with_interleaved_tool_call_pieces() -> None:
    def delta(d: dict, finish: str | None = None) -> dict:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
        }

    text = stream(
        delta({"role": "assistant", "content": "Sure"}),
        delta({"content": ", ordering."}),
        delta(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "create_order", "arguments": '{"sku":'},
                    }
                ]
            }
        ),
        delta(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "create_order", "arguments": '{"sku":"B"'},
                    }
                ]
            }
        ),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": '"A","qty":1}'}}]}),
        delta({"tool_calls": [{"index": 1, "function": {"arguments": ',"qty":2}'}}]}),
        delta({}, "tool_calls"),
        "[DONE]",
    )
    body = decode_body(text, SSE)
    assert body.encoding_note == "sse: 8 events"
    choice = body.json["choices"][0]
    assert choice["message"]["content"] == "Sure, ordering."
    assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [
        {"sku": "A", "qty": 1},
        {"sku": "B", "qty": 2},
    ]
    assert choice["finish_reason"] == "tool_calls"
    assert body.json["model"] == "gpt-4o-2024-08-06"


def test_anthropic_stream_with_invalid_tool_input_keeps_it_verbatim() -> None:
    text = stream(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-3-5-haiku-20241022",
                "content": [],
                "usage": {"input_tokens": 5},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "create_order",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"sku": "A", '},
        },
        {"type": "content_block_stop", "index": 0},
        events=[
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        ],
        end="",
    )
    body = decode_body(text, SSE)
    block = body.json["content"][0]
    assert block["input"] == '{"sku": "A", '
    assert "not valid JSON" in body.problems[0]


def test_anthropic_tool_use_without_input_deltas_gets_an_empty_object() -> None:
    text = stream(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "ping", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
    )
    assert decode_body(text, SSE).json["content"] == [
        {"type": "tool_use", "id": "t", "name": "ping", "input": {}}
    ]


def test_gemini_stream_merges_text_parts() -> None:
    def chunk(part: dict, finish: str | None = None) -> dict:
        candidate = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "gemini-2.0-flash"}

    text = stream(
        chunk({"text": "Order "}),
        chunk({"text": "placed."}),
        chunk({"functionCall": {"name": "create_order", "args": {"sku": "A"}}}, "STOP"),
    )
    body = decode_body(text, {"Content-Type": "text/event-stream"})
    candidate = body.json["candidates"][0]
    assert candidate["content"]["parts"] == [
        {"text": "Order placed."},
        {"functionCall": {"name": "create_order", "args": {"sku": "A"}}},
    ]
    assert candidate["finishReason"] == "STOP"
    assert body.json["modelVersion"] == "gemini-2.0-flash"


def test_responses_stream_cut_before_completion_is_rebuilt_with_a_problem() -> None:
    text = stream(
        {
            "type": "response.created",
            "response": {
                "id": "resp_1",
                "object": "response",
                "status": "in_progress",
                "model": "gpt-4.1",
                "output": [],
            },
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hel",
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": "lo",
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"},
    )
    body = decode_body(text, SSE)
    message, call = body.json["output"]
    assert message["content"][0]["text"] == "Hello"
    assert call["arguments"] == '{"a":1}'
    assert body.json["id"] == "resp_1"
    assert body.problems == ("response stream has no response.completed event",)


def test_bad_events_are_problems_and_unknown_streams_keep_only_text() -> None:
    body = decode_body('data: {nope}\n\ndata: {"x": 1}\n\n', SSE)
    assert body.json is None
    assert body.encoding_note == "sse: 2 events (unrecognised stream)"
    assert body.problems[0].startswith("sse event 1:")
    assert body.text.startswith("data: {nope}")


def test_an_event_stream_is_recognised_without_a_content_type() -> None:
    text = stream(
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    )
    assert decode_body(text, None).json["choices"][0]["message"]["content"] == "hi"
