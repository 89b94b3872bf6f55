"""Trace verification against a candidate's shop stub: live re-fetch, idempotency probe, re-drive.

Three plain functions (no Django, no Celery; the allowlist comes in as an argument), all
network access through `submissions.outbound.SafeClient`:

- `trace_live_match` (`trace.live_match`): re-fetch every stub hop's `/_trace/{trace_id}` and
  compare status, request body (JSON-semantic), Idempotency-Key and order ids with the file.
  Row outcomes: `match`, `mismatch`, `missing` (404: the stub never saw that trace id),
  `unreachable` (timeout, reset, refused redirect, non-JSON or oversized answer, ...).
  Check status:
    * `pass`  every row matches;
    * `fail`  any row disagrees (the trace file says something the stub does not remember);
    * `warn`  no disagreement, but some rows could not be confirmed; in particular when the
      stub knows none of the trace ids. That is what a restarted stub without persistence
      looks like, which is not evidence that the file is wrong (and may be the hosting's
      doing), so it warns and points at re-driving instead of failing the candidate;
    * `error` the URL was refused by the outbound guard, or no row got an answer at all;
    * `skip`  the trace has no stub hop with a trace id.
- `trace_idempotency_enforced` (`trace.idempotency_enforced`): fresh random keys; 201 then 200 with
  the same order id, 409 for the same key with another body, 400 for a missing key and for
  bad bodies. Every probe's exact request, response and a copyable curl line go to evidence.
- `redrive` (`trace.live_match`, mode "redrive"): replay the stub hops in order against a
  freshly started stub, with each hop's original Idempotency-Key and body, and compare
  statuses and bodies with volatile values (order ids, trace ids, timestamps, uuids) masked.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import httpx

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.catalog import IDEMPOTENCY_ENFORCED, LIVE_MATCH
from cassettes_app.checks.trace import DEFAULT_ID_PATTERN
from cassettes_app.headers import get_header
from cassettes_app.hops import stub_hops
from cassettes_app.jsonvalues import json_equal, maybe_json
from cassettes_app.parsed import TraceHop
from submissions.net.outbound import (
    DEFAULT_HEADERS,
    OutboundError,
    OutboundRefused,
    SafeClient,
    SafeResponse,
)
from submissions.net.stub import stub_client

CHECK_LIVE = LIVE_MATCH
CHECK_IDEMPOTENCY = IDEMPOTENCY_ENFORCED

RowOutcome = Literal["match", "mismatch", "missing", "unreachable"]

# After this many unreachable rows with no success at all, the stub is treated as down and
# the remaining rows are not tried (500 rows x timeout would hold a worker for minutes).
GIVE_UP_AFTER = 3
# Values longer than this are shown cut in evidence (the comparison uses the whole value).
PREVIEW_CHARS = 2000
RESPONSE_PREVIEW_BYTES = 4000

# --- results -------------------------------------------------------------------------------


@dataclass(slots=True)
class RowResult:
    """The verdict on one trace row: outcome, differing fields (file vs live), error."""

    line: int
    trace_id: str | None
    outcome: RowOutcome
    differences: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, for TraceRow storage and evidence."""
        return {
            "line": self.line,
            "trace_id": self.trace_id,
            "outcome": self.outcome,
            "differences": self.differences,
            "error": self.error,
        }


# --- JSON comparison -----------------------------------------------------------------------


def _as_data(value: Any) -> Any:
    """A body as data: JSON text parsed, other text kept as text, empty text no body."""
    return maybe_json(value, keep_text=True)


def _preview(value: Any) -> Any:
    """A value for evidence: as is when small, else its JSON text cut to PREVIEW_CHARS."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= PREVIEW_CHARS:
        return value
    return text[:PREVIEW_CHARS] + f"… ({len(text)} characters)"


def _ids(value: Any, pattern: re.Pattern[str]) -> list[str]:
    """Sorted distinct ids matching the pattern anywhere in a value."""
    if value is None:
        return []
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return sorted(set(pattern.findall(text)))


# --- URLs ----------------------------------------------------------------------------------


def _join(base_url: str, path: str, query: str = "") -> str:
    """base_url's scheme, host and path prefix + path (+ query); base query/fragment dropped."""
    base = httpx.URL(base_url)
    prefix = base.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
    url = f"{base.scheme}://{base.netloc.decode('ascii')}{prefix}{path}"
    return f"{url}?{query}" if query else url


def _trace_url(stub_url: str, trace_id: str) -> str:
    """`{stub_url}/_trace/{trace_id}`; the id is fully percent-encoded (no path tricks)."""
    quoted = quote(trace_id, safe="")
    if set(trace_id) <= {"."}:
        # "." and ".." would be dot segments, which URL normalisation removes.
        quoted = trace_id.replace(".", "%2E")
    return _join(stub_url, "/_trace/" + quoted)


def _describe(exc: BaseException) -> str:
    """One-line reason for a transport failure."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


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


# --- trace.live_match ------------------------------------------------------------------------


def _compare_live(hop: TraceHop, live: dict[str, Any], pattern: re.Pattern[str]) -> list[dict]:
    """Differences between a trace row and the stub's stored record of it."""
    diffs: list[dict[str, Any]] = []

    def differ(name: str, file_value: Any, live_value: Any) -> None:
        diffs.append({"field": name, "file": _preview(file_value), "live": _preview(live_value)})

    if "trace_id" in live and live["trace_id"] != hop.trace_id:
        differ("trace_id", hop.trace_id, live["trace_id"])
    if "method" in live and hop.method and str(live["method"]).upper() != hop.method:
        differ("method", hop.method, live["method"])
    if "status" in live and not json_equal(live["status"], hop.status):
        differ("status", hop.status, live["status"])
    if "req" in live:
        file_req, live_req = _as_data(hop.req), _as_data(live["req"])
        if not json_equal(file_req, live_req):
            differ("req", file_req, live_req)
    if "idempotency_key" in live and (live["idempotency_key"] or None) != (
        hop.idempotency_key or None
    ):
        differ("idempotency_key", hop.idempotency_key, live["idempotency_key"])
    if "resp" in live:
        file_ids, live_ids = (
            _ids(_as_data(hop.resp), pattern),
            _ids(_as_data(live["resp"]), pattern),
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
        return RowResult(hop.line, hop.trace_id, "unreachable", error=_describe(exc))
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


def _counts(rows: Sequence[RowResult]) -> dict[str, int]:
    """Rows per outcome."""
    counts = {"match": 0, "mismatch": 0, "missing": 0, "unreachable": 0}
    for row in rows:
        counts[row.outcome] += 1
    return counts


def _row_evidence(row: RowResult, path: str) -> dict[str, Any]:
    """One evidence item for a row."""
    if row.outcome == "match":
        message = f"line {row.line} ({row.trace_id}): matches"
    elif row.outcome == "mismatch":
        parts = [f"{d['field']} file {d['file']!r}, live {d['live']!r}" for d in row.differences]
        message = f"line {row.line} ({row.trace_id}): " + "; ".join(parts)
    else:
        message = f"line {row.line} ({row.trace_id}): {row.outcome}: {row.error}"
    return {
        "message": message[:PREVIEW_CHARS],
        "path": path,
        "line": row.line,
        "trace_id": row.trace_id,
        "outcome": row.outcome,
        "differences": row.differences,
        "error": row.error,
    }


def _verdict(
    rows: Sequence[RowResult], what: str, where: str
) -> tuple[Literal["pass", "fail", "warn", "error"], str]:
    """Status and summary from the row outcomes (see the module docstring for the table)."""
    counts = _counts(rows)
    total = len(rows)
    extra = [
        f"{counts[k]} {k}" for k in ("missing", "unreachable") if counts[k] and counts[k] != total
    ]
    tail = f" ({', '.join(extra)})" if extra else ""
    if counts["mismatch"]:
        fields = sorted({d["field"] for r in rows for d in r.differences})
        return "fail", (
            f"{counts['mismatch']} of {total} {what} disagree with {where} "
            f"(fields: {', '.join(fields)}){tail}"
        )
    if counts["unreachable"] == total:
        first = next((r.error for r in rows if r.error), "no answer")
        return "error", f"{where} did not answer any of {total} {what}: {first}"
    if counts["missing"] == total:
        return "warn", (
            f"the stub has no record of any trace: it probably restarted (or is not the stub "
            f"that produced this trace); all {total} {what} are unknown to it. Re-drive the "
            "trace against a fresh stub instead"
        )
    if counts["match"] == total:
        return "pass", f"all {total} {what} match {where}"
    return (
        "warn",
        f"{counts['match']} of {total} {what} match {where}; the rest are unconfirmed{tail}",
    )


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
    status, summary = _verdict(rows, "rows", "the live stub")
    notes = []
    if len(with_id) > len(selected):
        notes.append(f"only the first {len(selected)} of {len(with_id)} rows were checked")
    if no_id:
        notes.append(f"{no_id} stub hops carry no trace_id and cannot be re-fetched")
    if notes:
        summary += "; " + "; ".join(notes)
    head = {
        "message": summary,
        "mode": "live",
        "stub_url": stub_url,
        "path": path,
        "counts": _counts(rows),
        "rows_checked": len(rows),
    }
    ordered = [r for r in rows if r.outcome != "match"] + [r for r in rows if r.outcome == "match"]
    evidence = [head, *(_row_evidence(r, path) for r in ordered)]
    return CheckOutcome(CHECK_LIVE, status, summary, evidence), rows


# --- trace.idempotency_enforced ----------------------------------------------------------------


def curl_line(method: str, url: str, headers: dict[str, str], body: str | None) -> str:
    """A copyable curl command for one request, every argument shell-quoted."""
    args = ["curl", "-sS", "-i", "--max-time", "10", "-X", method, url]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    if body is not None:
        args += ["--data-raw", body]
    return " ".join(shlex.quote(a) for a in args)


def _order_id(data: Any, pattern: re.Pattern[str]) -> str | None:
    """The order id an answer carries: `id` (top level or under `order`), else the pattern."""
    if isinstance(data, dict):
        nested = data.get("order")
        candidates = [data.get("id"), nested.get("id") if isinstance(nested, dict) else None]
        for candidate in candidates:
            if isinstance(candidate, str) and pattern.fullmatch(candidate):
                return candidate
    found = _ids(data, pattern)
    return found[0] if found else None


def _other_body(body: dict[str, Any]) -> dict[str, Any]:
    """The same order with a different quantity (or an extra field when there is no qty)."""
    qty = body.get("qty")
    if isinstance(qty, int) and not isinstance(qty, bool):
        return {**body, "qty": qty + 1 if qty < 99 else qty - 1}
    return {**body, "note": "different body"}


def probe_body_from_hops(hops: Iterable[TraceHop]) -> dict[str, Any] | None:
    """A request body the stub accepted with 201 in the trace (a probe body it will know)."""
    for hop in stub_hops(hops):
        body = _as_data(hop.req)
        if hop.method == "POST" and hop.status == 201 and isinstance(body, dict):
            return body
    return None


def trace_idempotency_enforced(
    stub_url: str,
    *,
    allow: Iterable[str] | None,
    timeout: float = 5.0,
    sku: str = "PROBE-SKU",
    qty: int = 1,
    body: dict[str, Any] | None = None,
    orders_path: str = "/orders",
    id_pattern: str = DEFAULT_ID_PATTERN,
    max_bytes: int = 64_000,
    retries: int = 1,
    backoff: float = 0.1,
) -> CheckOutcome:
    """`trace.idempotency_enforced`: probe POST /orders with fresh keys; every step is evidence.

    `body` overrides the default `{"sku": sku, "qty": qty}` (e.g. a body the trace shows the
    stub accepted, since a stub may only know its own catalog).
    """
    pattern = re.compile(id_pattern)
    url = _join(stub_url, orders_path) if _url_ok(stub_url) else stub_url
    good = dict(body) if body is not None else {"sku": sku, "qty": qty}
    key = "probe_" + uuid.uuid4().hex
    run = uuid.uuid4().hex[:8]
    steps: list[tuple[str, str | None, Any, str]] = [
        # (name, idempotency key, body (dict or raw str), expectation)
        ("new key", key, good, "201 with an order id"),
        ("same key, same body", key, good, "200 with the same order id"),
        ("same key, different body", key, _other_body(good), "409"),
        ("no Idempotency-Key", None, good, "400"),
        ("qty 0", "probe_" + uuid.uuid4().hex, {**good, "qty": 0}, "400"),
        ("body is not JSON", "probe_" + uuid.uuid4().hex, "not json {", "400"),
    ]
    evidence: list[dict[str, Any]] = []
    failures: list[str] = []
    first_id: str | None = None
    try:
        client = stub_client(allow, timeout, max_bytes, retries, backoff, 1)
    except ValueError as exc:  # a malformed allowlist entry
        return CheckOutcome(CHECK_IDEMPOTENCY, "error", f"outbound allowlist: {exc}")
    with client:
        try:
            # The given URL first: joining drops credentials, which must still be refused.
            client.check(stub_url)
            client.check(url)
        except OutboundRefused as exc:
            summary = f"stub URL refused by the outbound guard: {exc}"
            return CheckOutcome(
                CHECK_IDEMPOTENCY, "error", summary, [{"message": summary, "rule": exc.rule}]
            )
        for index, (name, step_key, step_body, expected) in enumerate(steps, start=1):
            headers, raw, item = _probe_step(index, name, step_key, step_body, expected, url, run)
            try:
                response = client.post(url, headers=headers, content=raw.encode("utf-8"))
            except (OutboundRefused, OutboundError) as exc:
                item.update(ok=False, error=_describe(exc))
                item["message"] = f"{name}: expected {expected}, no answer: {_describe(exc)}"
                evidence.append(item)
                summary = (
                    f"the stub did not answer the idempotency probe ({name}): {_describe(exc)}"
                )
                return CheckOutcome(CHECK_IDEMPOTENCY, "error", summary, evidence)
            ok, got = _judge_probe(index, response, pattern, first_id)
            if index == 1:
                first_id = _order_id(_json_or_none(response), pattern)
            item["response"] = _response_evidence(response)
            item["ok"] = ok
            item["message"] = f"{name}: expected {expected}, got {got}"
            evidence.append(item)
            if not ok:
                failures.append(f"{name} gave {got} (expected {expected})")
    if failures:
        return CheckOutcome(
            CHECK_IDEMPOTENCY,
            "fail",
            f"{len(failures)} of {len(steps)} probes failed: " + "; ".join(failures),
            evidence,
        )
    return CheckOutcome(
        CHECK_IDEMPOTENCY,
        "pass",
        f"all {len(steps)} probes behaved: 201, 200 with the same order id, 409, 400, 400, 400",
        evidence,
    )


def _probe_step(
    index: int, name: str, key: str | None, body: Any, expected: str, url: str, run: str
) -> tuple[dict[str, str], str, dict[str, Any]]:
    """One idempotency probe request: its headers, raw body and evidence item."""
    # The evidence shows every header we set (client defaults included), so the curl line
    # reproduces the request exactly.
    headers = {
        **DEFAULT_HEADERS,
        "Content-Type": "application/json",
        "X-Trace-Id": f"probe-{run}-{index}",
    }
    if key is not None:
        headers["Idempotency-Key"] = key
    raw = body if isinstance(body, str) else json.dumps(body, sort_keys=True)
    request = {"method": "POST", "url": url, "headers": headers, "body": raw}
    item: dict[str, Any] = {
        "probe": name,
        "expected": expected,
        "request": request,
        "curl": curl_line("POST", url, headers, raw),
    }
    return headers, raw, item


def _url_ok(url: str) -> bool:
    """True when httpx can parse the URL (the guard explains the refusal otherwise)."""
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        return False
    return True


def _json_or_none(response: SafeResponse) -> Any:
    """The response body as JSON, or None."""
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _judge_probe(
    index: int, response: SafeResponse, pattern: re.Pattern[str], first_id: str | None
) -> tuple[bool, str]:
    """Whether one probe's answer is what the contract demands, and what it was."""
    status = response.status
    order = _order_id(_json_or_none(response), pattern)
    got = f"{status}" + (f" with order id {order}" if order else "")
    if index == 1:
        return status == 201 and order is not None, got
    if index == 2:
        if status == 200 and first_id is not None and order == first_id:
            return True, got
        if status == 200 and order != first_id:
            got += f" (a different order id than {first_id})"
        return False, got
    if index == 3:
        return status == 409, got
    return status == 400, got


def _response_evidence(response: SafeResponse) -> dict[str, Any]:
    """Status, headers and a capped body of a probe answer."""
    text = response.body[:RESPONSE_PREVIEW_BYTES].decode("utf-8", "replace")
    return {
        "status": response.status,
        "headers": dict(response.headers),
        "body": text,
        "truncated": response.truncated or len(response.body) > RESPONSE_PREVIEW_BYTES,
        "attempts": response.attempts,
    }


# --- re-drive --------------------------------------------------------------------------------

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
    url = _join(base_url, path if path.startswith("/") else "/" + path, parts.query)
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


def redrive(
    hops: list[TraceHop],
    base_url: str,
    *,
    path: str = "replay.jsonl",
    allow: Iterable[str] | None = None,
    max_rows: int = 500,
    timeout: float = 5.0,
    max_bytes: int = 1_000_000,
    id_pattern: str = DEFAULT_ID_PATTERN,
    retries: int = 2,
    backoff: float = 0.1,
    budget: float | None = 120.0,
) -> tuple[CheckOutcome, list[RowResult]]:
    """`trace.live_match` by re-driving: replay stub hops in order on a fresh stub and compare."""
    pattern = re.compile(id_pattern)
    selected = stub_hops(hops)[: max(0, max_rows)]
    if not selected:
        return _nothing_to_redrive(), []
    trace_ids = [h.trace_id for h in hops if h.trace_id]
    rows: list[RowResult] = []
    try:
        client = stub_client(allow, timeout, max_bytes, retries, backoff, 1)
    except ValueError as exc:  # a malformed allowlist entry
        return CheckOutcome(CHECK_LIVE, "error", f"outbound allowlist: {exc}"), []
    with client:
        try:
            client.check(base_url)
        except OutboundRefused as exc:
            summary = f"re-drive: stub URL refused by the outbound guard: {exc}"
            return CheckOutcome(
                CHECK_LIVE, "error", summary, [{"message": summary, "mode": "redrive"}]
            ), []
        failures_in_a_row = 0
        deadline = None if budget is None else time.monotonic() + budget
        for hop in selected:  # sequential: idempotency state depends on the order
            stop = None
            if failures_in_a_row >= GIVE_UP_AFTER:
                stop = "not sent: the stub stopped answering"
            elif deadline is not None and time.monotonic() > deadline:
                stop = f"not sent: the time budget of {budget:g} s was used up"
            if stop:
                rows.append(RowResult(hop.line, hop.trace_id, "unreachable", error=stop))
                continue
            method, url, headers, body = _redrive_request(hop, base_url)
            try:
                response = client.request(method, url, headers=headers, content=body)
            except (OutboundRefused, OutboundError) as exc:
                failures_in_a_row += 1
                rows.append(RowResult(hop.line, hop.trace_id, "unreachable", error=_describe(exc)))
                continue
            failures_in_a_row = 0
            rows.append(_compare_redrive(hop, response, pattern, trace_ids))
    return _redrive_outcome(rows, base_url, path), rows


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


def judge_redrive(
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
    status, summary = _verdict(rows, "re-driven hops", "the fresh stub")
    summary = "re-drive: " + summary
    head = {
        "message": summary,
        "mode": "redrive",
        "base_url": base_url,
        "path": path,
        "counts": _counts(rows),
        "rows_checked": len(rows),
    }
    ordered = [r for r in rows if r.outcome != "match"] + [r for r in rows if r.outcome == "match"]
    evidence = [head, *(_row_evidence(r, path) for r in ordered)]
    return CheckOutcome(CHECK_LIVE, status, summary, evidence)


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
    file_resp = mask_volatile(_as_data(hop.resp), pattern, trace_ids)
    live_resp = mask_volatile(_as_data(response.text), pattern, trace_ids)
    if hop.resp is not None and not json_equal(file_resp, live_resp):
        diffs.append({"field": "resp", "file": _preview(file_resp), "live": _preview(live_resp)})
    return RowResult(hop.line, hop.trace_id, "mismatch" if diffs else "match", diffs)
