"""HTTP captures: a JSON object (or a list of them) holding one `request` and one `response`,
each an HTTP message of its own (method, URL, headers, body; status, headers, body).

The cassette task's files hold `request`/`response` too, but there they are the model's
payloads themselves; this reader takes the file when the inner shape is an HTTP message
(a URL and a method on the request), so a capture keeps its URL, status and turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlunsplit

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    run_parser,
    set_models,
)
from cassettes_app.formats.sniff import LIKELY, MAYBE, NO, SURE, head_document, json_doc_keys
from cassettes_app.headers import header_pairs
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedInteraction, ParsedRecording, ParseResult

NAME = "http_exchange"

_URL_KEYS = ("url", "uri", "href", "endpoint")
_BODY_KEYS = ("body", "content", "json", "data", "text", "payload")
_STATUS_KEYS = ("status", "status_code", "statusCode", "code")


def is_http_request(value: Any) -> bool:
    """An object that reads like an HTTP request: a URL (or host and path) and a method."""
    if not isinstance(value, Mapping):
        return False
    has_url = any(isinstance(value.get(k), str) for k in _URL_KEYS) or {"host", "path"} <= set(
        value
    )
    return has_url and ("method" in value or "headers" in value)


def _pairs(doc: Any) -> list[Any] | None:
    if isinstance(doc, Mapping):
        return [doc]
    if isinstance(doc, list) and doc and all(isinstance(x, Mapping) for x in doc):
        return doc
    return None


def sniff(path: str, head: bytes) -> float:
    """A request/response object (or list) whose request is an HTTP message."""
    kind, keys = json_doc_keys(path, head)
    if kind not in ("object", "array") or not {"request", "response"} <= keys:
        return NO
    doc = head_document(head)
    if doc is None:  # a head cut short: the inner shape is not in view
        return LIKELY - 0.1 if kind == "object" else NO
    items = _pairs(doc)
    if not items or not is_http_request(items[0].get("request")):
        return NO
    # A list of pairs is also an old VCR layout, which the VCR reader knows better.
    return SURE if kind == "object" else MAYBE


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per request/response pair."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    items = _pairs(safeload.load_json(data, limits))
    if items is None:
        result.findings.append(
            ParsedFinding(
                "invalid_structure",
                "error",
                path,
                None,
                "an HTTP capture must be an object (or a list of objects) with request and "
                "response",
            )
        )
        return
    recording = ParsedRecording(path=path, format=NAME, meta={"entries": len(items)})
    ascii_values = bodies.ascii_json(data)
    for index, item in enumerate(items):
        request, response = item.get("request"), item.get("response")
        if not isinstance(request, Mapping):
            result.findings.append(
                ParsedFinding(
                    "invalid_structure",
                    "warn",
                    path,
                    None,
                    f"entry {index}: request is not an object; skipped",
                )
            )
            continue
        response = response if isinstance(response, Mapping) else {}
        request_headers, _ = header_pairs(request.get("headers"))
        response_headers, _ = header_pairs(response.get("headers"))
        request_body = bodies.decode_body(
            _body(request), request_headers, limits, ascii_values=ascii_values
        )
        response_body = bodies.decode_body(
            _body(response), response_headers, limits, ascii_values=ascii_values
        )
        result.findings += body_findings(path, None, f"entry {index} request", request_body)
        result.findings += body_findings(path, None, f"entry {index} response", response_body)
        status = next(
            (as_status(response[k]) for k in _STATUS_KEYS if response.get(k) is not None), None
        )
        if status is None and not response:
            result.findings.append(
                ParsedFinding(
                    "missing_field",
                    "warn",
                    path,
                    None,
                    f"entry {index}: no response recorded",
                )
            )
        method = as_text_or_none(request.get("method"))
        recorded_at = next(
            (
                as_text_or_none(item[k])
                for k in ("recorded_at", "timestamp", "time", "startedDateTime")
                if isinstance(item.get(k), str)
            ),
            None,
        )
        recording.interactions.append(
            ParsedInteraction(
                index=index,
                method=method.upper() if method else None,
                url=_url(request),
                request_headers=request_headers,
                request_body=request_body,
                status=status,
                response_headers=response_headers,
                response_body=response_body,
                recorded_at=recorded_at,
            )
        )
        recording.recorded_at = recording.recorded_at or recorded_at
    set_models(recording)
    result.recordings.append(recording)


def _url(request: Mapping[str, Any]) -> str | None:
    for key in _URL_KEYS:
        if isinstance(request.get(key), str):
            return request[key]
    host, path = request.get("host"), request.get("path")
    if isinstance(host, str) and isinstance(path, str):
        scheme = request.get("scheme") or request.get("protocol") or "https"
        return urlunsplit((str(scheme).rstrip(":"), host, path, "", ""))
    return None


def _body(message: Mapping[str, Any]) -> Any:
    for key in _BODY_KEYS:
        if key in message and message[key] is not None:
            value = message[key]
            if isinstance(value, Mapping) and isinstance(value.get("text"), str):
                return value["text"]  # {"body": {"text": ...}} (HAR-like postData)
            if value is None or isinstance(value, str | dict | list):
                return value
            return str(value)
    return None
