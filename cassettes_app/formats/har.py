"""HAR 1.2 files, including Polly.js recordings (`_id`, `_order`, `_recordingName`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    finding_from_error,
    run_parser,
    set_models,
)
from cassettes_app.formats.sniff import MAYBE, NO, SURE, json_doc_keys
from cassettes_app.headers import get_header, header_pairs, scalar_text
from cassettes_app.limits import DEFAULT_LIMITS, PARSE_ERRORS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedInteraction, ParsedRecording, ParseResult

NAME = "har"


def sniff(path: str, head: bytes) -> float:
    """A JSON object with a top-level `log` (sure), or any JSON object named .har."""
    kind, keys = json_doc_keys(path, head)
    if kind != "object":
        return NO
    if "log" in keys:
        return SURE
    return MAYBE if path.lower().endswith(".har") else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse a HAR file into one recording, one interaction per entry."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    doc = safeload.load_json(data, limits)
    log = doc.get("log") if isinstance(doc, dict) else None
    if not isinstance(log, dict):
        result.findings.append(
            ParsedFinding("invalid_har", "error", path, None, "invalid HAR: log must be an object")
        )
        return
    entries = log.get("entries")
    if not isinstance(entries, list):
        result.findings.append(
            ParsedFinding("invalid_har", "error", path, None, "invalid HAR: entries must be a list")
        )
        return
    meta: dict[str, Any] = {"entries": len(entries)}
    for key in ("version", "creator", "browser", "comment"):
        if key in log:
            meta[key] = log[key]
    meta.update({key: value for key, value in log.items() if key.startswith("_")})
    if "_recordingName" in log:
        meta["recording_name"] = scalar_text(log["_recordingName"])
    recording = ParsedRecording(path=path, format=NAME, meta=meta)
    for index, entry in enumerate(entries):
        try:
            interaction = _interaction(index, entry, limits, result, path)
        except PARSE_ERRORS as exc:
            finding = finding_from_error(path, exc, severity="warn")
            result.findings.append(
                ParsedFinding(finding.kind, "warn", path, None, f"entry {index}: {finding.message}")
            )
            continue
        if interaction is None:
            continue
        recording.interactions.append(interaction)
        recording.recorded_at = recording.recorded_at or interaction.recorded_at
    set_models(recording)
    result.recordings.append(recording)


def _interaction(
    index: int, entry: Any, limits: ParseLimits, result: ParseResult, path: str
) -> ParsedInteraction | None:
    request = entry.get("request") if isinstance(entry, dict) else None
    if not isinstance(request, dict):
        result.findings.append(
            ParsedFinding(
                "invalid_har", "warn", path, None, f"entry {index}: request must be an object"
            )
        )
        return None
    response = safeload.object_at(entry, "response")
    request_headers, _ = header_pairs(request.get("headers"))
    response_headers, _ = header_pairs(response.get("headers"))

    post = safeload.object_at(request, "postData")
    raw_request = post.get("text")
    if raw_request is None and isinstance(post.get("params"), list):
        raw_request = urlencode(
            [(scalar_text(p.get("name")), scalar_text(p.get("value"))) for p in post["params"]]
        )
    if post.get("mimeType") and get_header(request_headers, "content-type") is None:
        request_headers = [*request_headers, ("content-type", scalar_text(post["mimeType"]))]

    content = safeload.object_at(response, "content")
    body_headers = response_headers
    if content.get("mimeType") and get_header(response_headers, "content-type") is None:
        body_headers = [*response_headers, ("content-type", scalar_text(content["mimeType"]))]
    # HAR stores bodies already decoded, even when Content-Encoding says gzip.
    request_body = bodies.decode_body(
        _text(raw_request), request_headers, limits, apply_content_encoding=False
    )
    response_body = bodies.decode_body(
        _text(content.get("text")),
        body_headers,
        limits,
        base64_encoded=content.get("encoding") == "base64",
        apply_content_encoding=False,
    )
    result.findings += body_findings(path, None, f"entry {index} request", request_body)
    result.findings += body_findings(path, None, f"entry {index} response", response_body)

    extra: dict[str, Any] = {key: value for key, value in entry.items() if key.startswith("_")}
    for key in ("statusText", "httpVersion"):
        if response.get(key):
            extra[key] = scalar_text(response[key])
    status = as_status(response.get("status"))
    duration = entry.get("time")
    method = as_text_or_none(request.get("method"))
    return ParsedInteraction(
        index=index,
        method=method.upper() if method else None,
        url=as_text_or_none(request.get("url")),
        request_headers=request_headers,
        request_body=request_body,
        # HAR writes 0 for "no response received".
        status=status or None,
        response_headers=response_headers,
        response_body=response_body,
        recorded_at=as_text_or_none(entry.get("startedDateTime")),
        duration_ms=float(duration)
        if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0
        else None,
        extra=extra,
    )


def _text(value: Any) -> str | None:
    return None if value is None else scalar_text(value)
