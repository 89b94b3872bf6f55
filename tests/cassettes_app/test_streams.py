"""Streamed answers folded in one place: AWS event streams (Bedrock) and Cohere's streams.

The event-stream frames here are built by `_frame`, an encoder written from the AWS
framing spec (prelude, typed headers, payload, CRC32s); the real Bedrock recordings are
read in test_wild.py.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib

from cassettes_app.bodies import decode_body
from cassettes_app.providers import eventstream

ES = [("content-type", eventstream.MEDIA_TYPE)]


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def _frame(event_type: str, payload: dict, message_type: str = "event") -> bytes:
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", message_type)
    )
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


CONVERSE = b"".join(
    [
        _frame("messageStart", {"role": "assistant"}),
        _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello, "}}),
        _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "world."}}),
        _frame("contentBlockStop", {"contentBlockIndex": 0}),
        _frame(
            "contentBlockStart",
            {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "lookup"}}},
        ),
        _frame(
            "contentBlockDelta",
            {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"sku": '}}},
        ),
        _frame(
            "contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "9}"}}}
        ),
        _frame("messageStop", {"stopReason": "tool_use"}),
        _frame("metadata", {"usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19}}),
    ]
)


def test_a_converse_stream_is_folded_into_the_converse_answer() -> None:
    body = decode_body(CONVERSE, ES)
    answer = body.json
    assert answer["output"]["message"]["content"] == [
        {"text": "Hello, world."},
        {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": '{"sku": 9}'}},
    ]
    assert answer["stopReason"] == "tool_use" and answer["usage"]["totalTokens"] == 19
    assert body.problems == () and "converse stream, folded" in body.encoding_note


def test_an_invoke_stream_of_anthropic_chunks_uses_anthropics_fold() -> None:
    chunks = [
        {"type": "message_start", "message": {"id": "m1", "role": "assistant",
         "model": "claude-3-haiku", "content": [], "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip
    data = b"".join(
        _frame("chunk", {"bytes": base64.b64encode(json.dumps(c).encode()).decode()})
        for c in chunks
    )
    body = decode_body(data, [])  # no content type: the frames are recognised
    assert body.json["content"][0]["text"] == "Hi"
    assert body.json["model"] == "claude-3-haiku" and body.json["stop_reason"] == "end_turn"


def test_a_cut_or_corrupt_event_stream_keeps_what_came_and_says_where() -> None:
    cut = decode_body(CONVERSE[: len(CONVERSE) - 30], ES)
    assert cut.json["output"]["message"]["content"][0] == {"text": "Hello, world."}
    assert any("cut off" in p and "event 9" in p for p in cut.problems)
    flipped = bytearray(CONVERSE)
    flipped[40] ^= 0xFF  # inside the first frame's headers: its message checksum breaks
    bad = decode_body(bytes(flipped), ES)
    assert any("event 1" in p and "checksum" in p for p in bad.problems)
    garbage = decode_body(b"\x00" * 64, ES)
    assert garbage.problems and garbage.json == []


def test_an_exception_event_is_a_problem_not_an_answer() -> None:
    data = _frame("messageStart", {"role": "assistant"}) + _frame(
        "throttlingException", {"message": "Too many requests"}, message_type="exception"
    )
    body = decode_body(data, ES)
    assert any("Too many requests" in p for p in body.problems)


def _sse(*events: dict) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_a_cohere_v2_stream_is_folded() -> None:
    text = _sse(
        {"type": "message-start", "id": "c1", "delta": {"message": {"role": "assistant"}}},
        {"type": "content-start", "index": 0,
         "delta": {"message": {"content": {"type": "text", "text": ""}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "Bon"}}}},
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "jour"}}}},
        {"type": "content-end", "index": 0},
        {"type": "message-end",
         "delta": {"finish_reason": "COMPLETE", "usage": {"tokens": {"output_tokens": 2}}}},
    )  # fmt: skip
    body = decode_body(text, [("content-type", "text/event-stream")])
    assert body.json["message"]["content"] == [{"type": "text", "text": "Bonjour"}]
    assert body.json["finish_reason"] == "COMPLETE" and body.json["id"] == "c1"
    cut = decode_body(text[: text.index("event: content-end")], [])
    assert cut.json["message"]["content"][0]["text"] == "Bonjour"
    assert any("message-end" in p for p in cut.problems)


def test_a_cohere_v1_stream_is_folded_into_its_stream_end_response() -> None:
    lines = [
        {"is_finished": False, "event_type": "stream-start", "generation_id": "g1"},
        {"is_finished": False, "event_type": "text-generation", "text": "Hel"},
        {"is_finished": False, "event_type": "text-generation", "text": "lo"},
        {"is_finished": True, "event_type": "stream-end", "finish_reason": "COMPLETE",
         "response": {"text": "Hello", "generation_id": "g1"}},
    ]  # fmt: skip
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    body = decode_body(text, [("content-type", "application/stream+json")])
    assert body.json == {"text": "Hello", "generation_id": "g1"}
    cut = decode_body("\n".join(json.dumps(x) for x in lines[:3]) + "\n", [])
    assert cut.json["text"] == "Hello" and any("stream-end" in p for p in cut.problems)
