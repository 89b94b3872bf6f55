"""Small helpers the recording parsers share: running one under the size cap, JSON Lines
objects, findings, field coercion and naming a recording's model.

The parsed types themselves live in cassettes_app/parsed.py, the sniffing in sniff.py.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.headers import scalar_text
from cassettes_app.limits import (
    PARSE_ERRORS,
    ParseLimits,
    error_line,
    error_message,
)
from cassettes_app.parsed import (
    Body,
    ParsedFinding,
    ParsedRecording,
    ParseResult,
    Severity,
)


def finding_from_error(
    path: str,
    exc: BaseException,
    *,
    kind: str = "parse_error",
    severity: Severity = "error",
    line: int | None = None,
) -> ParsedFinding:
    """Turn a caught parser error into a finding."""
    return ParsedFinding(kind, severity, path, line or error_line(exc), error_message(exc))


def run_parser(
    name: str,
    path: str,
    data: bytes,
    limits: ParseLimits,
    fill: Callable[[ParseResult], None],
) -> ParseResult:
    """Run one format's body under the file-size cap, turning load errors into findings."""
    result = ParseResult(name)
    if len(data) > limits.max_file_bytes:
        result.findings.append(
            ParsedFinding(
                "file_too_large",
                "error",
                path,
                None,
                f"file is {len(data)} bytes, over max_file_bytes ({limits.max_file_bytes}); "
                "not parsed",
            )
        )
        return result
    try:
        fill(result)
    except PARSE_ERRORS as exc:
        result.findings.append(finding_from_error(path, exc))
    return result


def jsonl_objects(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The object lines of a JSON Lines file; a bad or non-object line becomes a finding."""
    for line, obj, error in safeload.iter_jsonl(data, limits):
        if error is not None:
            result.findings.append(ParsedFinding("bad_line", "warn", path, line, error))
        elif not isinstance(obj, dict):
            result.findings.append(
                ParsedFinding("bad_line", "warn", path, line, "line is not a JSON object")
            )
        else:
            yield line, obj


def body_findings(path: str, line: int | None, where: str, body: Body) -> list[ParsedFinding]:
    """Findings for the problems met while decoding one body."""
    return [
        ParsedFinding("body_problem", "warn", path, line, f"{where}: {problem}")
        for problem in body.problems
    ]


def as_text_or_none(value: Any) -> str | None:
    """Return a string for a scalar field, None for missing or structured values."""
    if value is None or isinstance(value, dict | list):
        return None
    return scalar_text(value)


def as_status(value: Any) -> int | None:
    """Coerce an HTTP status (int, digit string or {code}) to int."""
    if isinstance(value, Mapping):
        value = value.get("code")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 3:
        return int(value.strip())
    return None


_GEMINI_MODEL = re.compile(r"/models/([A-Za-z0-9._-]+)(?::|$|\?)")


# Bedrock runtime: /model/<model id, URL-encoded>/invoke, converse, ...-stream.
_BEDROCK_MODEL = re.compile(
    r"/model/([^/?#]+)/(?:invoke|converse|invoke-with-response-stream|converse-stream)\b"
)


def guess_model(url: str | None, *payloads: Any) -> str | None:
    """Find the model named by a request/response payload, else in a Gemini-style URL."""
    for payload in payloads:
        if isinstance(payload, Mapping):
            for key in ("model", "modelVersion"):
                value = payload.get(key)
                if isinstance(value, str) and value:
                    return value
    if url:
        match = _GEMINI_MODEL.search(url)
        if match:
            return match.group(1)
        match = _BEDROCK_MODEL.search(url)
        if match:
            return urllib.parse.unquote(match.group(1))
    return None


def tally_finding(path: str, label: str, counts: Mapping[str, int]) -> ParsedFinding:
    """One info finding naming what a reader counted but did not read (most first, eight)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
    shown = ", ".join(f"{kind} ×{n}" for kind, n in ranked)
    return ParsedFinding("bad_line", "info", path, None, f"{label}: {shown}")


def close_recording(result: ParseResult, recording: ParsedRecording) -> None:
    """Name the recording's model and time from its interactions, and keep it."""
    set_models(recording)
    recording.recorded_at = recording.recorded_at or next(
        (i.recorded_at for i in recording.interactions if i.recorded_at), None
    )
    result.recordings.append(recording)


def set_models(recording: ParsedRecording) -> None:
    """Name the recording's model: the served one (response) first, then the requested one."""
    models: list[str] = []
    for interaction in recording.interactions:
        for payload in (interaction.response_body.json, interaction.request_body.json, None):
            model = guess_model(interaction.url if payload is None else None, payload)
            if model and model not in models:
                models.append(model)
    recording.model = models[0] if models else None
    if len(models) > 1:
        recording.meta["models"] = models
