"""AWS event streams (`application/vnd.amazon.eventstream`), as Bedrock streams its answers.

The framing is binary: each message is a 12-byte prelude (total length, headers length,
CRC32 of the eight bytes before), typed headers, a payload and the message's CRC32. Bedrock
sends `chunk` events from invoke-model-with-response-stream (payload `{"bytes": base64 of
the model's own stream event}`, folded with that provider's fold: Anthropic's on Bedrock)
and converse-stream events (messageStart, contentBlockDelta, messageStop, metadata),
folded into the Converse answer: {output: {message}, stopReason, usage}.
"""

from __future__ import annotations

import base64
import binascii
import struct
import uuid
import zlib
from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.anthropic import fold_stream as anthropic_fold

MEDIA_TYPE = "application/vnd.amazon.eventstream"

_PRELUDE = 12
_FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_INT = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


def parse_messages(
    data: bytes, limits: ParseLimits
) -> tuple[list[tuple[dict[str, Any], bytes]], list[str]]:
    """(messages as (headers, payload), problems): a bad frame ends the walk, with where."""
    messages: list[tuple[dict[str, Any], bytes]] = []
    problems: list[str] = []
    offset = 0
    size = len(data)
    while offset < size:
        where = f"event {len(messages) + 1} (byte {offset})"
        if len(messages) >= limits.max_events:
            problems.append(f"event stream has over {limits.max_events} events; kept the first")
            break
        if size - offset < _PRELUDE + 4:
            problems.append(f"{where}: stream cut off ({size - offset} bytes left)")
            break
        total, header_length, prelude_crc = struct.unpack_from(">III", data, offset)
        if zlib.crc32(data[offset : offset + 8]) != prelude_crc:
            problems.append(f"{where}: prelude checksum does not match; not an event stream?")
            break
        if total < _PRELUDE + 4 + header_length or offset + total > size:
            problems.append(f"{where}: stream cut off (frame of {total} bytes)")
            break
        frame = data[offset : offset + total]
        (message_crc,) = struct.unpack_from(">I", frame, total - 4)
        if zlib.crc32(frame[:-4]) != message_crc:
            problems.append(f"{where}: message checksum does not match")
        try:
            headers = _headers(frame[_PRELUDE : _PRELUDE + header_length])
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            problems.append(f"{where}: bad headers ({exc})")
            break
        messages.append((headers, frame[_PRELUDE + header_length : total - 4]))
        offset += total
    return messages, problems


def _headers(raw: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    at = 0
    while at < len(raw):
        name_length = raw[at]
        name = raw[at + 1 : at + 1 + name_length].decode("utf-8")
        at += 1 + name_length
        kind = raw[at]
        at += 1
        value: Any
        if kind in (0, 1):
            value = kind == 0
        elif kind in (6, 7):
            (length,) = struct.unpack_from(">H", raw, at)
            blob = raw[at + 2 : at + 2 + length]
            if len(blob) != length:
                raise ValueError(f"header {name} cut off")
            value = blob.decode("utf-8") if kind == 7 else blob
            at += 2 + length
        elif kind in _FIXED:
            width = _FIXED[kind]
            if kind == 9:
                value = str(uuid.UUID(bytes=raw[at : at + 16]))
            else:
                (value,) = struct.unpack_from(_INT[kind], raw, at)
            at += width
        else:
            raise ValueError(f"header {name} has unknown type {kind}")
        headers[name] = value
    return headers


def looks_like_eventstream(data: bytes) -> bool:
    """True when the bytes start with a frame whose prelude checksum holds."""
    if len(data) < _PRELUDE + 4:
        return False
    total, _, prelude_crc = struct.unpack_from(">III", data, 0)
    return total >= _PRELUDE + 4 and zlib.crc32(data[:8]) == prelude_crc


def decode_eventstream(data: bytes, limits: ParseLimits) -> tuple[Any, str, list[str]]:
    """(json, note, problems): the folded answer, or the list of event payloads."""
    messages, problems = parse_messages(data, limits)
    load = safeload.json_loader(limits)
    events: list[dict[str, Any]] = []
    for number, (headers, payload) in enumerate(messages, start=1):
        kind = headers.get(":event-type") or headers.get(":exception-type")
        if headers.get(":message-type") in ("exception", "error"):
            text = payload.decode("utf-8", "replace")[:200]
            problems.append(f"event {number}: {kind or 'error'}: {text}")
            continue
        try:
            obj = load(payload.decode("utf-8")) if payload else {}
        except (safeload.LoadError, ValueError, RecursionError, UnicodeDecodeError) as exc:
            problems.append(f"event {number}: payload is not JSON ({getattr(exc, 'message', exc)})")
            continue
        if kind == "chunk" and isinstance(obj, dict) and isinstance(obj.get("bytes"), str):
            try:
                inner = load(base64.b64decode(obj["bytes"], validate=True).decode("utf-8"))
            except (binascii.Error, ValueError, RecursionError, UnicodeDecodeError) as exc:
                problems.append(f"event {number}: chunk bytes unreadable ({exc})")
                continue
            obj = inner
        if isinstance(obj, dict):
            events.append({**obj, "_event": kind} if kind and kind != "chunk" else obj)
    note = f"eventstream: {len(messages)} events"
    kinds = {e.get("_event") for e in events}
    if kinds & {"messageStart", "contentBlockDelta", "messageStop", "metadata"}:
        folded, more = fold_converse(events)
        return folded, note + " (bedrock converse stream, folded)", problems + more
    if any(e.get("type") == "message_start" for e in events[:5]):
        folded, more = anthropic_fold(events, limits)
        return folded, note + " (anthropic on bedrock, folded)", problems + more
    return events, note, problems


def fold_converse(events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """A converse-stream as the Converse answer: {output: {message}, stopReason, usage}."""
    role = "assistant"
    blocks: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    stopped = False
    for event in events:
        kind = event.get("_event")
        index = safeload.int_at(event, "contentBlockIndex", 0)
        if kind == "messageStart":
            role = event.get("role") or role
        elif kind == "contentBlockStart":
            start = safeload.object_at(event, "start")
            tool = start.get("toolUse")
            if isinstance(tool, dict):
                blocks[index] = {"toolUse": {**tool, "input": ""}}
        elif kind == "contentBlockDelta":
            delta = safeload.object_at(event, "delta")
            if isinstance(delta.get("text"), str):
                block = blocks.setdefault(index, {"text": ""})
                block["text"] = block.get("text", "") + delta["text"]
            tool = delta.get("toolUse")
            if isinstance(tool, dict) and isinstance(tool.get("input"), str):
                block = blocks.setdefault(index, {"toolUse": {"input": ""}})
                block["toolUse"]["input"] += tool["input"]
        elif kind == "messageStop":
            stopped = True
            out["stopReason"] = event.get("stopReason")
        elif kind == "metadata":
            for key in ("usage", "metrics"):
                if key in event:
                    out[key] = event[key]
    content = [blocks[i] for i in sorted(blocks)]
    out["output"] = {"message": {"role": role, "content": content}}
    return out, [] if stopped else ["stream ends before messageStop (cut off?)"]
