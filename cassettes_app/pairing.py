"""A recording against its re-recorded version: pair files by key, and turn each into turns.

A reviewer re-records a candidate's cassettes (same requests, the live model) and uploads
them; each original recording is paired with its re-recorded version by recording key, or by
path when a format carries no key. Each side becomes turns the same way, from the file alone
(never from threads across other files, which a partial re-record would not reproduce), so
the per-turn diff shows what the model answers now against what the candidate stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassettes_app.analysis.turns import body_payload, compact_message, message_dict
from cassettes_app.parsed import Body, ParseResult
from cassettes_app.providers import normalise
from cassettes_app.secrets import redact_message as _redacted
from cassettes_app.threads import message_key

__all__ = ["MAX_TURNS", "Pairing", "exchange_turn", "file_turns", "pair_files"]

MAX_TURNS = 500  # turns kept per side of a pair; the rest are counted, not shown
RAW_CAP = 20_000  # characters of a body shown when its provider is unknown


@dataclass(frozen=True)
class Pairing:
    """One original file and its re-recorded version; either side may be missing."""

    key: str
    original: str | None  # path in the submission
    rerecorded: str | None  # path in the re-record archive
    matched_by: str  # "key", "path", or "" when one side is missing


def pair_files(
    original: Sequence[tuple[str, str]], rerecorded: Sequence[tuple[str, str]]
) -> list[Pairing]:
    """Pair (path, key) lists: by key first, then by path; the unpaired stay, one-sided.

    A key appears once per side at most in the result: a second original with the same key
    (a duplicate recording) pairs by path or stays alone.
    """
    by_key: dict[str, str] = {}
    by_path: dict[str, str] = {}
    for path, key in rerecorded:
        if key:
            by_key.setdefault(key, path)
        by_path.setdefault(path, key)
    used: set[str] = set()
    pairs: list[Pairing] = []
    for path, key in original:
        match = by_key.get(key) if key else None
        if match is not None and match not in used:
            used.add(match)
            pairs.append(Pairing(key, path, match, "key"))
        elif path in by_path and path not in used:
            used.add(path)
            pairs.append(Pairing(key or by_path[path], path, path, "path"))
        else:
            pairs.append(Pairing(key, path, None, ""))
    seen: set[str] = set()
    for path, key in rerecorded:
        if path not in used and path not in seen:
            seen.add(path)
            pairs.append(Pairing(key, None, path, ""))
    return pairs


def _raw(role: str, body: Body | None) -> dict[str, Any] | None:
    """A body no provider parser understood, shown as its (capped) text."""
    if body is None or not body.data:
        return None
    text = "(binary body)" if body.is_binary else (body.text or "")
    shown = text[:RAW_CAP]
    out: dict[str, Any] = {"role": role, "text": shown, "tool_calls": [], "tool_results": []}
    if len(text) > RAW_CAP:
        out["truncated"] = True
    return out


def file_turns(results: Iterable[ParseResult]) -> tuple[list[dict[str, Any]], int]:
    """Every interaction of a file's recordings as a turn; and how many turns there were.

    A turn holds what was new in its request (messages beyond the previous request and
    its response in the same file), the response, the model and the interaction index.
    Texts are redacted. An unknown provider is shown raw, not dropped.
    """
    turns: list[dict[str, Any]] = []
    total = 0
    previous: list[tuple] = []
    for result in results:
        for recording in result.recordings:
            for inter in recording.interactions:
                total += 1
                if len(turns) >= MAX_TURNS:
                    continue
                turns.append(_turn(inter, previous))
    return turns, total


def _turn(inter: Any, previous: list[tuple]) -> dict[str, Any]:
    exchange = normalise(
        body_payload(inter.request_body) if inter.request_body else None,
        body_payload(inter.response_body) if inter.response_body else None,
        inter.url,
    )
    if exchange.provider == "unknown":
        previous.clear()
        request = _raw("request", inter.request_body)
        response = _raw("response", inter.response_body)
        return {
            "interaction_index": inter.index,
            "model": exchange.model or "",
            "new_messages": [_redacted(request)] if request else [],
            "response": _redacted(response) if response else None,
        }
    messages = [m for m in map(compact_message, exchange.request_messages) if m is not None]
    reply = compact_message(exchange.response)
    keys = [message_key(m) for m in messages]
    cut = len(previous) if previous and keys[: len(previous)] == previous else 0
    previous[:] = keys + ([message_key(reply)] if reply is not None else [])
    return {
        "interaction_index": inter.index,
        "model": exchange.model or "",
        "new_messages": [_redacted(message_dict(m)) for m in messages[cut:]],
        "response": _redacted(message_dict(reply)) if reply is not None else None,
    }


def exchange_turn(request: Any, response: Any, url: str | None = None) -> dict[str, Any]:
    """One request and its answer (parsed payloads) as a turn, shown as `file_turns` shows
    a recorded one: a live answer beside its recording reads the same way. Redacted."""
    exchange = normalise(request, response, url)
    reply = compact_message(exchange.response) if exchange.provider != "unknown" else None
    if exchange.provider == "unknown" or reply is None:
        text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
        return {
            "model": exchange.model or "",
            "new_messages": [],
            "response": _redacted(
                {"role": "response", "text": text[:RAW_CAP], "tool_calls": [], "tool_results": []}
            ),
        }
    messages = [m for m in map(compact_message, exchange.request_messages) if m is not None]
    return {
        "model": exchange.model or "",
        "new_messages": [_redacted(message_dict(m)) for m in messages],
        "response": _redacted(message_dict(reply)),
    }
