"""Langfuse trace exports: `{"trace": {...}, "observations": [...]}` (observations may also
sit inside the trace, listed twice), a list of such traces, or a bare list of observations.

Each `GENERATION` observation is one model call, rebuilt from its `input` (a provider
payload, a message list or a prompt; often stored as JSON text) and `output`, with its
`model`, `usageDetails` and `startTime`. Spans, tools, agents and events are counted.
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
    loads,
    rebuilt_interaction,
    token_usage,
)
from cassettes_app.formats.sniff import NO, SURE, head_text, json_doc_keys
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedRecording, ParseResult

NAME = "langfuse"
NOTE = "rebuilt from a Langfuse observation"


def sniff(path: str, head: bytes) -> float:
    """A trace with observations, or observations typed GENERATION/SPAN/EVENT."""
    kind, keys = json_doc_keys(path, head)
    text = head_text(head)[:65536]
    typed = '"GENERATION"' in text or '"SPAN"' in text
    if kind == "object" and "observations" in keys and ("trace" in keys or typed):
        return SURE
    if kind == "object" and "trace" in keys and '"observations"' in text:
        return SURE
    if kind == "array" and typed and {"traceId", "type"} <= keys:
        return SURE
    return NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per generation, in start order."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _observations(doc: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            if isinstance(item, Mapping) and "type" in item and "traceId" in item:
                yield item
            else:
                yield from _observations(item)
        return
    if not isinstance(doc, Mapping):
        return
    for obs in doc.get("observations") or []:
        if isinstance(obs, Mapping):
            yield obs
    trace = doc.get("trace")
    if isinstance(trace, Mapping):
        yield from _observations(trace)


def _usage(obs: Mapping[str, Any]) -> dict[str, Any] | None:
    details = safeload.object_at(obs, "usageDetails")
    legacy = safeload.object_at(obs, "usage")
    return token_usage(
        details.get("input", legacy.get("input", obs.get("promptTokens"))),
        details.get("output", legacy.get("output", obs.get("completionTokens"))),
        details.get("total", legacy.get("total", obs.get("totalTokens"))),
    )


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    seen: set[Any] = set()
    observations: list[Mapping[str, Any]] = []
    for obs in _observations(safeload.load_json(data, limits)):
        key = obs.get("id") or id(obs)
        if key not in seen:  # a trace may list its observations twice
            seen.add(key)
            observations.append(obs)
    recording = ParsedRecording(path=path, format=NAME, meta={"observations": len(observations)})
    generations = [o for o in observations if str(o.get("type")).upper() == "GENERATION"]
    generations.sort(key=lambda o: iso_time(o.get("startTime")) or "")
    for obs in generations:
        model = obs.get("model") if isinstance(obs.get("model"), str) else None
        output = loads(obs.get("output"))
        request, response = chat_call(
            as_chat_messages(obs.get("input")),
            as_reply(output),
            model=model,
            usage=_usage(obs),
        )
        if str(obs.get("level")).upper() == "ERROR":
            result.findings.append(
                ParsedFinding(
                    "invalid_field",
                    "info",
                    path,
                    None,
                    f"generation {obs.get('name') or obs.get('id')}: level ERROR: "
                    f"{str(obs.get('statusMessage') or '')[:200]}",
                )
            )
        recording.interactions.append(
            rebuilt_interaction(
                len(recording.interactions),
                request,
                response,
                note=NOTE,
                recorded_at=iso_time(obs.get("startTime")),
                extra={"observation": str(obs.get("name") or "")[:200], "id": obs.get("id")},
            )
        )
    others: dict[str, int] = {}
    for obs in observations:
        kind = str(obs.get("type") or "untyped")[:40]
        if kind.upper() != "GENERATION":
            others[kind] = others.get(kind, 0) + 1
    if others:
        result.findings.append(tally_finding(path, "observations not read", others))
    if not observations:
        result.findings.append(ParsedFinding("empty_file", "warn", path, None, "no observations"))
    close_recording(result, recording)
