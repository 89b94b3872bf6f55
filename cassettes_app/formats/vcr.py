"""VCR.py cassettes (YAML or JSON, optionally gzipped), incl. old layouts and Betamax/Ruby VCR."""

from __future__ import annotations

import re
from itertools import chain
from typing import Any

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    finding_from_error,
    run_parser,
    set_models,
)
from cassettes_app.formats.sniff import LIKELY, NO, SURE, head_text, json_doc_keys
from cassettes_app.headers import header_pairs, scalar_text
from cassettes_app.limits import DEFAULT_LIMITS, PARSE_ERRORS, ParseLimits
from cassettes_app.parsed import (
    Body,
    ParsedFinding,
    ParsedInteraction,
    ParsedRecording,
    ParseResult,
)

NAME = "vcr"

_YAML_KEYS = re.compile(
    r"^(?:interactions|http_interactions|requests|responses|recorded_with)\s*:|^-\s+request\s*:",
    re.MULTILINE,
)
_URI_PARTS = ("protocol", "host", "port", "path")


def sniff(path: str, head: bytes) -> float:
    """JSON with `interactions`/`http_interactions`/split lists, or YAML with those keys."""
    if head.startswith(bodies.GZIP_MAGIC):
        head = bodies.peek_gzip(head)
    text = head_text(head)
    kind, keys = json_doc_keys(path, head)
    if kind == "object":
        if keys & {"interactions", "http_interactions"}:
            return SURE
        return LIKELY if {"requests", "responses"} <= keys else NO
    if kind == "array":
        return LIKELY if {"request", "response"} <= keys else NO
    if kind is not None:
        return NO
    return LIKELY if _YAML_KEYS.search(text) else NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse a cassette into one recording with its interactions in order."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    meta: dict[str, Any] = {}
    if data.startswith(bodies.GZIP_MAGIC):
        data = bodies.gunzip_file(data, limits)
        meta["compressed"] = "gzip"
    first = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    from_yaml = first not in (b"{", b"[")
    meta["serialization"] = "yaml" if from_yaml else "json"
    doc = safeload.load_yaml(data, limits) if from_yaml else safeload.load_json(data, limits)

    raw = _interaction_list(doc, meta, result, path)
    if raw is None:
        return
    recording = ParsedRecording(path=path, format=NAME, meta=meta)
    for index, item in enumerate(raw):
        where = f"interaction {index}"
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            result.findings.append(
                ParsedFinding(
                    "invalid_structure", "warn", path, None, f"{where}: no request mapping"
                )
            )
            continue
        try:
            interaction = _interaction(index, item, limits, result, path, from_yaml)
        except PARSE_ERRORS as exc:
            finding = finding_from_error(path, exc, severity="warn")
            result.findings.append(
                ParsedFinding(
                    finding.kind,
                    finding.severity,
                    path,
                    finding.line,
                    f"{where}: {finding.message}",
                )
            )
            continue
        recording.interactions.append(interaction)
        if recording.recorded_at is None:
            # Only a recorded field counts: VCR.py has none, and file times are not evidence.
            recording.recorded_at = interaction.recorded_at
    set_models(recording)
    result.recordings.append(recording)


def _interaction_list(
    doc: Any, meta: dict[str, Any], result: ParseResult, path: str
) -> list[Any] | None:
    """Find the interactions in whichever layout the cassette uses."""
    if isinstance(doc, list):
        meta["layout"] = "list"
        return doc
    if not isinstance(doc, dict):
        result.findings.append(
            ParsedFinding(
                "invalid_structure", "error", path, None, "cassette is not a mapping or list"
            )
        )
        return None
    for key in ("version", "recorded_with"):
        if key in doc:
            meta[key] = scalar_text(doc[key])
    for key in ("interactions", "http_interactions"):
        if key in doc:
            meta["layout"] = key
            if not isinstance(doc[key], list):
                result.findings.append(
                    ParsedFinding("invalid_structure", "error", path, None, f"{key} must be a list")
                )
                return None
            return doc[key]
    requests, responses = doc.get("requests"), doc.get("responses")
    if isinstance(requests, list) and isinstance(responses, list):
        meta["layout"] = "split"
        if len(requests) != len(responses):
            result.findings.append(
                ParsedFinding(
                    "invalid_structure",
                    "warn",
                    path,
                    None,
                    f"{len(requests)} requests but {len(responses)} responses; "
                    "unpaired ones dropped",
                )
            )
        return [{"request": q, "response": r} for q, r in zip(requests, responses, strict=False)]
    result.findings.append(
        ParsedFinding("invalid_structure", "error", path, None, "cassette has no interactions list")
    )
    return None


def _interaction(
    index: int,
    item: dict[str, Any],
    limits: ParseLimits,
    result: ParseResult,
    path: str,
    from_yaml: bool,
) -> ParsedInteraction:
    request = item["request"]
    response = safeload.object_at(item, "response")
    request_headers, coerced = _header_pairs(request.get("headers"))
    response_headers, coerced_response = _header_pairs(response.get("headers"))
    if from_yaml:
        for side, names, pairs in (
            ("request", coerced, request_headers),
            ("response", coerced_response, response_headers),
        ):
            for name in dict.fromkeys(names):
                value = next((v for k, v in pairs if k == name), "")
                result.findings.append(
                    ParsedFinding(
                        "yaml_coerced",
                        "warn",
                        path,
                        None,
                        f"interaction {index}: {side} header {name} is an unquoted YAML 1.1 "
                        f"scalar, read as {value!r}; the recorded text may differ",
                    )
                )
    request_body = _body(request.get("body"), request_headers, limits)
    raw_response_body = response.get("body", response.get("content"))
    response_body = _body(raw_response_body, response_headers, limits)
    result.findings += body_findings(path, None, f"interaction {index} request", request_body)
    result.findings += body_findings(path, None, f"interaction {index} response", response_body)

    status = as_status(response.get("status"))
    if status is None:
        status = as_status(response.get("status_code", response.get("code")))
    if status is None:
        # A cut-off cassette stays valid YAML: what is missing is the response's end.
        where = "no response" if not response else "a response without a status"
        result.findings.append(
            ParsedFinding(
                "missing_field",
                "warn",
                path,
                None,
                f"interaction {index} has {where} (the cassette may be cut off here)",
            )
        )
    extra: dict[str, Any] = {}
    if isinstance(response.get("status"), dict) and response["status"].get("message") is not None:
        extra["status_message"] = scalar_text(response["status"]["message"])
    for key in ("http_version", "url"):
        if response.get(key) is not None:
            extra[f"response_{key}"] = scalar_text(response[key])
    method = as_text_or_none(request.get("method"))
    return ParsedInteraction(
        index=index,
        method=method.upper() if method else None,
        url=_uri(request),
        request_headers=request_headers,
        request_body=request_body,
        status=status,
        response_headers=response_headers,
        response_body=response_body,
        recorded_at=as_text_or_none(item.get("recorded_at")),
        extra=extra,
    )


def _header_pairs(raw: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """`header_pairs`, done in comprehensions for the layout VCR.py writes (name: [values]).

    Headers are most of a cassette's scalars; the general function costs a call or three
    per value. Any other shape, or a value YAML read as other than a string, goes to it.
    """
    if type(raw) is dict and set(map(type, raw.values())) <= {list}:
        pairs = [(name, value) for name, values in raw.items() for value in values]
        if set(map(type, chain.from_iterable(pairs))) <= {str}:
            return pairs, []
    return header_pairs(raw)


def _uri(request: dict[str, Any]) -> str | None:
    """The request URI, rebuilt from pre-1.0 protocol/host/port/path parts if need be."""
    uri = as_text_or_none(request.get("uri") or request.get("url"))
    if uri or not all(part in request for part in _URI_PARTS):
        return uri
    scheme, host, port, path = (scalar_text(request[part]) for part in _URI_PARTS)
    default = {"https": "443", "http": "80"}.get(scheme)
    return f"{scheme}://{host}{'' if port == default else ':' + port}{path}"


def _body(raw: Any, headers: list[tuple[str, str]], limits: ParseLimits) -> Body:
    """Decode a body in any of the layouts cassettes use."""
    if isinstance(raw, dict):
        if "base64_string" in raw:
            return bodies.decode_body(raw["base64_string"], headers, limits, base64_encoded=True)
        if "string" in raw:
            raw = raw["string"]
    elif isinstance(raw, list) and all(isinstance(chunk, bytes | str) for chunk in raw):
        # An iterator body from an old cassette: its chunks, joined.
        raw = b"".join(c if isinstance(c, bytes) else c.encode("utf-8") for c in raw)
    if isinstance(raw, bool | int | float):
        raw = scalar_text(raw)
    return bodies.decode_body(raw, headers, limits)
