"""`trace.idempotency_enforced`: probe the live stub's POST /orders with fresh random keys.

201 then 200 with the same order id, 409 for the same key with another body, 400 for a
missing key and for bad bodies. Every probe's exact request, response and a copyable curl
line go to evidence. A plain function; all network access through `SafeClient`.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Iterable
from typing import Any

import httpx

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.catalog import IDEMPOTENCY_ENFORCED
from cassettes_app.config import DEFAULT_ID_PATTERN
from cassettes_app.hops import stub_hops
from cassettes_app.parsed import TraceHop
from submissions.checks.trace_live.rows import (
    describe,
    ids_in,
    join_url,
    loaded,
)
from submissions.net.outbound import (
    DEFAULT_HEADERS,
    OutboundError,
    OutboundRefused,
    SafeResponse,
)
from submissions.net.stub import stub_client

CHECK_IDEMPOTENCY = IDEMPOTENCY_ENFORCED
RESPONSE_PREVIEW_BYTES = 4000


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
    found = ids_in(data, pattern)
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
        body = loaded(hop.req)
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
    url = join_url(stub_url, orders_path) if _url_ok(stub_url) else stub_url
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
                item.update(ok=False, error=describe(exc))
                item["message"] = f"{name}: expected {expected}, no answer: {describe(exc)}"
                evidence.append(item)
                summary = f"the stub did not answer the idempotency probe ({name}): {describe(exc)}"
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
