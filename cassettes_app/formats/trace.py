"""`replay.jsonl` traces: one JSON object per HTTP hop (url, method, status, req, resp, ...)."""

from __future__ import annotations

from typing import Any

from cassettes_app.formats.base import as_status, as_text_or_none, jsonl_objects, run_parser
from cassettes_app.formats.sniff import LIKELY, NO, SURE, is_trace_line, jsonl_head, jsonl_sample
from cassettes_app.headers import get_header, header_pairs
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParseResult, TraceHop

NAME = "trace"


def sniff(path: str, head: bytes) -> float:
    """JSON Lines of HTTP hops (`url` plus `method`, `trace_id`, `req` or `resp`): sure when
    most sampled lines are hops, likely when the first one is."""
    obj = jsonl_head(path, head)
    if obj is None or not is_trace_line(obj):
        return NO
    sample = jsonl_sample(head)
    hops = sum(is_trace_line(line) for line in sample)
    return SURE if sample and hops * 2 > len(sample) else LIKELY


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse every good line into a hop; each bad line is a finding with its number."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    for line, obj in jsonl_objects(result, path, data, limits):
        result.hops.append(_hop(line, obj, result, path))
    if not result.hops and not result.findings:
        result.findings.append(ParsedFinding("empty_file", "warn", path, None, "trace has no hops"))


def _hop(line: int, obj: dict[str, Any], result: ParseResult, path: str) -> TraceHop:
    raw_headers = obj.get("headers", obj.get("request_headers"))
    headers, _ = header_pairs(raw_headers)
    status = as_status(obj.get("status"))
    if obj.get("status") is not None and status is None:
        result.findings.append(
            ParsedFinding(
                "bad_line", "warn", path, line, f"status {obj['status']!r} is not an HTTP status"
            )
        )
    key = get_header(headers, "Idempotency-Key") or as_text_or_none(obj.get("idempotency_key"))
    method = as_text_or_none(obj.get("method"))
    return TraceHop(
        line=line,
        url=as_text_or_none(obj.get("url")),
        method=method.upper() if method else None,
        status=status,
        trace_id=as_text_or_none(obj.get("trace_id")),
        idempotency_key=key,
        request_headers=headers,
        req=obj.get("req", obj.get("request")),
        resp=obj.get("resp", obj.get("response")),
    )
