"""Decode recorded HTTP bodies: base64, compression, JSON and SSE streams."""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Any, NamedTuple

import brotli

from cassettes_app import safeload
from cassettes_app.formats.base import DEFAULT_LIMITS, Body, ParseLimits, get_header, header_pairs

GZIP_MAGIC = b"\x1f\x8b"
# Many tiny gzip members would otherwise cost one loop turn each.
MAX_GZIP_MEMBERS = 10_000

_BINARY_TYPES = (
    "image/",
    "audio/",
    "video/",
    "font/",
    "application/octet-stream",
    "application/pdf",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-protobuf",
    "application/grpc",
)


class Decoded(NamedTuple):
    """Output of a capped decompressor."""

    data: bytes
    truncated: bool
    problem: str | None


def _over_cap(cap: int) -> str:
    return f"decompressed body is over {cap} bytes (max_body_bytes); kept the first {cap}"


def inflate(data: bytes, cap: int, *, wbits: int) -> Decoded:
    """Stream-decompress zlib/gzip/raw deflate data, never producing more than cap bytes."""
    out = bytearray()
    members = 0
    while True:
        members += 1
        decomp = zlib.decompressobj(wbits)
        # max_length must stay >= 1: zero would mean "unlimited".
        out += decomp.decompress(data, cap - len(out) + 1)
        if len(out) > cap:
            return Decoded(bytes(out[:cap]), True, _over_cap(cap))
        if not decomp.eof:
            return Decoded(bytes(out), False, "compressed stream is truncated")
        data = decomp.unused_data
        if not data.strip(b"\x00"):
            return Decoded(bytes(out), False, None)
        if wbits != 31 or not data.startswith(GZIP_MAGIC):
            return Decoded(bytes(out), False, "trailing bytes after the compressed stream")
        if members >= MAX_GZIP_MEMBERS:
            return Decoded(bytes(out), True, f"over {MAX_GZIP_MEMBERS} gzip members")


def unbrotli(data: bytes, cap: int) -> Decoded:
    """Stream-decompress brotli data, never producing more than cap bytes."""
    decomp = brotli.Decompressor()
    out = bytearray(decomp.process(data, output_buffer_limit=cap + 1))
    while len(out) <= cap and not decomp.is_finished() and not decomp.can_accept_more_data():
        out += decomp.process(b"", output_buffer_limit=cap + 1 - len(out))
    if len(out) > cap:
        return Decoded(bytes(out[:cap]), True, _over_cap(cap))
    if not decomp.is_finished():
        return Decoded(bytes(out), False, "compressed stream is truncated")
    return Decoded(bytes(out), False, None)


def gunzip_file(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> bytes:
    """Decompress a whole .gz recording; a truncated or oversized one is a LoadError."""
    result = inflate(data, limits.max_file_bytes, wbits=31)
    if result.truncated:
        raise safeload.LoadError(
            f"gzip file decompresses to over {limits.max_file_bytes} bytes (max_file_bytes)"
        )
    if result.problem:
        raise safeload.LoadError(f"gzip file: {result.problem}")
    return result.data


def peek_gzip(head: bytes, size: int = 256 * 1024) -> bytes:
    """Decompress the start of a gzip head for sniffing; b'' when it is not gzip."""
    try:
        return zlib.decompressobj(31).decompress(head, size)
    except zlib.error:
        return b""


def _decompress(encoding: str, data: bytes, cap: int) -> tuple[bytes, bool, str | None, str]:
    """Apply one Content-Encoding; returns (data, truncated, problem, note)."""
    if encoding in ("identity", ""):
        return data, False, None, ""
    if encoding in ("gzip", "x-gzip"):
        if not data.startswith(GZIP_MAGIC):
            return data, False, None, f"content-encoding {encoding} but body is not compressed"
        result = inflate(data, cap, wbits=31)
    elif encoding == "deflate":
        try:
            result = inflate(data, cap, wbits=15)
        except zlib.error:
            try:
                result = inflate(data, cap, wbits=-15)
            except zlib.error:
                return data, False, None, "content-encoding deflate but body is not compressed"
    elif encoding == "br":
        try:
            result = unbrotli(data, cap)
        except brotli.error:
            if _is_utf8(data):
                return data, False, None, "content-encoding br but body is not compressed"
            raise
    else:
        return data, False, None, f"content-encoding {encoding} left as is (unsupported)"
    return result.data, result.truncated, result.problem, encoding


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _as_text(data: bytes, charset: str | None, *, cut: bool) -> str | None:
    """Decode with the declared charset, else UTF-8; None for binary data."""
    if charset and charset not in ("utf-8", "utf8"):
        try:
            return data.decode(charset)
        except (UnicodeDecodeError, LookupError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A body cut at the cap may end inside a multi-byte character.
        if cut and exc.start >= len(data) - 3:
            return data[: exc.start].decode("utf-8", "replace")
        return None


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    match = re.search(r"charset=\"?([\w.:-]+)", content_type, re.IGNORECASE)
    return match.group(1).lower() if match else None


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _is_json_type(media: str) -> bool:
    return media == "application/json" or media.endswith("+json") or media.endswith("/json")


def ascii_json(data: bytes) -> bool:
    """True when every string JSON-decoded from `data` is ASCII without DEL.

    Then json.dumps gives the same text with or without ensure_ascii, and its ASCII encoder
    is the faster one. Only a \\uXXXX escape can add another character to ASCII source.
    """
    return data.isascii() and b"\x7f" not in data and (b"\\" not in data or b"\\u" not in data)


def _normalised(headers: object) -> bool:
    """True for a list of (str, str) pairs, which `header_pairs` would only copy.

    The parsers pass the pairs they already built for the interaction; normalising them
    again cost more than the rest of decoding a small body.
    """
    # Three C-speed passes (map, set) instead of a Python step per header.
    return (
        type(headers) is list
        and set(map(type, headers)) <= {tuple}
        and set(map(len, headers)) <= {2}
        and set(map(type, chain.from_iterable(headers))) <= {str}
    )


def decode_body(
    raw: bytes | bytearray | str | dict[str, Any] | list[Any] | None,
    headers: Mapping[str, Any] | Iterable[tuple[str, str]] | None = None,
    limits: ParseLimits = DEFAULT_LIMITS,
    *,
    base64_encoded: bool = False,
    apply_content_encoding: bool = True,
    ascii_values: bool = False,
) -> Body:
    """Decode one recorded body into bytes, text and (for JSON or SSE) a parsed object.

    `ascii_values` promises that every string in a dict or list `raw` is ASCII without DEL
    (see `ascii_json`); the result is the same, only faster to get.
    """
    pairs = headers if _normalised(headers) else header_pairs(headers)[0]
    content_type = get_header(pairs, "content-type")
    media = _media_type(content_type)
    if raw is None:
        return Body(content_type=content_type)
    if isinstance(raw, dict | list):
        # Already parsed by the recording's own JSON (cassette-task payloads, fixtures).
        text = json.dumps(raw) if ascii_values else json.dumps(raw, ensure_ascii=False)
        return Body(text.encode("utf-8", "surrogatepass"), text, raw, content_type, "json value")

    notes: list[str] = []
    problems: list[str] = []
    truncated = False
    text: str | None = None
    cap = limits.max_body_bytes

    if isinstance(raw, str) and not base64_encoded:
        data = raw.encode("utf-8", "surrogatepass")
        text = raw
    elif isinstance(raw, str):
        try:
            data = base64.b64decode("".join(raw.split()), validate=True)
            notes.append("base64")
        except (binascii.Error, ValueError) as exc:
            problems.append(f"invalid base64 body: {exc}")
            data = raw.encode("utf-8", "surrogatepass")
            text = raw
    elif isinstance(raw, bytes | bytearray | memoryview):
        data = bytes(raw)
    else:
        text = str(raw)
        data = text.encode("utf-8")

    if len(data) > cap:
        data = data[:cap]
        text = None
        truncated = True
        problems.append(f"body is over {cap} bytes (max_body_bytes); kept the first {cap}")

    encodings = get_header(pairs, "content-encoding") if apply_content_encoding else None
    for encoding in reversed([e.strip().lower() for e in (encodings or "").split(",")]):
        if not encoding:
            continue
        try:
            decoded, capped, problem, note = _decompress(encoding, data, cap)
        except (zlib.error, brotli.error) as exc:
            problems.append(f"could not decode content-encoding {encoding}: {exc}")
            break
        if decoded is not data:
            text = None
        data = decoded
        truncated = truncated or capped
        if note:
            notes.append(note)
        if problem:
            problems.append(f"{encoding}: {problem}")

    is_binary = False
    if text is None:
        text = _as_text(data, _charset(content_type), cut=truncated)
    if text is not None and "\x00" in text:
        text = None
    if text is None:
        is_binary = True
        notes.append("binary")
        return _body(data, None, None, content_type, notes, True, truncated, problems)

    parsed: Any = None
    stripped = text.lstrip()
    if media == "text/event-stream" or (
        media in ("", "text/plain") and stripped.startswith(("data:", "event:"))
    ):
        parsed, sse_note, sse_truncated, sse_problems = _decode_sse(text, limits)
        notes.insert(0, sse_note)
        truncated = truncated or sse_truncated
        problems.extend(sse_problems)
    elif _is_json_type(media) or stripped.startswith(("{", "[")):
        try:
            parsed = safeload.load_json(text, limits)
            notes.append("json")
        except safeload.LoadError as exc:
            # A body is evidence, not the file: keep it readable and report the problem.
            # A cut body fails to parse as a matter of course: one finding (the cut) is enough.
            if not (truncated or problems) and (
                _is_json_type(media) or (not media and stripped.startswith("{"))
            ):
                problems.append(f"invalid JSON body: {exc}")
            else:
                notes.append(f"not JSON: {exc.message}")
    return _body(data, text, parsed, content_type, notes, is_binary, truncated, problems)


def _body(
    data: bytes,
    text: str | None,
    parsed: Any,
    content_type: str | None,
    notes: list[str],
    is_binary: bool,
    truncated: bool,
    problems: list[str],
) -> Body:
    return Body(
        data=data,
        text=text,
        json=parsed,
        content_type=content_type,
        encoding_note="; ".join(notes) or None,
        is_binary=is_binary,
        truncated=truncated,
        problems=tuple(problems),
    )


# --- server-sent events -------------------------------------------------------


class SseEvent(NamedTuple):
    """One dispatched server-sent event."""

    event: str | None
    data: str
    id: str | None


_EOL = re.compile(r"\r\n|\r|\n")
# Two line ends in a row: the blank line that dispatches an event.
_BLANK = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")


def _sse_event(block: str) -> SseEvent | None:
    """Read one event block's fields; None when it carries no data."""
    if block.startswith("data:") and "\n" not in block and "\r" not in block:
        # The common one-line event, without the general loop.
        value = block[5:]
        return SseEvent(None, value[1:] if value[:1] == " " else value, None)
    data: list[str] = []
    event: str | None = None
    event_id: str | None = None
    for line in _EOL.split(block):
        if not line or line[0] == ":":
            continue
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            event_id = value
    return SseEvent(event, "\n".join(data), event_id) if data else None


def _blocks(text: str) -> Iterable[str]:
    """The event blocks of a stream: the texts between blank lines, the last one included."""
    if "\r" not in text:
        return text.split("\n\n")  # the usual line ends: one C-speed split
    return _blocks_any_line_end(text)


def _blocks_any_line_end(text: str) -> Iterator[str]:
    start = 0
    for match in _BLANK.finditer(text):
        yield text[start : match.start()]
        start = match.end()
    yield text[start:]


def parse_sse(text: str, max_events: int) -> tuple[list[SseEvent], bool]:
    """Split an event stream into events (WHATWG rules); True when capped at max_events."""
    events: list[SseEvent] = []
    # A stream cut without its final blank line still counts its last event.
    for block in _blocks(text):
        event = _sse_event(block)
        if event is not None:
            if len(events) >= max_events:
                return events, True
            events.append(event)
    return events, False


# Events read before deciding which provider stream this is.
_KIND_WINDOW = 20


def _decode_sse(text: str, limits: ParseLimits) -> tuple[Any, str, bool, list[str]]:
    """Parse and reassemble a stream; returns (json, note, truncated, problems)."""
    events, capped = parse_sse(text, limits.max_events)
    problems: list[str] = []
    if capped:
        problems.append(
            f"event stream has over {limits.max_events} events (max_events); kept the first"
        )
    note = f"sse: {len(events)} events"
    load = safeload.json_loader(limits)
    payloads: list[dict[str, Any]] = []
    kind: str | None = None
    for number, event in enumerate(events, start=1):
        if kind is None and len(payloads) >= _KIND_WINDOW:
            kind = stream_kind(payloads)
            if kind is None:
                # Nothing to reassemble: spare the JSON parse of every remaining event.
                return None, note + " (unrecognised stream)", capped, problems
        data = event.data.strip()
        if not data or data == "[DONE]":
            continue
        try:
            obj = load(data)
        except safeload.LoadError as exc:
            if len(problems) < _KIND_WINDOW:
                problems.append(f"sse event {number}: {exc.message}")
            continue
        if isinstance(obj, dict):
            if event.event and "type" not in obj and event.event != "message":
                obj = {**obj, "_event": event.event}
            payloads.append(obj)
    reassemble = _REASSEMBLERS.get(kind or stream_kind(payloads))
    if reassemble is None:
        return None, note + " (unrecognised stream)", capped, problems
    result, more = reassemble(payloads, limits)
    problems.extend(more)
    return result, note, capped, problems


def stream_kind(payloads: list[dict[str, Any]]) -> str | None:
    """Name the provider stream a list of SSE payloads comes from."""
    for obj in payloads[:_KIND_WINDOW]:
        kind = obj.get("type")
        if obj.get("object") == "chat.completion.chunk":
            return "openai_chat"
        if isinstance(kind, str) and kind.startswith("response."):
            return "openai_responses"
        if kind in ("message_start", "content_block_start", "content_block_delta", "message_delta"):
            return "anthropic"
        if "candidates" in obj:
            return "gemini"
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and "delta" in (choices[0] or {}):
            return "openai_chat"
    return None


class _Joiner:
    """Collects streamed string pieces and joins them once (repeated `+=` is quadratic)."""

    def __init__(self) -> None:
        self._parts: dict[tuple[int, str], tuple[dict[str, Any], str, list[str]]] = {}

    def add(self, target: dict[str, Any], key: str, piece: Any) -> None:
        if not isinstance(piece, str):
            return
        entry = self._parts.get((id(target), key))
        if entry is None:
            current = target.get(key)
            entry = (target, key, [current] if isinstance(current, str) else [])
            self._parts[(id(target), key)] = entry
        entry[2].append(piece)

    def set(self, target: dict[str, Any], key: str, value: str) -> None:
        self._parts.pop((id(target), key), None)
        target[key] = value

    def finish(self) -> None:
        for target, key, parts in self._parts.values():
            target[key] = "".join(parts)
        self._parts.clear()


_CHUNK_FIELDS = ("id", "created", "model", "system_fingerprint", "service_tier")


def _openai_chat(chunks: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold chat.completion.chunk deltas into one chat.completion."""
    out: dict[str, Any] = {"id": None, "object": "chat.completion", "created": None, "model": None}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    usage = None
    joiner = _Joiner()
    for chunk in chunks:
        # One lookup per field and per delta key: a stream has a chunk per few tokens.
        for key in _CHUNK_FIELDS:
            value = chunk.get(key)
            if value is not None:
                out[key] = value
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index")
            if not isinstance(index, int):
                index = 0
            slot = choices.get(index)
            if slot is None:
                slot = choices[index] = {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "logprobs": None,
                    "finish_reason": None,
                }
            message = slot["message"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            role = delta.get("role")
            if isinstance(role, str):
                message["role"] = role
            content = delta.get("content")
            if isinstance(content, str):
                joiner.add(message, "content", content)
            refusal = delta.get("refusal")
            if isinstance(refusal, str):
                joiner.add(message, "refusal", refusal)
            if isinstance(delta.get("function_call"), dict):
                legacy = message.setdefault("function_call", {"name": "", "arguments": ""})
                joiner.add(legacy, "name", delta["function_call"].get("name"))
                joiner.add(legacy, "arguments", delta["function_call"].get("arguments"))
            pieces = delta.get("tool_calls") or []
            slot_calls = calls.setdefault(index, {}) if pieces else {}
            for position, piece in enumerate(pieces):
                if not isinstance(piece, dict):
                    continue
                call_index = piece.get("index") if isinstance(piece.get("index"), int) else position
                call = slot_calls.setdefault(
                    call_index,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                if isinstance(piece.get("type"), str):
                    call["type"] = piece["type"]
                function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
                joiner.add(call["function"], "name", function.get("name"))
                joiner.add(call["function"], "arguments", function.get("arguments"))
            finish_reason = choice.get("finish_reason")
            if finish_reason is not None:
                slot["finish_reason"] = finish_reason
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                merged = slot["logprobs"] or {"content": []}
                merged["content"].extend(logprobs["content"])
                slot["logprobs"] = merged
    joiner.finish()
    result = []
    for index in sorted(choices):
        slot = choices[index]
        if calls.get(index):
            slot["message"]["tool_calls"] = [calls[index][k] for k in sorted(calls[index])]
        result.append(slot)
    out["choices"] = result
    out["usage"] = usage
    return out, []


def _openai_responses(events: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold Responses API stream events into one response object."""
    final: dict[str, Any] | None = None
    base: dict[str, Any] = {"object": "response", "status": "incomplete"}
    items: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    joiner = _Joiner()

    def item_at(event: dict[str, Any], default_type: str) -> dict[str, Any]:
        index = event.get("output_index") if isinstance(event.get("output_index"), int) else 0
        return items.setdefault(index, {"type": default_type})

    def part_at(item: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
        content = item.setdefault("content", [])
        index = event.get("content_index") if isinstance(event.get("content_index"), int) else 0
        while len(content) <= index:
            content.append({"type": "output_text", "text": "", "annotations": []})
        return content[index]

    for event in events:
        kind = event.get("type")
        response = event.get("response")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            if isinstance(response, dict):
                final = response
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            if isinstance(response, dict):
                base = dict(response)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict):
                index = (
                    event.get("output_index") if isinstance(event.get("output_index"), int) else 0
                )
                items[index] = json.loads(json.dumps(item))
        elif kind == "response.content_part.added":
            part = event.get("part")
            item = item_at(event, "message")
            target = part_at(item, event)
            if isinstance(part, dict):
                target.update(part)
        elif kind == "response.output_text.delta":
            item = item_at(event, "message")
            item.setdefault("role", "assistant")
            joiner.add(part_at(item, event), "text", event.get("delta"))
        elif kind == "response.output_text.done" and isinstance(event.get("text"), str):
            joiner.set(part_at(item_at(event, "message"), event), "text", event["text"])
        elif kind == "response.function_call_arguments.delta":
            joiner.add(item_at(event, "function_call"), "arguments", event.get("delta"))
        elif kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                joiner.set(item_at(event, "function_call"), "arguments", event["arguments"])
        elif kind == "error":
            problems.append(f"stream error event: {event.get('message') or event.get('code')}")
    joiner.finish()
    if final is not None:
        if not final.get("output") and items:
            final = {**final, "output": [items[k] for k in sorted(items)]}
        return final, problems
    problems.append("response stream has no response.completed event")
    return {**base, "output": [items[k] for k in sorted(items)]}, problems


def _anthropic(events: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold an Anthropic message stream into one message object."""
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    problems: list[str] = []
    joiner = _Joiner()

    def finish_block(index: int) -> None:
        if index not in partial:
            return
        text = "".join(partial.pop(index))
        block = blocks.setdefault(index, {"type": "tool_use"})
        if not text.strip():
            block["input"] = {}
            return
        try:
            block["input"] = safeload.load_json(text, limits)
        except safeload.LoadError as exc:
            block["input"] = text
            problems.append(f"tool_use block {index}: input is not valid JSON ({exc.message})")

    for event in events:
        kind = event.get("type")
        index = event.get("index") if isinstance(event.get("index"), int) else 0
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            for position, block in enumerate(message.get("content") or []):
                if isinstance(block, dict):
                    blocks[position] = dict(block)
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = dict(event["content_block"])
            blocks[index] = block
            if block.get("type") in ("tool_use", "server_tool_use"):
                partial[index] = []
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                joiner.add(block, "text", delta.get("text"))
            elif delta_type == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
            elif delta_type == "thinking_delta":
                joiner.add(block, "thinking", delta.get("thinking"))
            elif delta_type == "signature_delta":
                block["signature"] = delta.get("signature")
            elif delta_type == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            finish_block(index)
        elif kind == "message_delta":
            delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
            message.update(delta)
            if isinstance(event.get("usage"), dict):
                usage = dict(message.get("usage") or {})
                usage.update(event["usage"])
                message["usage"] = usage
        elif kind == "error":
            error = event.get("error")
            message["error"] = error
            problems.append(f"stream error event: {error}")
    for index in list(partial):
        finish_block(index)
    joiner.finish()
    message["content"] = [blocks[k] for k in sorted(blocks)]
    return message, problems


def _gemini(chunks: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold streamGenerateContent chunks into one GenerateContentResponse."""
    out: dict[str, Any] = {}
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback", "createTime"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        for candidate in chunk.get("candidates") or []:
            if not isinstance(candidate, dict):
                continue
            index = candidate.get("index") if isinstance(candidate.get("index"), int) else 0
            slot = candidates.setdefault(
                index, {"content": {"role": "model", "parts": []}, "index": index}
            )
            content = candidate.get("content") if isinstance(candidate.get("content"), dict) else {}
            if isinstance(content.get("role"), str):
                slot["content"]["role"] = content["role"]
            parts = slot["content"]["parts"]
            for part in content.get("parts") or []:
                if not isinstance(part, dict):
                    continue
                last = parts[-1] if parts else None
                if (
                    isinstance(part.get("text"), str)
                    and last is not None
                    and set(last) <= {"text", "thought"}
                    and set(part) <= {"text", "thought"}
                    and last.get("thought") == part.get("thought")
                ):
                    last["text"] += part["text"]
                else:
                    parts.append(dict(part))
            for key, value in candidate.items():
                if key not in ("content", "index") and value is not None:
                    slot[key] = value
    out["candidates"] = [candidates[k] for k in sorted(candidates)]
    return out, []


_REASSEMBLERS = {
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
