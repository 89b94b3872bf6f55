"""Explorer-style message traces: JSON Lines where each line is one whole conversation.

A line is a JSON array of chat messages (Invariant's explorer and the datasets it loads)
or an object holding one under `messages`, `conversation`, `trajectory` or `history`
(agent-trajectory datasets); a line of metadata alone is noted. Each conversation is read
on its own, each run of its assistant messages one model call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.formats.base import run_parser, set_models
from cassettes_app.formats.conversation import as_chat_message, model_calls
from cassettes_app.formats.sniff import JSONL_SAMPLE, NO, SURE, head_text
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedMessage, ParsedRecording, ParseResult

NAME = "explorer_trace"

_KEYS = ("messages", "conversation", "trajectory", "history")


def conversation_of(value: Any) -> list[Any] | None:
    """The chat messages a line holds, or None when it holds no conversation."""
    if isinstance(value, Mapping):
        value = next((value[k] for k in _KEYS if isinstance(value.get(k), list)), None)
    if not isinstance(value, list) or not value:
        return None
    dicts = [m for m in value if isinstance(m, Mapping)]
    if len(dicts) * 2 < len(value) or not all("role" in m for m in dicts[:5]):
        return None
    return value


def _is_metadata(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) <= {"metadata", "meta", "info"}


def sniff(path: str, head: bytes) -> float:
    """Several lines, most of them whole conversations (metadata lines aside)."""
    text = head_text(head)
    lines = text.split("\n", JSONL_SAMPLE * 3)
    if not text.endswith("\n") and len(lines) > 1:
        lines = lines[:-1]
    values: list[Any] = []
    for raw in lines[: JSONL_SAMPLE * 3]:
        line = raw.strip()
        if not line.startswith(("[", "{")):
            continue
        try:
            values.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
        if len(values) >= JSONL_SAMPLE:
            break
    counted = [v for v in values if not _is_metadata(v)]
    if len(values) < 2 and not path.lower().endswith((".jsonl", ".ndjson")):
        return NO
    conversations = sum(conversation_of(v) is not None for v in counted)
    return SURE if counted and conversations * 2 > len(counted) else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; every conversation's model calls, numbered across the file."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    recording = ParsedRecording(path=path, format=NAME, meta={"conversations": 0})
    skipped = 0
    for line, value, error in safeload.iter_jsonl(data, limits):
        if error is not None:
            result.findings.append(ParsedFinding("bad_line", "warn", path, line, error))
            continue
        if _is_metadata(value):
            recording.meta.setdefault("metadata", value)
            continue
        messages = conversation_of(value)
        if messages is None:
            skipped += 1
            continue
        recording.meta["conversations"] += 1
        model = value.get("model") if isinstance(value, Mapping) else None
        parsed = []
        for message in messages:
            chat = as_chat_message(message)
            if chat is not None:
                parsed.append(ParsedMessage(chat["role"], chat.get("content"), raw=chat, line=line))
        calls = model_calls(
            result,
            path,
            parsed,
            model=model if isinstance(model, str) else None,
            start=len(recording.interactions),
        )
        for call in calls:
            call.extra["conversation"] = recording.meta["conversations"]
        recording.interactions.extend(calls)
    if skipped:
        result.findings.append(
            ParsedFinding(
                "bad_line", "info", path, None, f"{skipped} lines hold no conversation; not read"
            )
        )
    set_models(recording)
    result.recordings.append(recording)
