"""Node's nock recordings (`nock.recorder`, `nock.back`): a JSON array of scope objects.

Each object is one HTTP exchange: `scope` (the origin), `method`, `path`, the request
`body` (text or JSON), `reqheaders`, `status`, the `response` (text, JSON, or hex when
`responseIsBinary`; older nock wrote gzip'd bodies as an array of hex chunks) and
`rawHeaders` (a flat [name, value, ...] list, or an object).
"""

from __future__ import annotations

import binascii
from typing import Any

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    run_parser,
    set_models,
)
from cassettes_app.formats.sniff import NO, SURE, json_doc_keys
from cassettes_app.headers import header_pairs
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedInteraction, ParsedRecording, ParseResult

NAME = "nock"


def sniff(path: str, head: bytes) -> float:
    """A JSON array whose first object has nock's `scope` and `method` (and a status)."""
    kind, keys = json_doc_keys(path, head)
    ok = kind == "array" and {"scope", "method"} <= keys and bool(keys & {"status", "response"})
    return SURE if ok else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per scope object (a broken one is a finding)."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    doc = safeload.load_json(data, limits)
    if not isinstance(doc, list):
        result.findings.append(
            ParsedFinding("invalid_structure", "error", path, None, "nock file must be a list")
        )
        return
    recording = ParsedRecording(path=path, format=NAME, meta={"entries": len(doc)})
    for index, entry in enumerate(doc):
        if not isinstance(entry, dict) or not isinstance(entry.get("scope"), str):
            result.findings.append(
                ParsedFinding(
                    "invalid_structure", "warn", path, None, f"entry {index}: no scope; skipped"
                )
            )
            continue
        recording.interactions.append(_interaction(index, entry, limits, result, path))
    set_models(recording)
    result.recordings.append(recording)


def _raw_headers(raw: Any) -> list[tuple[str, str]]:
    if isinstance(raw, list):  # [name, value, name, value, ...]
        pairs = [(raw[i], raw[i + 1]) for i in range(0, len(raw) - 1, 2)]
        return [(str(k).lower(), str(v)) for k, v in pairs if isinstance(k, str)]
    return header_pairs(raw)[0]


def _response(entry: dict[str, Any], path: str, index: int, result: ParseResult) -> Any:
    """The response body as recorded: bytes for hex (binary, or gzip'd chunks), else as is."""
    response = entry.get("response")
    chunks = response if isinstance(response, list) else None
    hexed = entry.get("responseIsBinary") and isinstance(response, str)
    if hexed or (chunks and all(isinstance(c, str) for c in chunks) and _all_hex(chunks)):
        hex_text = "".join(chunks) if chunks else response
        assert isinstance(hex_text, str)  # no chunks: `hexed`, so the response is a string
        try:
            return binascii.unhexlify(hex_text)
        except (binascii.Error, ValueError):
            result.findings.append(
                ParsedFinding("body_problem", "warn", path, None, f"entry {index}: bad hex body")
            )
            return None
    return response


def _all_hex(chunks: list[str]) -> bool:
    return all(len(c) % 2 == 0 and all(ch in "0123456789abcdefABCDEF" for ch in c) for c in chunks)


def _interaction(
    index: int, entry: dict[str, Any], limits: ParseLimits, result: ParseResult, path: str
) -> ParsedInteraction:
    scope = entry["scope"].rstrip("/")
    method = as_text_or_none(entry.get("method"))
    request_headers = header_pairs(entry.get("reqheaders"))[0]
    response_headers = _raw_headers(entry.get("rawHeaders") or entry.get("headers"))
    request_body = bodies.decode_body(entry.get("body") or None, request_headers, limits)
    raw = _response(entry, path, index, result)
    # Bytes are the wire bytes (gzip'd when Content-Encoding says so); text and JSON are
    # what nock decoded.
    response_body = bodies.decode_body(
        raw, response_headers, limits, apply_content_encoding=isinstance(raw, bytes)
    )
    result.findings += body_findings(path, None, f"entry {index} request", request_body)
    result.findings += body_findings(path, None, f"entry {index} response", response_body)
    return ParsedInteraction(
        index=index,
        method=method.upper() if method else None,
        url=scope + str(entry.get("path") or ""),
        request_headers=request_headers,
        request_body=request_body,
        status=as_status(entry.get("status")),
        response_headers=response_headers,
        response_body=response_body,
    )
