"""Sniffing: how sure a reader is that a file head is its format.

The head's text, its JSON keys, a sample of its JSON Lines, and the agent-log families
this tool knows but does not read yet (so that no other reader claims them).
"""

from __future__ import annotations

import codecs
import functools
import json
from collections.abc import Mapping
from typing import Any

from cassettes_app.formats.jsonhead import json_top_keys

# How sure a reader's sniff is that a file is its format. Every reader is asked; the surest
# wins, and a tie goes to the reader listed first. SURE: the format's own marks (a HAR
# `log`, VCR's `interactions`, a nock scope); LIKELY: the right shape with the usual keys;
# MAYBE: a shape other readers share (a JSON object with `text`).
NO, MAYBE, LIKELY, SURE = 0.0, 0.4, 0.7, 1.0


JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")


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
