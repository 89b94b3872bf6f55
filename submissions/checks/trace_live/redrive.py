"""`trace.live_match` by re-driving: the trace's stub hops re-sent in order to a freshly
started stub, each with its original Idempotency-Key and body, and the answers compared
with the file, statuses and bodies with volatile values (order ids, trace ids, timestamps,
uuids) masked.

`redrive_requests` gives the requests; the sandbox's driver (`sandbox/runtime/
redrive_driver.py`) starts the stub and sends them, under the give-up rule (`GIVE_UP_AFTER`
requests in a row without an answer) and the time budget (`REDRIVE_BUDGET_SECONDS`), which
travel in its spec; `answers_from_driver` and `trace_live_match_from_redrive` judge what it
saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.catalog import LIVE_MATCH
from cassettes_app.config import DEFAULT_ID_PATTERN
from cassettes_app.headers import get_header
from cassettes_app.hops import stub_hops
from cassettes_app.jsonvalues import json_equal
from cassettes_app.parsed import TraceHop
from submissions.checks.trace_live.rows import (
    RowResult,
    join_url,
    loaded,
    preview,
    rows_outcome,
    rows_verdict,
)
from submissions.net.outbound import SafeResponse

CHECK_LIVE = LIVE_MATCH
# Seconds a re-drive may spend sending; the rows left after it are not sent.
REDRIVE_BUDGET_SECONDS = 120.0

_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_TRACE_ID = re.compile(r"\btr_[A-Za-z0-9_.:-]+")
VOLATILE_KEYS = frozenset(
    {"created", "created_at", "updated_at", "timestamp", "ts", "time", "date", "request_id"}
)


def mask_volatile(value: Any, id_pattern: re.Pattern[str], trace_ids: Iterable[str] = ()) -> Any:
    """Replace order ids, trace ids, timestamps and uuids by placeholders, recursively."""
    known = sorted({t for t in trace_ids if t}, key=len, reverse=True)

    def text(s: str) -> str:
        for tid in known:
            s = s.replace(tid, "<trace_id>")
        s = _UUID.sub("<uuid>", s)
        s = _TIMESTAMP.sub("<timestamp>", s)
        s = _TRACE_ID.sub("<trace_id>", s)
        return id_pattern.sub("<order_id>", s)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            return {
                k: ("<volatile>" if k in VOLATILE_KEYS and v[k] is not None else walk(v[k]))
                for k in v
            }
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


# Headers of a recorded hop worth re-sending; everything else (Authorization, cookies, ...)
# stays out, so a re-drive never forwards a secret the trace happened to hold.
_RESEND_HEADERS = ("content-type", "accept")


def _redrive_request(hop: TraceHop, base_url: str) -> tuple[str, str, dict[str, str], bytes | None]:
    """Method, URL, headers and body to re-send one hop (original key and body)."""
    parts = urlsplit(hop.url or "")
    path = parts.path or "/"
    url = join_url(base_url, path if path.startswith("/") else "/" + path, parts.query)
    headers: dict[str, str] = {}
    for name in _RESEND_HEADERS:
        value = get_header(hop.request_headers, name)
        if value:
            headers[name.title()] = value
    if hop.idempotency_key:
        headers["Idempotency-Key"] = hop.idempotency_key
    if hop.trace_id:
        headers["X-Trace-Id"] = hop.trace_id
    body: bytes | None
    if hop.req is None:
        body = None
    elif isinstance(hop.req, str):
        body = hop.req.encode("utf-8")
    else:
        body = json.dumps(hop.req, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers.setdefault("Content-Type", "application/json")
    return (hop.method or "GET").upper(), url, headers, body


def redrive_requests(hops: list[TraceHop], base_url: str, *, max_rows: int = 500) -> list[dict]:
    """The stub hops to re-send, in order, as plain requests (for a driver inside a sandbox)."""
    out = []
    for hop in stub_hops(hops)[: max(0, max_rows)]:
        method, url, headers, body = _redrive_request(hop, base_url)
        out.append(
            {
                "line": hop.line,
                "method": method,
                "url": url,
                "headers": headers,
                "body": body.decode("utf-8", "replace") if body is not None else None,
            }
        )
    return out


def _nothing_to_redrive() -> CheckOutcome:
    reason = "the trace has no stub hop to re-drive"
    return CheckOutcome(CHECK_LIVE, "skip", reason, [{"message": reason, "mode": "redrive"}])


def answers_from_driver(raw: list[dict[str, Any]], base_url: str) -> list[SafeResponse | str]:
    """The re-drive driver's answers as responses, or the error for a request not answered."""
    answers: list[SafeResponse | str] = []
    for answer in raw:
        if "error" in answer:
            answers.append(str(answer["error"]))
        else:
            answers.append(
                SafeResponse(
                    url=base_url,
                    status=int(answer["status"]),
                    headers=[tuple(h) for h in answer["headers"]],
                    body=answer["body"].encode("utf-8"),
                    truncated=bool(answer["truncated"]),
                )
            )
    return answers


def trace_live_match_from_redrive(
    hops: list[TraceHop],
    answers: list[SafeResponse | str],
    *,
    base_url: str,
    path: str = "replay.jsonl",
    id_pattern: str = DEFAULT_ID_PATTERN,
    max_rows: int = 500,
) -> tuple[CheckOutcome, list[RowResult]]:
    """`trace.live_match` (re-drive) from answers gathered elsewhere: a response or an error."""
    pattern = re.compile(id_pattern)
    selected = stub_hops(hops)[: max(0, max_rows)]
    if not selected:
        return _nothing_to_redrive(), []
    trace_ids = [h.trace_id for h in hops if h.trace_id]
    rows = []
    for hop, answer in zip(selected, answers, strict=False):
        if isinstance(answer, str):
            rows.append(RowResult(hop.line, hop.trace_id, "unreachable", error=answer))
        else:
            rows.append(_compare_redrive(hop, answer, pattern, trace_ids))
    for hop in selected[len(answers) :]:
        rows.append(RowResult(hop.line, hop.trace_id, "unreachable", error="not sent"))
    return _redrive_outcome(rows, base_url, path), rows


def _redrive_outcome(rows: list[RowResult], base_url: str, path: str) -> CheckOutcome:
    """The check from re-driven rows."""
    status, summary = rows_verdict(rows, "re-driven hops", "the fresh stub")
    summary = "re-drive: " + summary
    return rows_outcome(status, summary, rows, path, mode="redrive", base_url=base_url)


def _compare_redrive(
    hop: TraceHop, response: SafeResponse, pattern: re.Pattern[str], trace_ids: list[str]
) -> RowResult:
    """Compare one re-driven answer with the recorded one, volatile values masked."""
    if response.truncated:
        return RowResult(
            hop.line,
            hop.trace_id,
            "unreachable",
            error=f"answer larger than {len(response.body)} bytes; not compared",
        )
    diffs: list[dict[str, Any]] = []
    if hop.status is not None and response.status != hop.status:
        diffs.append({"field": "status", "file": hop.status, "live": response.status})
    file_resp = mask_volatile(loaded(hop.resp), pattern, trace_ids)
    live_resp = mask_volatile(loaded(response.text), pattern, trace_ids)
    if hop.resp is not None and not json_equal(file_resp, live_resp):
        diffs.append({"field": "resp", "file": preview(file_resp), "live": preview(live_resp)})
    return RowResult(hop.line, hop.trace_id, "mismatch" if diffs else "match", diffs)
