"""Ledgers: JSON Lines of model calls, cache hits and fallbacks (`event`, `type` or `kind`)."""

from __future__ import annotations

import os
import re

from cassettes_app.formats.base import as_text_or_none, jsonl_objects, run_parser
from cassettes_app.formats.sniff import (
    LIKELY,
    MAYBE,
    NO,
    SURE,
    is_agent_line,
    is_trace_line,
    jsonl_head,
    jsonl_sample,
    looks_like,
)
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import LedgerEntry, ParsedFinding, ParseResult

NAME = "ledger"

EVENT_FIELDS = ("event", "type", "kind")

MODEL_CALL, CACHE_HIT, FALLBACK, OTHER = "model_call", "cache_hit", "fallback", "other"

_WORD = re.compile(r"[a-z]+")


def classify_event(event: str | None) -> str:
    """model_call, cache_hit, fallback or other, from an event name's words."""
    if not event:
        return OTHER
    words = set(_WORD.findall(event.lower()))
    text = event.lower()
    if "fallback" in text or words & {"degraded", "degrade", "rules", "rule", "heuristic"}:
        return FALLBACK
    if "miss" in words:
        return OTHER  # a cache miss is followed by the model call it causes; count that one
    if "cache" in text or words & {"cached", "hit"}:
        return CACHE_HIT
    if words & {"error", "failed", "failure", "timeout"}:
        # An error event usually accompanies the model_call it belongs to; counting both
        # would double the attempts.
        return OTHER
    if words & {"model", "llm", "completion", "completions", "chat", "api", "retry", "attempt"}:
        return MODEL_CALL
    return OTHER


def event_of(obj: dict) -> str | None:
    """An entry's event name: its `event`, `type` or `kind` field."""
    return next(
        (as_text_or_none(obj[name]) for name in EVENT_FIELDS if obj.get(name) is not None),
        None,
    )


def sniff(path: str, head: bytes) -> float:
    """JSON Lines whose sampled lines are all events, most of them ledger events (a model
    call, a cache hit, a fallback): sure. Named like a ledger with other events: likely (the
    check then says none of them counts). Nothing that reads like chat messages, trace hops
    or a known agent log (Claude Code, Codex, OpenTelemetry spans): those have `type` too,
    and a ledger reader would count their lines as "other events".
    """
    if jsonl_head(path, head) is None:
        return NO
    sample = jsonl_sample(head)
    if not sample or looks_like(sample) is not None:
        return NO
    events = [event_of(obj) for obj in sample]
    if any(event is None for event in events):
        return NO
    kinds = [classify_event(event) for event in events]
    for obj, kind in zip(sample, kinds, strict=True):
        if is_trace_line(obj) or "role" in obj or isinstance(obj.get("message"), dict):
            return NO
        if kind == OTHER and is_agent_line(obj):
            return NO  # a request/response pair is a ledger entry only with a ledger event
    known = sum(kind != OTHER for kind in kinds)
    named = "ledger" in os.path.basename(path).lower()
    if known * 2 >= len(events):
        # Model calls carrying their request and response are an agent log's pairs too:
        # the name decides.
        pairs = any(is_agent_line(obj) for obj in sample)
        return SURE if named or not pairs else LIKELY
    if named:
        return LIKELY
    return MAYBE if known else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse every good line into an entry; each bad line is a finding with its number."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    for line, obj in jsonl_objects(result, path, data, limits):
        event = event_of(obj)
        if event is None:
            result.findings.append(
                ParsedFinding(
                    "bad_line", "info", path, line, "entry has no event, type or kind field"
                )
            )
        result.ledger.append(LedgerEntry(line=line, event=event, data=obj))
    if not result.ledger and not result.findings:
        result.findings.append(
            ParsedFinding("empty_file", "warn", path, None, "ledger has no entries")
        )
