"""Scheduled spot checks of an assignment's own reference recordings, and their drift.

An assignment may name a reference hand-in (the demo's, the hiring team's sample solution)
and a period in days: in its file (`reference: {candidate: NAME, every_days: 7}`, that
candidate's latest hand-in) or by id (`manage.py assignment_reference`). The scheduler
(Celery beat, `submissions.tasks.spot_check_references`, hourly) queues a spot check of it
when the last scheduled one is older than the period: the same REFERENCE_SAMPLE recordings
every time (the seed is the reference's id), so two checks compare. The assignment page
shows which hand-in is the reference and what drifted since the last check: per recording,
a status that changed and the fields whose drift is new (or gone). It spends like any spot
check, within the endpoint's caps; a check the caps refuse before any call is a `skip`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from submissions.checks.spot_check import SpotCheckRefused, spot_check_create
from submissions.models import Assignment, SpotCheck, Submission

logger = logging.getLogger(__name__)

REFERENCE_SAMPLE = 3


class ReferenceRefused(Exception):
    """The reference cannot be set as asked; the message says why."""


def assignment_reference_set(
    *, assignment: Assignment, submission: Submission | None, every_days: int
) -> None:
    """Name (or clear, with None) the assignment's reference hand-in and its period."""
    if submission is not None and submission.assignment_id != assignment.pk:
        raise ReferenceRefused("the reference must be a hand-in of this assignment")
    if not 0 <= every_days <= 365:
        raise ReferenceRefused("every_days must be 0 (never) to 365")
    # A reference set by id replaces one the assignment file named by candidate.
    Assignment.objects.filter(pk=assignment.pk).update(
        reference_submission=submission, reference_candidate="", spot_check_every_days=every_days
    )


def reference_of(assignment: Assignment) -> Submission | None:
    """The assignment's reference hand-in: the latest accepted hand-in of the candidate its
    file names (`reference: {candidate: ...}`), else the one set by id, else None."""
    if assignment.reference_candidate:
        return (
            Submission.objects.filter(
                assignment=assignment, candidate__name=assignment.reference_candidate
            )
            .exclude(status=Submission.Status.REJECTED)
            .order_by("-created", "-pk")
            .first()
        )
    return assignment.reference_submission


def _due(now: datetime) -> list[tuple[Assignment, Submission]]:
    rows = (
        Assignment.objects.filter(spot_check_every_days__gt=0)
        .exclude(reference_submission__isnull=True, reference_candidate="")
        .select_related("reference_submission")
        .order_by("pk")
    )
    due = []
    for assignment in rows:
        reference = reference_of(assignment)
        if reference is None:  # the named candidate has no hand-in yet
            continue
        last = SpotCheck.objects.filter(submission=reference, scheduled=True).aggregate(
            at=Max("created")
        )["at"]
        if last is None or now - last >= timedelta(days=assignment.spot_check_every_days):
            due.append((assignment, reference))
    return due


def spot_checks_schedule(*, now: datetime | None = None) -> list[SpotCheck]:
    """Queue the spot checks of every reference that is due; the ones queued."""
    endpoints = settings.SPOT_CHECK_ENDPOINTS
    if not endpoints:
        return []
    queued = []
    for assignment, reference in _due(now or timezone.now()):
        try:
            spot = spot_check_create(
                submission=reference,
                requested_by=None,
                endpoint=endpoints[0].name,
                sample=REFERENCE_SAMPLE,
                seed=reference.pk,
                scheduled=True,
            )
        except SpotCheckRefused as exc:  # one already running: the next hour tries again
            logger.info("reference spot check of %s not queued: %s", assignment.slug, exc)
            continue
        queued.append(spot)
    return queued


def _fields(result: dict[str, Any]) -> set[str]:
    return {
        f"{d.get('field')} ({d.get('change')})"
        for attempt in result.get("tries") or []
        for d in attempt.get("drift") or []
    }


@dataclass(slots=True)
class ReferenceDrift:
    """What changed between the reference's last two finished scheduled spot checks."""

    latest: SpotCheck | None
    previous: SpotCheck | None
    reference: Submission | None = None  # None: the named candidate has no hand-in yet
    named: str = ""  # the candidate the assignment file names, when it names one
    rows: list[dict[str, Any]] = field(default_factory=list)
    sample: int = REFERENCE_SAMPLE

    @property
    def changed(self) -> bool:
        return any(r["status_changed"] or r["new"] or r["gone"] for r in self.rows)


def reference_drift(assignment: Assignment) -> ReferenceDrift | None:
    """The drift since the last check, or None when the assignment names no reference."""
    reference = reference_of(assignment)
    if reference is None:
        if not assignment.reference_candidate:
            return None
        return ReferenceDrift(None, None, None, assignment.reference_candidate)
    checks = list(
        SpotCheck.objects.filter(
            submission=reference,
            scheduled=True,
            status__in=[SpotCheck.Status.READY, SpotCheck.Status.ERROR],
        ).order_by("-created", "-pk")[:2]
    )
    latest = checks[0] if checks else None
    previous = checks[1] if len(checks) > 1 else None
    drift = ReferenceDrift(latest, previous, reference, assignment.reference_candidate)
    if latest is None or previous is None:
        return drift
    before = {r.get("path"): r for r in previous.results or []}
    for now_result in latest.results or []:
        was = before.get(now_result.get("path")) or {}
        now_fields, was_fields = _fields(now_result), _fields(was)
        drift.rows.append(
            {
                "path": now_result.get("path"),
                "was": was.get("status", "not checked"),
                "now": now_result.get("status"),
                "status_changed": was.get("status") != now_result.get("status"),
                "new": sorted(now_fields - was_fields),
                "gone": sorted(was_fields - now_fields),
            }
        )
    return drift
