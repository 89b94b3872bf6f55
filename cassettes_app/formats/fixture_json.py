"""Run-twice fixtures: `{"text": ...}` objects (maybe response/model/recorded_at), or a list."""

from __future__ import annotations

import json
from typing import Any

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import as_text_or_none, body_findings, run_parser
from cassettes_app.formats.sniff import MAYBE, NO, json_doc_keys
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import (
    EMPTY_BODY,
    ParsedFinding,
    ParsedInteraction,
    ParsedRecording,
    ParseResult,
)

NAME = "fixture_json"

_KNOWN = ("text", "response", "model", "recorded_at")


def sniff(path: str, head: bytes) -> float:
    """A JSON object, or a list of objects, with a `text` key (a shape others share)."""
    kind, keys = json_doc_keys(path, head)
    return MAYBE if kind is not None and "text" in keys else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse a fixture file into one recording, one interaction per fixture."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    doc = safeload.load_json(data, limits)
    items = doc if isinstance(doc, list) else [doc]
    recording = ParsedRecording(path=path, format=NAME, meta={"items": len(items)})
    if isinstance(doc, dict):
        recording.key = as_text_or_none(doc.get("key"))
    for index, item in enumerate(items):
        where = f"fixture {index}"
        if not isinstance(item, dict) or "text" not in item:
            result.findings.append(
                ParsedFinding("invalid_structure", "warn", path, None, f"{where}: no `text` field")
            )
            continue
        text = item["text"]
        if not isinstance(text, str):
            result.findings.append(
                ParsedFinding(
                    "invalid_field", "warn", path, None, f"{where}: `text` is not a string"
                )
            )
        request_body = bodies.decode_body(_as_body(text), None, limits)
        response_body = (
            bodies.decode_body(_as_body(item["response"]), None, limits)
            if item.get("response") is not None
            else EMPTY_BODY
        )
        result.findings += body_findings(path, None, where, response_body)
        recording.interactions.append(
            ParsedInteraction(
                index=index,
                method=None,
                url=None,
                request_body=request_body,
                response_body=response_body,
                recorded_at=as_text_or_none(item.get("recorded_at")),
                extra={key: value for key, value in item.items() if key not in _KNOWN},
            )
        )
        recording.model = recording.model or as_text_or_none(item.get("model"))
        recording.recorded_at = recording.recorded_at or as_text_or_none(item.get("recorded_at"))
    result.recordings.append(recording)


def _as_body(value: Any) -> Any:
    if isinstance(value, str | dict | list):
        return value
    return json.dumps(value)
