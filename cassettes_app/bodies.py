"""Decode recorded HTTP bodies: base64, compression, JSON and SSE streams.

Event streams are parsed and folded by `providers.sse` and each provider's `fold_stream`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any, NamedTuple, TypeGuard

import brotli

from cassettes_app import safeload
from cassettes_app.headers import get_header, header_pairs
from cassettes_app.jsonvalues import spaced_json
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import Body
from cassettes_app.providers.eventstream import (
    MEDIA_TYPE as EVENTSTREAM,
)
from cassettes_app.providers.eventstream import decode_eventstream, looks_like_eventstream
from cassettes_app.providers.ndjson import decode_ndjson
from cassettes_app.providers.sse import decode_stream

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


_NDJSON_TYPES = frozenset(
    {
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/jsonlines",
        "application/stream+json",  # Cohere v1 streams
        "application/x-json-stream",
    }
)


def _looks_ndjson(stripped: str) -> bool:
    """Two or more lines that each hold one JSON object (one JSON document never does)."""
    lines = [line for line in stripped.splitlines()[:3] if line.strip()]
    return len(lines) >= 2 and all(
        line.lstrip().startswith("{") and line.rstrip().endswith("}") for line in lines
    )


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


def _normalised(headers: object) -> TypeGuard[list[tuple[str, str]]]:
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


def _json_value_body(raw: dict | list, content_type: str | None, ascii_values: bool) -> Body:
    """A body already parsed by the recording's own JSON (cassette-task payloads, fixtures),
    kept as json.dumps(raw, ensure_ascii=False) writes it (orjson's text made the same,
    when it can be), which for ASCII values is json.dumps(raw) too."""
    fast = spaced_json(raw)
    if fast is not None:
        return Body(fast, fast.decode(), raw, content_type, "json value")
    dumped = json.dumps(raw) if ascii_values else json.dumps(raw, ensure_ascii=False)
    return Body(dumped.encode("utf-8", "surrogatepass"), dumped, raw, content_type, "json value")


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
    pairs: list[tuple[str, str]] = headers if _normalised(headers) else header_pairs(headers)[0]
    content_type = get_header(pairs, "content-type")
    media = _media_type(content_type)
    if raw is None:
        return Body(content_type=content_type)
    if isinstance(raw, dict | list):
        return _json_value_body(raw, content_type, ascii_values)

    notes: list[str] = []
    problems: list[str] = []
    truncated = False
    cap = limits.max_body_bytes
    data, text = _raw_bytes(raw, base64_encoded, notes, problems)

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

    if _is_eventstream(media, data):
        return _eventstream_body(data, content_type, notes, truncated, problems, limits)

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
        parsed, sse_note, sse_truncated, sse_problems = decode_stream(text, limits)
        notes.insert(0, sse_note)
        truncated = truncated or sse_truncated
        problems.extend(sse_problems)
    elif media in _NDJSON_TYPES or (
        (media in ("", "text/plain") or _is_json_type(media)) and _looks_ndjson(stripped)
    ):
        parsed, nd_note, nd_truncated, nd_problems = decode_ndjson(text, limits)
        notes.insert(0, nd_note)
        truncated = truncated or nd_truncated
        problems.extend(nd_problems)
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


def _is_eventstream(media: str, data: bytes) -> bool:
    """An AWS event stream: said so, or binary whose first frame's checksum holds."""
    return media == EVENTSTREAM or (
        media in ("", "application/octet-stream") and looks_like_eventstream(data)
    )


def _eventstream_body(
    data: bytes,
    content_type: str | None,
    notes: list[str],
    truncated: bool,
    problems: list[str],
    limits: ParseLimits,
) -> Body:
    parsed, note, more = decode_eventstream(data, limits)
    return _body(data, None, parsed, content_type, [note, *notes], True, truncated, problems + more)


def _raw_bytes(
    raw: bytes | bytearray | str, base64_encoded: bool, notes: list[str], problems: list[str]
) -> tuple[bytes, str | None]:
    """The recorded bytes of a body, and its text when the recording gave it as text."""
    if isinstance(raw, str) and not base64_encoded:
        return raw.encode("utf-8", "surrogatepass"), raw
    if isinstance(raw, str):
        try:
            data = base64.b64decode("".join(raw.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            problems.append(f"invalid base64 body: {exc}")
            return raw.encode("utf-8", "surrogatepass"), raw
        notes.append("base64")
        return data, None
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw), None
    text = str(raw)
    return text.encode("utf-8"), text


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
