"""`trace.live_match` against a live stub: re-fetch every stub hop's `/_trace/{trace_id}` and
compare status, request body (JSON-semantic), Idempotency-Key and order ids with the file.

A plain function (no Django, no Celery; the allowlist comes in as an argument), all network
access through `submissions.net.outbound.SafeClient`. Row outcomes and the status table are
in `rows`; `error` also when the URL was refused by the outbound guard, `skip` when the trace
has no stub hop with a trace id.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.catalog import LIVE_MATCH
from cassettes_app.config import DEFAULT_ID_PATTERN
from cassettes_app.hops import stub_hops
from cassettes_app.jsonvalues import json_equal
from cassettes_app.parsed import TraceHop
from submissions.checks.trace_live.rows import (
    GIVE_UP_AFTER,
    RowResult,
    describe,
    ids_in,
    join_url,
    loaded,
    preview,
    rows_outcome,
    rows_verdict,
)
from submissions.net.outbound import (
    OutboundError,
    OutboundRefused,
    SafeClient,
)
from submissions.net.stub import stub_client

CHECK_LIVE = LIVE_MATCH


def _trace_url(stub_url: str, trace_id: str) -> str:
    """`{stub_url}/_trace/{trace_id}`; the id is fully percent-encoded (no path tricks)."""
    quoted = quote(trace_id, safe="")
    if set(trace_id) <= {"."}:
        # "." and ".." would be dot segments, which URL normalisation removes.
        quoted = trace_id.replace(".", "%2E")
    return join_url(stub_url, "/_trace/" + quoted)


class _Tally:
    """Thread-safe success/failure counts and a time budget: a dead stub is not tried 500 times."""

    def __init__(self, budget: float | None) -> None:
        self._lock = threading.Lock()
        self.successes = 0
        self.failures = 0
        self.budget = budget
        self._deadline = None if budget is None else time.monotonic() + budget

    def stop_reason(self) -> str | None:
        """Why the next row should not be tried, or None."""
        with self._lock:
            if self.successes == 0 and self.failures >= GIVE_UP_AFTER:
                return "not tried: the stub answered no request"
        if self._deadline is not None and time.monotonic() > self._deadline:
            return f"not tried: the time budget of {self.budget:g} s was used up"
        return None

    def record(self, reached: bool) -> None:
        """Count one row."""
        with self._lock:
            if reached:
                self.successes += 1
            else:
                self.failures += 1


def _compare_live(hop: TraceHop, live: dict[str, Any], pattern: re.Pattern[str]) -> list[dict]:
    """Differences between a trace row and the stub's stored record of it."""
    diffs: list[dict[str, Any]] = []

    def differ(name: str, file_value: Any, live_value: Any) -> None:
        diffs.append({"field": name, "file": preview(file_value), "live": preview(live_value)})

    if "trace_id" in live and live["trace_id"] != hop.trace_id:
        differ("trace_id", hop.trace_id, live["trace_id"])
    if "method" in live and hop.method and str(live["method"]).upper() != hop.method:
        differ("method", hop.method, live["method"])
    if "status" in live and not json_equal(live["status"], hop.status):
        differ("status", hop.status, live["status"])
    if "req" in live:
        file_req, live_req = loaded(hop.req), loaded(live["req"])
        if not json_equal(file_req, live_req):
            differ("req", file_req, live_req)
    if "idempotency_key" in live and (live["idempotency_key"] or None) != (
        hop.idempotency_key or None
    ):
        differ("idempotency_key", hop.idempotency_key, live["idempotency_key"])
    if "resp" in live:
        file_ids, live_ids = (
            ids_in(loaded(hop.resp), pattern),
            ids_in(loaded(live["resp"]), pattern),
        )
        if file_ids != live_ids:
            differ("order_id", file_ids, live_ids)
    return diffs


def _fetch_row(
    client: SafeClient, stub_url: str, hop: TraceHop, pattern: re.Pattern[str], tally: _Tally
) -> RowResult:
    """Re-fetch one row's `/_trace/{id}` and judge it."""
    trace_id = hop.trace_id or ""
    stop = tally.stop_reason()
    if stop:
        return RowResult(hop.line, hop.trace_id, "unreachable", error=stop)
    try:
        response = client.get(_trace_url(stub_url, trace_id))
    except (OutboundRefused, OutboundError) as exc:
        tally.record(False)
        return RowResult(hop.line, hop.trace_id, "unreachable", error=describe(exc))
    tally.record(True)
    if response.status in (404, 410):
        return RowResult(
            hop.line, hop.trace_id, "missing", error=f"stub answered {response.status}"
        )
    if response.truncated:
        return RowResult(
            hop.line,
            hop.trace_id,
            "unreachable",
            error=f"trace record larger than {client.max_bytes} bytes; not compared",
        )
    if response.status != 200:
        return RowResult(
            hop.line, hop.trace_id, "unreachable", error=f"stub answered {response.status}"
        )
    try:
        live = response.json()
    except (ValueError, UnicodeDecodeError, RecursionError):
        live = None
    if not isinstance(live, dict):
        return RowResult(
            hop.line,
            hop.trace_id,
            "unreachable",
            error="stub's /_trace answer is not a JSON object",
        )
    diffs = _compare_live(hop, live, pattern)
    return RowResult(hop.line, hop.trace_id, "mismatch" if diffs else "match", diffs)


def trace_live_match(
    hops: list[TraceHop],
    stub_url: str,
    *,
    path: str,
    allow: Iterable[str] | None,
    max_rows: int = 500,
    concurrency: int = 4,
    timeout: float = 5.0,
    max_bytes: int = 1_000_000,
    id_pattern: str = DEFAULT_ID_PATTERN,
    retries: int = 2,
    backoff: float = 0.1,
    budget: float | None = 120.0,
) -> tuple[CheckOutcome, list[RowResult]]:
    """`trace.live_match`: compare each stub hop with the live stub's `/_trace/{trace_id}`."""
    candidates = stub_hops(hops)
    with_id = [h for h in candidates if h.trace_id]
    no_id = len(candidates) - len(with_id)
    selected = with_id[: max(0, max_rows)]
    if not selected:
        reason = "the trace has no stub hop with a trace_id to re-fetch"
        if no_id:
            reason += f" ({no_id} stub hops carry no trace_id)"
        return CheckOutcome(CHECK_LIVE, "skip", reason, [{"message": reason, "path": path}]), []
    pattern = re.compile(id_pattern)
    try:
        client = stub_client(allow, timeout, max_bytes, retries, backoff, max(1, concurrency))
    except ValueError as exc:  # a malformed allowlist entry
        return CheckOutcome(CHECK_LIVE, "error", f"outbound allowlist: {exc}"), []
    with client:
        try:
            client.check(stub_url)
        except OutboundRefused as exc:
            summary = f"stub URL refused by the outbound guard: {exc}"
            return CheckOutcome(
                CHECK_LIVE,
                "error",
                summary,
                [{"message": summary, "mode": "live", "stub_url": stub_url, "rule": exc.rule}],
            ), []
        tally = _Tally(budget)
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            rows = list(
                pool.map(lambda h: _fetch_row(client, stub_url, h, pattern, tally), selected)
            )
    status, summary = rows_verdict(rows, "rows", "the live stub")
    notes = []
    if len(with_id) > len(selected):
        notes.append(f"only the first {len(selected)} of {len(with_id)} rows were checked")
    if no_id:
        notes.append(f"{no_id} stub hops carry no trace_id and cannot be re-fetched")
    if notes:
        summary += "; " + "; ".join(notes)
    return rows_outcome(status, summary, rows, path, mode="live", stub_url=stub_url), rows
