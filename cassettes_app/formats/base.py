"""Shared dataclasses and small helpers for the recording parsers."""

from __future__ import annotations

import codecs
import datetime as dt
import functools
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cassettes_app import safeload
from cassettes_app.limits import (
    PARSE_ERRORS,
    ParseLimits,
    error_line,
    error_message,
)
from cassettes_app.providers.common import ToolCall

Severity = Literal["info", "warn", "error"]


@dataclass(frozen=True, slots=True)
class ParsedFinding:
    """One problem found while reading a file."""

    kind: str
    severity: Severity
    path: str
    line: int | None
    message: str


@dataclass(frozen=True, slots=True)
class Body:
    """A decoded request or response body."""

    data: bytes = b""
    text: str | None = None
    json: Any | None = None
    content_type: str | None = None
    encoding_note: str | None = None
    is_binary: bool = False
    truncated: bool = False
    # Finding-worthy problems met while decoding (bad JSON, capped gzip, ...).
    problems: tuple[str, ...] = ()


EMPTY_BODY = Body()


@dataclass(slots=True)
class ParsedInteraction:
    """One request/response pair of a recording."""

    index: int
    method: str | None
    url: str | None
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    request_body: Body = EMPTY_BODY
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: Body = EMPTY_BODY
    recorded_at: str | None = None
    duration_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ParsedRecording:
    """One cassette, fixture, HAR file or agent-log request set."""

    path: str
    format: str
    key: str | None = None
    model: str | None = None
    recorded_at: str | None = None
    interactions: list[ParsedInteraction] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TraceHop:
    """One HTTP hop of a `replay.jsonl` trace."""

    line: int
    url: str | None
    method: str | None
    status: int | None
    trace_id: str | None
    idempotency_key: str | None
    request_headers: list[tuple[str, str]]
    req: Any
    resp: Any


@dataclass(slots=True)
class LedgerEntry:
    """One ledger line: a model call, cache hit, fallback, ..."""

    line: int
    event: str | None
    data: dict[str, Any]


@dataclass(slots=True)
class ParsedMessage:
    """One agent-log chat message (OpenAI, Anthropic or Gemini style)."""

    role: str | None
    content: Any
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    raw: Any = None
    line: int | None = None


@dataclass(slots=True)
class ParseResult:
    """Everything one parser got out of one file."""

    format: str
    recordings: list[ParsedRecording] = field(default_factory=list)
    hops: list[TraceHop] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    messages: list[ParsedMessage] = field(default_factory=list)
    findings: list[ParsedFinding] = field(default_factory=list)


def finding_from_error(
    path: str,
    exc: BaseException,
    *,
    kind: str = "parse_error",
    severity: Severity = "error",
    line: int | None = None,
) -> ParsedFinding:
    """Turn a caught parser error into a finding."""
    return ParsedFinding(kind, severity, path, line or error_line(exc), error_message(exc))


def run_parser(
    name: str,
    path: str,
    data: bytes,
    limits: ParseLimits,
    fill: Callable[[ParseResult], None],
) -> ParseResult:
    """Run one format's body under the file-size cap, turning load errors into findings."""
    result = ParseResult(name)
    if len(data) > limits.max_file_bytes:
        result.findings.append(
            ParsedFinding(
                "file_too_large",
                "error",
                path,
                None,
                f"file is {len(data)} bytes, over max_file_bytes ({limits.max_file_bytes}); "
                "not parsed",
            )
        )
        return result
    try:
        fill(result)
    except PARSE_ERRORS as exc:
        result.findings.append(finding_from_error(path, exc))
    return result


def jsonl_objects(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The object lines of a JSON Lines file; a bad or non-object line becomes a finding."""
    for line, obj, error in safeload.iter_jsonl(data, limits):
        if error is not None:
            result.findings.append(ParsedFinding("bad_line", "warn", path, line, error))
        elif not isinstance(obj, dict):
            result.findings.append(
                ParsedFinding("bad_line", "warn", path, line, "line is not a JSON object")
            )
        else:
            yield line, obj


def body_findings(path: str, line: int | None, where: str, body: Body) -> list[ParsedFinding]:
    """Findings for the problems met while decoding one body."""
    return [
        ParsedFinding("body_problem", "warn", path, line, f"{where}: {problem}")
        for problem in body.problems
    ]


# --- headers -----------------------------------------------------------------


def scalar_text(value: Any) -> str:
    """Render a loaded scalar as the text a header or field most likely had."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def header_pairs(raw: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """Normalise dict-of-lists, dict or list-of-pairs headers; also name the coerced ones."""
    pairs: list[tuple[str, str]] = []
    coerced: list[str] = []

    def add(name: Any, value: Any) -> None:
        # Bytes are a recorder's explicit binary value (vcrpy's !!binary for botocore's
        # header bytes), not a YAML 1.1 coercion: read as their text, nothing to report.
        if not isinstance(value, str | bytes):
            coerced.append(scalar_text(name))
        pairs.append((scalar_text(name), scalar_text(value)))

    if raw is None:
        return pairs, coerced
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            if isinstance(value, list | tuple):
                for item in value:
                    add(name, item)
            else:
                add(name, value)
    elif isinstance(raw, Iterable) and not isinstance(raw, str | bytes):
        for item in raw:
            if isinstance(item, Mapping) and "name" in item:
                value = item.get("value")
                # Polly.JS 1.x writes repeated headers as one entry with a list of values.
                for one in value if isinstance(value, list) else [value]:
                    add(item.get("name"), one)
            elif isinstance(item, list | tuple) and len(item) == 2:
                add(item[0], item[1])
    return pairs, coerced


def get_header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """Return the first value of a header, matched case-insensitively."""
    wanted = name.lower()
    for key, value in headers:
        if key.lower() == wanted:
            return value
    return None


def as_text_or_none(value: Any) -> str | None:
    """Return a string for a scalar field, None for missing or structured values."""
    if value is None or isinstance(value, dict | list):
        return None
    return scalar_text(value)


def as_status(value: Any) -> int | None:
    """Coerce an HTTP status (int, digit string or {code}) to int."""
    if isinstance(value, Mapping):
        value = value.get("code")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 3:
        return int(value.strip())
    return None


_GEMINI_MODEL = re.compile(r"/models/([A-Za-z0-9._-]+)(?::|$|\?)")
# Bedrock runtime: /model/<model id, URL-encoded>/invoke, converse, ...-stream.
_BEDROCK_MODEL = re.compile(
    r"/model/([^/?#]+)/(?:invoke|converse|invoke-with-response-stream|converse-stream)\b"
)


def guess_model(url: str | None, *payloads: Any) -> str | None:
    """Find the model named by a request/response payload, else in a Gemini-style URL."""
    for payload in payloads:
        if isinstance(payload, Mapping):
            for key in ("model", "modelVersion"):
                value = payload.get(key)
                if isinstance(value, str) and value:
                    return value
    if url:
        match = _GEMINI_MODEL.search(url)
        if match:
            return match.group(1)
        match = _BEDROCK_MODEL.search(url)
        if match:
            return urllib.parse.unquote(match.group(1))
    return None


# --- sniffing ----------------------------------------------------------------

# How sure a reader's sniff is that a file is its format. Every reader is asked; the surest
# wins, and a tie goes to the reader listed first. SURE: the format's own marks (a HAR
# `log`, VCR's `interactions`, a nock scope); LIKELY: the right shape with the usual keys;
# MAYBE: a shape other readers share (a JSON object with `text`).
NO, MAYBE, LIKELY, SURE = 0.0, 0.4, 0.7, 1.0

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")

# The tokens of a JSON head: a string (with `:` after it when it is a key) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"(\s*+:)?|\{|\}|\[|\]')
_KEY_COLON = re.compile(r"\s*+:")


def _tokens(text: str) -> Iterator[tuple[int, int, int]]:
    """`_TOKEN.finditer(text)` as (start, end, end of the string literal or -1 if none).

    The same matches, found with str.find (memchr) instead of re stepping through every
    character: a head cut inside a long string costs a few passes, not one step per
    character. Where no string can close (no `"` left, or a backslash before a line end or
    the end), the scan goes on from the next character, inside the string, as re's does.
    """
    find = text.find
    size = len(text)
    marks = '"{}[]'
    nxt = [find(c) for c in marks]
    quote = backslash = -1  # next `"` and `\\` at or after the string scan's position
    # A string that cannot close fails at the same place from every later `"` before that
    # place (each such `"` was escaped, so backslash runs pair up alike): no rescans.
    dead_until = -1
    pos = 0
    while True:
        at = -1
        for i, mark in enumerate(marks):
            if 0 <= nxt[i] < pos:
                nxt[i] = find(mark, pos)
            if nxt[i] >= 0 and (at < 0 or nxt[i] < at):
                at = nxt[i]
        if at < 0:
            return
        if text[at] != '"':
            yield at, at + 1, -1
            pos = at + 1
            continue
        close = -1
        if at >= dead_until:
            j = at + 1
            while True:
                if quote < j:
                    quote = find('"', j)
                    quote = size if quote < 0 else quote
                if backslash < j:
                    backslash = find("\\", j)
                    backslash = size if backslash < 0 else backslash
                if backslash < quote:
                    if backslash + 1 >= size or text[backslash + 1] == "\n":
                        dead_until = backslash  # `\\.` cannot match here
                        break
                    j = backslash + 2
                    continue
                if quote < size:
                    close = quote + 1
                else:
                    dead_until = size
                break
        if close < 0:
            pos = at + 1
            continue
        colon = _KEY_COLON.match(text, close)
        end = colon.end() if colon else close
        yield at, end, close
        pos = end


@functools.lru_cache(maxsize=4)
def head_text(head: bytes) -> str:
    """Decode the first bytes of a file for sniffing (lenient, BOM stripped; every reader's
    sniff asks for the same head, so it is decoded once)."""
    text = head.decode("utf-8", "ignore")
    return text[1:] if text.startswith("\ufeff") else text


def looks_binary(head: bytes) -> bool:
    """True when the head has NUL bytes or is not UTF-8 (a cut last character is fine)."""
    sample = head[:8192]
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(sample) - 3
    return False


def wide_encoding(head: bytes) -> str | None:
    """Name a UTF-16/32 encoding recognised by its BOM or NUL pattern, else None."""
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "UTF-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16"
    if len(head) >= 4 and head[0] and not head[1] and head[2] and not head[3]:
        return "UTF-16"
    if len(head) >= 4 and not head[0] and head[1] and not head[2] and head[3]:
        return "UTF-16"
    return None


def json_top_keys(text: str) -> tuple[str | None, set[str]]:
    """Kind ("object", "array", "lines") and top-level keys of a possibly cut JSON head.

    For an array the keys are those of its first object; "lines" means a first
    object followed by another, i.e. JSON Lines.
    """
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None, set()
    # Fast path: a head that is a whole document parses at C speed; a cut head, JSON Lines
    # ("Extra data") or anything odd falls through to the tolerant tokenizer below.
    try:
        whole = json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(whole, dict):
            return "object", {k for k in whole if isinstance(k, str)}
        if isinstance(whole, list):
            first = whole[0] if whole else None
            return "array", set(first) if isinstance(first, dict) else set()
    kind = "object" if stripped[0] == "{" else "array"
    target = 1 if kind == "object" else 2
    depth = 0
    keys: set[str] = set()
    for start, end, literal_end in _tokens(stripped):
        first = stripped[start]
        if first in "{[":
            depth += 1
        elif first in "}]":
            depth -= 1
            if depth <= 1 and kind == "array":
                break
            if depth <= 0:
                # Another object on a later line: JSON Lines, not one document.
                if stripped[end:].lstrip()[:1] == "{":
                    kind = "lines"
                break
        elif end != literal_end and depth == target:  # a string followed by `:`
            try:
                keys.add(json.loads(stripped[start:literal_end]))
            except ValueError:
                continue
    return kind, keys


@functools.lru_cache(maxsize=4)
def _head_keys(head: bytes) -> tuple[str | None, frozenset[str]]:
    # Every reader's sniff asks for the same head's keys: parse it once (bytes cache
    # their hash, so the lookup is cheap even for a 256 KiB head).
    doc = head_document(head)
    if isinstance(doc, dict):
        return "object", frozenset(k for k in doc if isinstance(k, str))
    if isinstance(doc, list):
        first = doc[0] if doc else None
        return "array", frozenset(first) if isinstance(first, dict) else frozenset()
    kind, keys = json_top_keys(head_text(head))
    return kind, frozenset(keys)


@functools.lru_cache(maxsize=4)
def head_document(head: bytes) -> Any:
    """The head parsed as one JSON document when it is one whole (small files), else None."""
    text = head_text(head).strip()
    if not text.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def json_doc_keys(path: str, head: bytes) -> tuple[str | None, set[str]]:
    """`json_top_keys` of a file head; a .jsonl name always reads as JSON Lines."""
    kind, frozen = _head_keys(head)
    keys = set(frozen)
    if kind is not None and path.lower().endswith(JSONL_SUFFIXES):
        return "lines", keys
    return kind, keys


def first_jsonl_object(text: str) -> tuple[dict[str, Any] | None, bool]:
    """Parse the first non-empty line as a JSON object; say whether a second line follows."""
    lines = text.lstrip("\r\n \t").split("\n", 2)
    first = lines[0].strip()
    more = len(lines) > 1 and lines[1].strip().startswith("{")
    if not first.startswith("{"):
        return None, more
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        # A first line longer than the head: fall back to the keys we can see.
        _, keys = json_top_keys(first)
        return ({key: None for key in keys} or None), more
    return (obj if isinstance(obj, dict) else None), more


def jsonl_head(path: str, head: bytes) -> dict[str, Any] | None:
    """The first JSONL object when the file looks like JSON Lines, else None."""
    text = head_text(head)
    obj, more = first_jsonl_object(text)
    if obj is None:
        return None
    if path.lower().endswith(JSONL_SUFFIXES) or path.lower().endswith(".log") or more:
        return obj
    return None


JSONL_SAMPLE = 20  # lines the JSON Lines sniffers look at, not the first alone


def jsonl_sample(head: bytes, count: int = JSONL_SAMPLE) -> list[dict[str, Any]]:
    """Up to `count` JSON objects from the head's complete lines (a cut last line skipped;
    lines too long for the head give their visible keys). Callers must not change them."""
    return _jsonl_sample(head, count)


@functools.lru_cache(maxsize=4)
def _jsonl_sample(head: bytes, count: int) -> list[dict[str, Any]]:
    text = head_text(head)
    limit = count * 3  # blank and non-object lines are skipped; no need to split the rest
    lines = text.split("\n", limit)
    if len(lines) > limit or (not text.endswith("\n") and len(lines) > 1):
        lines = lines[:-1]  # the unsplit rest, or a last line cut off by the head
    out: list[dict[str, Any]] = []
    for raw in lines:
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            _, keys = json_top_keys(line)
            obj = {key: None for key in keys} if keys else None
        if isinstance(obj, dict):
            out.append(obj)
        if len(out) >= count:
            break
    return out


# Agent logs this tool does not read yet, told apart so that no other reader claims them
# (a ledger reader would count their events as "other" and pass). `looks_like` names them.
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context"})
_CLAUDE_CODE_TYPES = frozenset({"summary", "user", "assistant", "system"})


CLAUDE_CODE = "a Claude Code session transcript"
CLAUDE_SDK = "a Claude Agent SDK message stream"
_CLAUDE_SDK_TYPES = frozenset({"system", "user", "assistant", "result", "stream_event"})
CODEX = "a Codex CLI rollout"


def looks_like(objs: list[dict[str, Any]]) -> str | None:
    """Name a known JSON Lines agent-log family from sampled lines, or None."""
    keys = set().union(*(set(o) for o in objs)) if objs else set()
    types = {o.get("type") for o in objs if isinstance(o.get("type"), str)}
    if {"parentUuid", "sessionId"} <= keys or (
        types and types <= _CLAUDE_CODE_TYPES and "leafUuid" in keys
    ):
        return CLAUDE_CODE
    if (
        types
        and types <= _CLAUDE_SDK_TYPES
        and "session_id" in keys
        and any(isinstance(o.get("message"), Mapping) for o in objs)
    ):
        return CLAUDE_SDK  # `claude -p --output-format stream-json`, the Agent SDK's stdio
    if types & _CODEX_TYPES and "payload" in keys:
        return CODEX
    if ({"trace_id", "span_id"} <= keys or {"traceId", "spanId"} <= keys) and (
        "attributes" in keys or "name" in keys
    ):
        return "an OpenTelemetry span export"
    return None


def is_trace_line(obj: Mapping[str, Any]) -> bool:
    """A JSONL object that reads like one HTTP hop of a trace."""
    if "url" not in obj:
        return False
    if {"trace_id", "req", "resp"} & set(obj):
        return True
    # {url, method, request, response} is an agent log's request/response pair.
    return "method" in obj and not ("request" in obj and "response" in obj)


def is_agent_line(obj: Mapping[str, Any]) -> bool:
    """A JSONL object that reads like a chat message or a request/response pair."""
    return (
        "role" in obj
        or ("request" in obj and "response" in obj)
        or isinstance(obj.get("message"), Mapping)
    )


def tally_finding(path: str, label: str, counts: Mapping[str, int]) -> ParsedFinding:
    """One info finding naming what a reader counted but did not read (most first, eight)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
    shown = ", ".join(f"{kind} ×{n}" for kind, n in ranked)
    return ParsedFinding("bad_line", "info", path, None, f"{label}: {shown}")


def close_recording(result: ParseResult, recording: ParsedRecording) -> None:
    """Name the recording's model and time from its interactions, and keep it."""
    set_models(recording)
    recording.recorded_at = recording.recorded_at or next(
        (i.recorded_at for i in recording.interactions if i.recorded_at), None
    )
    result.recordings.append(recording)


def set_models(recording: ParsedRecording) -> None:
    """Name the recording's model: the served one (response) first, then the requested one."""
    models: list[str] = []
    for interaction in recording.interactions:
        for payload in (interaction.response_body.json, interaction.request_body.json, None):
            model = guess_model(interaction.url if payload is None else None, payload)
            if model and model not in models:
                models.append(model)
    recording.model = models[0] if models else None
    if len(models) > 1:
        recording.meta["models"] = models
