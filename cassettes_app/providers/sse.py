"""Server-sent event streams: the one SSE parser, and the dispatch to each provider's fold.

Both readers of a stream come through here: `decode_stream` when a recorded body is decoded
(bodies.decode_body) and `event_payloads` when `normalise` is handed raw SSE text. Event
data is always loaded with the safe JSON loader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from cassettes_app import safeload
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.providers.anthropic import fold_stream as anthropic_fold
from cassettes_app.providers.cohere import V2_TYPES as COHERE_V2_TYPES
from cassettes_app.providers.cohere import fold_stream as cohere_fold
from cassettes_app.providers.gemini import fold_stream as gemini_fold
from cassettes_app.providers.openai_chat import fold_stream as openai_chat_fold
from cassettes_app.providers.openai_responses import fold_stream as openai_responses_fold

__all__ = [
    "STREAM_FOLDS",
    "SseEvent",
    "decode_stream",
    "event_payloads",
    "parse_sse",
    "stream_kind",
]


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


def event_payloads(text: str, limits: ParseLimits = DEFAULT_LIMITS) -> list[Any]:
    """The data payloads of a stream, JSON-loaded where they parse, `[DONE]` left out."""
    events, _ = parse_sse(text, limits.max_events)
    load = safeload.json_loader(limits)
    payloads: list[Any] = []
    for event in events:
        if event.data.strip() == "[DONE]":
            continue
        try:
            payloads.append(load(event.data))
        except (safeload.LoadError, ValueError, RecursionError):
            payloads.append(event.data)
    return payloads


# Each provider's fold of a decoded stream, by the name `stream_kind` gives it.
STREAM_FOLDS: dict[str, Callable[[list[dict[str, Any]], ParseLimits], tuple[Any, list[str]]]] = {
    "openai_chat": openai_chat_fold,
    "openai_responses": openai_responses_fold,
    "anthropic": anthropic_fold,
    "gemini": gemini_fold,
    "cohere": cohere_fold,
}


# Events read before deciding which provider stream this is.
_KIND_WINDOW = 20


def decode_stream(text: str, limits: ParseLimits) -> tuple[Any, str, bool, list[str]]:
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
    stream = kind or stream_kind(payloads)
    reassemble = STREAM_FOLDS.get(stream) if stream else None
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
        if kind in COHERE_V2_TYPES:
            return "cohere"
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and "delta" in (choices[0] or {}):
            return "openai_chat"
    return None
