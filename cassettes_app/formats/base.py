"""Small helpers the recording parsers share: running one under the size cap, JSON Lines
objects, findings, field coercion and naming a recording's model.

The parsed types themselves live in cassettes_app/parsed.py, the sniffing in sniff.py.
"""

from __future__ import annotations

import datetime as dt
import email.utils
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
    ParsedInteraction,
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


# Where a recording keeps the exchange's payload around its model: the payload itself, or
# an HTTP message's body under one of these names (a JSON text body is read too).
_WRAPPERS = ("body", "json", "data", "payload", "content")
_MODEL_KEYS = ("model", "modelVersion", "model_id", "modelId")


def find_model(payload: Any, depth: int = 2) -> tuple[str, str] | None:
    """(model, where) from a payload at any of the usual nestings: its own `model` (or
    `modelVersion`...), else inside a `body`/`json`/`data`/`payload`/`content` wrapper
    (`body.model`), two levels deep at most."""
    if isinstance(payload, str) and depth < 2 and payload.lstrip()[:1] == "{":
        try:
            payload = safeload.load_json(payload.encode("utf-8"))
        except (safeload.LoadError, ValueError, RecursionError):
            return None
    if not isinstance(payload, Mapping):
        return None
    for key in _MODEL_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value, key
    if depth > 0:
        for wrapper in _WRAPPERS:
            found = find_model(payload.get(wrapper), depth - 1)
            if found:
                return found[0], f"{wrapper}.{found[1]}"
    return None


def guess_model(url: str | None, *payloads: Any) -> str | None:
    """Find the model named by a request/response payload, else in a Gemini-style URL."""
    found = model_and_source(url, *payloads)
    return found[0] if found else None


def model_and_source(url: str | None, *payloads: Any) -> tuple[str, str] | None:
    """(model, where): the first payload naming one (`payload 0`'s `body.model`), else the
    model in a Gemini- or Bedrock-style URL."""
    for index, payload in enumerate(payloads):
        found = find_model(payload)
        if found:
            return found[0], f"payload {index} `{found[1]}`"
    if url:
        match = _GEMINI_MODEL.search(url)
        if match:
            return match.group(1), "the request URL"
        match = _BEDROCK_MODEL.search(url)
        if match:
            return urllib.parse.unquote(match.group(1)), "the request URL"
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


SERVED = "the response"
REQUESTED = "the request"


def set_models(recording: ParsedRecording) -> None:
    """Name the recording's model (the served one, from the response, first; then the
    requested one) and its recording time (`set_times`); `meta["model_source"]` says where
    the first was read."""
    models: list[str] = []
    source = None
    for interaction in recording.interactions:
        sides = (
            (SERVED, interaction.response_body.json),
            (REQUESTED, interaction.request_body.json),
        )
        for side, payload in (*sides, ("url", None)):
            if side == "url":
                found = model_and_source(interaction.url)
                where = found[1] if found else ""
            else:
                inner = find_model(payload)
                found, where = inner, f"{side}'s `{inner[1]}`" if inner else ""
            if found and found[0] not in models:
                models.append(found[0])
                source = source or where
    recording.model = models[0] if models else None
    if source:
        recording.meta["model_source"] = source
    if len(models) > 1:
        recording.meta["models"] = models
    set_times(recording)


# --------------------------------------------------------------------------- times

DATE_HEADER = "the response Date header"
OWN_FIELD = "the recording's own time field"
_CREATED_KEYS = ("created", "created_at")


def _epoch_iso(value: Any) -> str | None:
    """Epoch seconds (a provider's `created`) as ISO text; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1e9 <= value < 1e11:
        return None
    stamp = dt.datetime.fromtimestamp(value, tz=dt.UTC)
    return stamp.isoformat().replace("+00:00", "Z")


def _date_header_iso(headers: list[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name.lower() == "date":
            try:
                stamp = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                continue
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=dt.UTC)
            return stamp.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return None


def interaction_time(interaction: ParsedInteraction) -> tuple[str, str] | None:
    """(time, source): the best evidence of when one exchange was recorded. The response's
    `Date` header (the server's clock at that moment), then the provider's `created` in the
    response body, then the format's own field (written by the recorder, or by hand)."""
    date = _date_header_iso(interaction.response_headers)
    if date:
        return date, DATE_HEADER
    body = interaction.response_body.json
    if isinstance(body, Mapping):
        for key in _CREATED_KEYS:
            created = _epoch_iso(body.get(key))
            if created:
                return created, f"the response body's `{key}`"
    if interaction.recorded_at:
        return interaction.recorded_at, OWN_FIELD
    return None


def set_times(recording: ParsedRecording) -> None:
    """The recording's time from its first timed exchange (`interaction_time`), with
    `meta["time_source"]` naming the evidence and `meta["times"]` every exchange's time."""
    found = [t for t in map(interaction_time, recording.interactions) if t is not None]
    if not found:
        return
    if found[0][1] != OWN_FIELD or not recording.recorded_at:
        recording.recorded_at = found[0][0]
    recording.meta["time_source"] = found[0][1]
    recording.meta["times"] = list(dict.fromkeys(t for t, _ in found))
