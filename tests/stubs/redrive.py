"""The product's re-drive, run here against a stub that is already listening on loopback.

The same functions the trace job uses (`redrive_requests`, the sandbox driver's `send_all`
and `send_one`, `answers_from_driver`, `trace_live_match_from_redrive`); only starting the stub inside the
sandbox is left out, so these tests need no sandbox.
"""

from __future__ import annotations

from cassettes_app.checks import CheckOutcome
from cassettes_app.parsed import TraceHop
from submissions.checks.trace_live.redrive import (
    REDRIVE_BUDGET_SECONDS,
    answers_from_driver,
    redrive_requests,
    trace_live_match_from_redrive,
)
from submissions.checks.trace_live.rows import GIVE_UP_AFTER, RowResult
from submissions.sandbox.runtime import redrive_driver as driver


def redrive_here(
    hops: list[TraceHop],
    base_url: str,
    *,
    path: str = "replay.jsonl",
    timeout: float = 5.0,
    max_bytes: int = 1_000_000,
    budget: float | None = REDRIVE_BUDGET_SECONDS,
    give_up_after: int = GIVE_UP_AFTER,
) -> tuple[CheckOutcome, list[RowResult]]:
    """`trace.live_match` by re-driving the trace's stub hops against `base_url`."""
    requests = redrive_requests(hops, base_url)
    opener = driver.opener_without_proxy()
    raw = driver.send_all(
        requests,
        lambda r: driver.send_one(opener, r, timeout, max_bytes),
        give_up_after,
        budget,
    )
    answers = answers_from_driver(raw, base_url)
    return trace_live_match_from_redrive(hops, answers, base_url=base_url, path=path)
