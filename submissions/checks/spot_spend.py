"""The spend ledger of live spot checks: one SpotSpend row per call, caps taken under a lock.

A cap per assignment per calendar month (UTC), in calls and in tokens, is checked before
every call. The check and the ledger row that takes the budget are written in one
transaction holding the assignment row's lock (`select_for_update`): two workers re-asking
for the same assignment at once queue on that lock, and the second one sees the first
one's row, so they cannot both pass the cap. The call itself runs after the commit (a lock
is not held across a model call); its row already counts, with the recorded answer's usage
as the estimate, and is corrected to the usage the endpoint reports.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from submissions.models import Assignment, SpotSpend, Submission, assignment_lock
from submissions.net.endpoints import Endpoint


class CapReached(Exception):
    """A call refused before it was made; `cap` names the cap (`month_calls`, ...)."""

    def __init__(self, cap: str, message: str) -> None:
        super().__init__(message)
        self.cap = cap


def month_start(now: datetime | None = None) -> datetime:
    """The first instant of the current calendar month, UTC."""
    now = (now or timezone.now()).astimezone(UTC)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_spent(assignment: Assignment, endpoint: Endpoint) -> tuple[int, int]:
    """(calls, tokens) this assignment spent on the endpoint this month."""
    spent = SpotSpend.objects.filter(
        assignment=assignment, endpoint=endpoint.name, at__gte=month_start()
    ).aggregate(calls=Sum("calls"), tokens=Sum("tokens"))
    return spent["calls"] or 0, spent["tokens"] or 0


def spend_ledger(assignment: Assignment, endpoints: tuple[Endpoint, ...], *, recent: int = 10
                 ) -> dict[str, object]:  # fmt: skip
    """What spot checks of this assignment spent this month, per endpoint against its caps
    (configured endpoints first, then names the ledger holds that are no longer configured),
    and its newest calls. Two queries; reads only."""
    since = month_start()
    totals = {
        row["endpoint"]: (row["calls"] or 0, row["tokens"] or 0)
        for row in SpotSpend.objects.filter(assignment=assignment, at__gte=since)
        .values("endpoint")
        .annotate(calls=Sum("calls"), tokens=Sum("tokens"))
    }
    rows: list[dict[str, object]] = []
    for endpoint in endpoints:
        calls, tokens = totals.pop(endpoint.name, (0, 0))
        spent = calls >= endpoint.month_calls or tokens >= endpoint.month_tokens
        rows.append({"name": endpoint.name, "calls": calls, "tokens": tokens,
                     "month_calls": endpoint.month_calls, "month_tokens": endpoint.month_tokens,
                     "spent": spent})  # fmt: skip
    for name, (calls, tokens) in sorted(totals.items()):
        rows.append({"name": name, "calls": calls, "tokens": tokens, "month_calls": None,
                     "month_tokens": None, "spent": False})  # fmt: skip
    latest = list(SpotSpend.objects.filter(assignment=assignment).order_by("-at", "-pk")[:recent])
    return {"since": since, "endpoints": rows, "latest": latest}


def spend_reserve(*, submission: Submission, endpoint: Endpoint, estimate: int) -> SpotSpend:
    """Take one call (and `estimate` tokens) of the month's budget, or raise CapReached."""
    with transaction.atomic():
        # The lock every spot check of this assignment queues on (see the module docstring).
        assignment_lock(submission.assignment_id)
        calls, tokens = month_spent(submission.assignment, endpoint)
        if calls + 1 > endpoint.month_calls:
            raise CapReached(
                "month_calls",
                f"cap month_calls of endpoint {endpoint.name} reached: {calls} of "
                f"{endpoint.month_calls} calls spent this month for this assignment",
            )
        if tokens + estimate > endpoint.month_tokens:
            raise CapReached(
                "month_tokens",
                f"cap month_tokens of endpoint {endpoint.name} reached: {tokens} of "
                f"{endpoint.month_tokens} tokens spent this month for this assignment, and "
                f"the next call is estimated at {estimate}",
            )
        return SpotSpend.objects.create(
            assignment_id=submission.assignment_id,
            submission=submission,
            endpoint=endpoint.name,
            calls=1,
            tokens=estimate,
        )


def spend_settle(*, spend: SpotSpend, tokens: int | None) -> None:
    """Correct a reserved row to the tokens the endpoint reported (kept when it said none)."""
    if tokens is not None and tokens != spend.tokens:
        SpotSpend.objects.filter(pk=spend.pk).update(tokens=max(0, tokens))
        spend.tokens = max(0, tokens)
