"""OpenAI Agents SDK traces: a trace with its spans (`{"object": "trace", "spans": [...]}`
or `{"trace_id", "spans"}`), a list of spans, or JSON Lines of exported trace/span
records, each span with `span_data` typed agent, generation, response, function, handoff,
guardrail or custom.

Model calls are `generation` spans (chat messages in `input`/`output`, `model`, `usage`)
and `response` spans (the Responses API's `response` object and `input` items, or only
its id and usage); a response span under a generation is that generation's and is not
counted twice. Tools, agents and handoffs are counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.formats.base import close_recording, run_parser, tally_finding
from cassettes_app.formats.conversation import (
    as_chat_messages,
    as_reply,
    chat_call,
    iso_time,
    rebuilt_interaction,
    token_usage,
)
from cassettes_app.formats.sniff import NO, SURE, head_text
from cassettes_app.limits import DEFAULT_LIMITS, PARSE_ERRORS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedRecording, ParseResult

NAME = "openai_agents"
NOTE = "rebuilt from an Agents SDK span"


def sniff(path: str, head: bytes) -> float:
    """Spans of the Agents SDK: `trace.span` records or `span_data` under `spans`."""
    text = head_text(head)[:65536]
    if not text.lstrip().startswith(("{", "[")):
        return NO
    if '"trace.span"' in text and '"span_data"' in text:
        return SURE
    if '"span_data"' in text and '"spans"' in text:
        return SURE
    return NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per model call, in start order."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _records(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> list[Any]:
    try:
        return [safeload.load_json(data, limits)]
    except PARSE_ERRORS:
        records = []
        for line, obj, error in safeload.iter_jsonl(data, limits):
            if error is not None:
                result.findings.append(ParsedFinding("bad_line", "warn", path, line, error))
            else:
                records.append(obj)
        return records


def _spans(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        for item in value:
            yield from _spans(item)
    elif isinstance(value, Mapping):
        if isinstance(value.get("span_data"), Mapping):
            yield value
        for key in ("spans", "data"):
            if isinstance(value.get(key), list):
                yield from _spans(value[key])


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, Mapping):
        return None
    return token_usage(
        usage.get("input_tokens", usage.get("prompt_tokens")),
        usage.get("output_tokens", usage.get("completion_tokens")),
        usage.get("total_tokens"),
    )


def _call(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    kind = data.get("type")
    response = data.get("response") if isinstance(data.get("response"), Mapping) else None
    if kind == "response" and response is not None:
        request: dict[str, Any] = {"input": data.get("input") or []}
        if isinstance(response.get("model"), str):
            request["model"] = response["model"]
        return request, dict(response)  # a Responses API object, read by its own normaliser
    model = data.get("model")
    if not isinstance(model, str):
        model = (
            response.get("model") if response and isinstance(response.get("model"), str) else None
        )
    return chat_call(
        as_chat_messages(data.get("input")),
        as_reply(data.get("output")),
        model=model,
        usage=_usage(data.get("usage")),
    )


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    spans = [s for r in _records(result, path, data, limits) for s in _spans(r)]
    kinds = {s.get("id"): s["span_data"].get("type") for s in spans}
    recording = ParsedRecording(path=path, format=NAME, meta={"spans": len(spans)})
    calls = []
    others: dict[str, int] = {}
    for span in spans:
        span_data = span["span_data"]
        kind = span_data.get("type")
        nested = kind == "response" and kinds.get(span.get("parent_id")) == "generation"
        if kind in ("generation", "response") and not nested:
            calls.append(span)
        else:
            label = str(kind or "untyped")[:40] + (" (inside a generation)" if nested else "")
            others[label] = others.get(label, 0) + 1
    calls.sort(key=lambda s: iso_time(s.get("started_at")) or "")
    for span in calls:
        request, response = _call(span["span_data"])
        error = span.get("error")
        recording.interactions.append(
            rebuilt_interaction(
                len(recording.interactions),
                request,
                response,
                note=NOTE,
                recorded_at=iso_time(span.get("started_at")),
                extra={"span": span.get("id"), **({"error": str(error)[:300]} if error else {})},
            )
        )
    if others:
        result.findings.append(tally_finding(path, "spans that are no model call", others))
    if not spans:
        result.findings.append(ParsedFinding("empty_file", "warn", path, None, "no spans"))
    close_recording(result, recording)
