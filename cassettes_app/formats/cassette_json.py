"""The cassette task's `cassettes/<key>.json`: {key, request, response, recorded_at, model}."""

from __future__ import annotations

from typing import Any

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    guess_model,
    run_parser,
    set_models,
)
from cassettes_app.formats.exchange import is_http_request
from cassettes_app.formats.sniff import LIKELY, MAYBE, NO, SURE, head_document, json_doc_keys
from cassettes_app.headers import header_pairs
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedInteraction, ParsedRecording, ParseResult

NAME = "cassette_json"

FIELDS = ("key", "request", "response", "recorded_at", "model")
_OTHER_FORMATS = {"interactions", "http_interactions", "log"}


def sniff(path: str, head: bytes) -> float:
    """A JSON object whose top level holds `request` and `response` (or `key`): sure with
    the task's `key` or `recorded_at`; unlikely when the request is an HTTP message with
    its own URL and method (a capture, read by the exchange reader)."""
    kind, keys = json_doc_keys(path, head)
    if not (
        kind == "object"
        and "request" in keys
        and ("response" in keys or "key" in keys)
        and not keys & _OTHER_FORMATS
    ):
        return NO
    if keys & {"key", "recorded_at"}:
        return SURE
    doc = head_document(head)
    if isinstance(doc, dict) and is_http_request(doc.get("request")):
        return MAYBE
    return LIKELY


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse one cassette-task file into one recording with one interaction."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    doc = safeload.load_json(data, limits)
    if not isinstance(doc, dict):
        result.findings.append(
            ParsedFinding(
                "invalid_structure", "error", path, None, "cassette must be a JSON object"
            )
        )
        return
    missing = [name for name in FIELDS if name not in doc]
    if "model" in missing and guess_model(None, doc.get("response"), doc.get("request")):
        missing.remove("model")  # named where the exchange holds it (set_models below)
    if "key" in missing and "cache_key" in doc:
        missing.remove("key")  # a cache entry keyed its own way: not the cassette task's key
    if missing:
        result.findings.append(
            ParsedFinding(
                "missing_field", "warn", path, None, f"cassette lacks {', '.join(missing)}"
            )
        )
    for name in ("key", "recorded_at", "model"):
        if doc.get(name) is not None and not isinstance(doc[name], str):
            result.findings.append(
                ParsedFinding("invalid_field", "warn", path, None, f"{name} should be a string")
            )

    request_headers, _ = header_pairs(doc.get("request_headers"))
    response_headers, _ = header_pairs(doc.get("response_headers"))
    ascii_values = bodies.ascii_json(data)
    request_body = bodies.decode_body(
        _payload(doc.get("request")), request_headers, limits, ascii_values=ascii_values
    )
    response_body = bodies.decode_body(
        _payload(doc.get("response")), response_headers, limits, ascii_values=ascii_values
    )
    url = as_text_or_none(doc.get("url") or doc.get("endpoint"))
    interaction = ParsedInteraction(
        index=0,
        method=(as_text_or_none(doc.get("method")) or "POST").upper(),
        url=url,
        request_headers=request_headers,
        request_body=request_body,
        status=as_status(doc.get("status", doc.get("status_code"))),
        response_headers=response_headers,
        response_body=response_body,
        recorded_at=as_text_or_none(doc.get("recorded_at")),
    )
    result.findings += body_findings(path, None, "request", request_body)
    result.findings += body_findings(path, None, "response", response_body)
    meta: dict[str, Any] = {
        "payload_model": guess_model(url, response_body.json, request_body.json),
        "extra_fields": sorted(set(doc) - set(FIELDS)),
    }
    own_model = as_text_or_none(doc.get("model"))
    recording = ParsedRecording(
        path=path,
        format=NAME,
        key=as_text_or_none(doc.get("key")),
        recorded_at=as_text_or_none(doc.get("recorded_at")),
        interactions=[interaction],
        meta=meta,
    )
    # The file's own `model` and `recorded_at` first: the cassette brief asks for them, and
    # cassettes.model_metadata checks they were written. Without them, the model the
    # payloads name (the served one first) and the time the exchange holds (set_models).
    set_models(recording)
    if own_model:
        recording.model = own_model
        meta["model_source"] = "the file's `model` field"
    if recording.interactions[0].recorded_at:
        recording.recorded_at = recording.interactions[0].recorded_at
        meta["time_source"] = "the file's `recorded_at` field"
        meta.pop("times", None)
    result.recordings.append(recording)


def _payload(value: Any) -> Any:
    """Scalars other than str/dict/list are stored as their JSON text."""
    if value is None or isinstance(value, str | dict | list):
        return value
    return str(value)
