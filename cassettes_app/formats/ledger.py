"""Ledgers: JSON Lines of model calls, cache hits and fallbacks (`event`, `type` or `kind`)."""

from __future__ import annotations

import os

from cassettes_app.formats.base import (
    LedgerEntry,
    ParsedFinding,
    ParseResult,
    as_text_or_none,
    is_agent_line,
    is_trace_line,
    jsonl_head,
    jsonl_objects,
    jsonl_sample,
    looks_like,
    run_parser,
)
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits

NAME = "ledger"

EVENT_FIELDS = ("event", "type", "kind")


def sniff(path: str, head: bytes) -> bool:
    """JSON Lines named like a ledger, or whose sampled lines are all ledger-shaped events.

    Every sampled line needs an event field and none may read like a chat message, a trace
    hop or a known agent log (Claude Code, Codex, OpenTelemetry spans): those have `type`
    too, and a ledger reader would count their lines as "other events" and pass them.
    """
    if jsonl_head(path, head) is None:
        return False
    sample = jsonl_sample(head)
    if not sample or looks_like(sample) is not None:
        return False
    if "ledger" in os.path.basename(path).lower():
        return True
    return all(
        set(EVENT_FIELDS) & set(obj) and not is_agent_line(obj) and not is_trace_line(obj)
        for obj in sample
    )


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse every good line into an entry; each bad line is a finding with its number."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    for line, obj in jsonl_objects(result, path, data, limits):
        event = next(
            (as_text_or_none(obj[name]) for name in EVENT_FIELDS if obj.get(name) is not None),
            None,
        )
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
