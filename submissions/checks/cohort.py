"""cohort.recordings_unique: no recorded response id of a hand-in is in another candidate's.

A provider issues each response id (`chatcmpl-…`, `msg_…`, `resp_…`, a request id header)
once, so the same id in two candidates' recordings means one copied the other's recording,
renamed or re-indented as it may be (`cassettes_app.response_ids` reads them; the analysis
stores them as ResponseId rows). The team is the assignment: this app serves one hiring
team, so "another candidate's hand-in of the same team" is the latest hand-in of each other
candidate for the same assignment, a rejected upload not counted. Nothing leaves the server
and no other assignment is looked at.

Incremental: when a hand-in's analysis stores its ids, one indexed query finds the cohort's
hand-ins holding any of them (not all pairs again); this hand-in's outcome is written, and
so is that of every hand-in it shares an id with, or that an earlier outcome said it shared
one with (a re-run that no longer holds the id clears it): a copy fails both ways.

Blind: the evidence names the other side by submission id and path only (`other`), never
the candidate; the page resolves it for a viewer who may see that submission
(`submissions.selectors.cohort_others`), and anyone else reads "another candidate's hand-in".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import RECORDINGS_UNIQUE
from submissions.checks.store import checks_store
from submissions.models import CheckResult, Job, ResponseId, Submission, assignment_lock

# The evidence key of the other side ({"submission": id, "path": ...}): pages show it only
# to a viewer who may see that submission, and a shared report never prints it.
OTHER = "other"

# Matching rows read per judgment: an id every hand-in shares (a sample recording handed
# out with the brief) must not make each judgment read the whole cohort.
MAX_MATCHES = 2000


def cohort_latest(submission: Submission) -> QuerySet[Submission]:
    """The latest non-rejected hand-in of every other candidate for the same assignment."""
    latest = (
        Submission.objects.filter(
            assignment_id=OuterRef("assignment_id"), candidate_id=OuterRef("candidate_id")
        )
        .exclude(status=Submission.Status.REJECTED)
        .order_by("-created", "-pk")
        .values("pk")[:1]
    )
    return (
        Submission.objects.filter(assignment_id=submission.assignment_id)
        .exclude(candidate_id=submission.candidate_id)
        .exclude(status=Submission.Status.REJECTED)
        .filter(pk=Subquery(latest))
    )


def _judge(submission: Submission) -> tuple[CheckOutcome, set[int]]:
    """This hand-in's outcome, and the hand-ins of the cohort it shares an id with."""
    if not submission.assignment.recording_globs:
        return skip(RECORDINGS_UNIQUE, "the assignment names no recordings to compare"), set()
    mine = ResponseId.objects.filter(submission=submission)
    count = mine.count()
    if not count:
        reason = (
            "no recording of this hand-in carries a response id a provider issued "
            "(chatcmpl-, resp_, msg_, responseId, a request id header): nothing to compare"
        )
        return skip(RECORDINGS_UNIQUE, reason), set()
    # The one indexed query: the cohort's rows whose value this hand-in also holds.
    matches = list(
        ResponseId.objects.filter(
            value__in=mine.values("value"), submission__in=cohort_latest(submission)
        )
        .order_by("value", "submission_id")
        .values_list("value", "submission_id", "path")[:MAX_MATCHES]
    )
    if not matches:
        summary = (
            f"none of this hand-in's {counted(count, 'recorded response id')} is in another "
            "candidate's hand-in of this assignment"
        )
        return CheckOutcome(RECORDINGS_UNIQUE, "pass", summary), set()
    own = {
        value: (path, kind)
        for value, path, kind in mine.filter(value__in={v for v, _, _ in matches}).values_list(
            "value", "path", "kind"
        )
    }
    evidence = [_item(value, *own[value], other, path) for value, other, path in matches]
    others = {other for _, other, _ in matches}
    summary = (
        f"{counted(len(own), 'recorded response id')} of this hand-in also in the hand-in of "
        f"{counted(len(others), 'other candidate')}: a provider issues each id once, so the "
        "recordings were copied"
    )
    return CheckOutcome(RECORDINGS_UNIQUE, "fail", summary, evidence), others


def _item(value: str, path: str, kind: str, other: int, other_path: str) -> dict[str, Any]:
    """One shared id. The message names no other candidate (see the module docstring)."""
    return {
        "message": f"response id {value} ({kind}) is also recorded in another candidate's hand-in",
        "path": path,
        "id": value,
        "kind": kind,
        OTHER: {"submission": other, "path": other_path},
    }


def _named_before(submission: Submission, check_id: str, status: str) -> set[int]:
    """Hand-ins whose stored `check_id` outcome (at `status`) names a hand-in of this
    candidate: the ones to judge again when this candidate's hand-in changes."""
    own = set(
        Submission.objects.filter(
            assignment_id=submission.assignment_id, candidate_id=submission.candidate_id
        ).values_list("pk", flat=True)
    )
    flagged = (
        CheckResult.objects.filter(
            check_id=check_id,
            status=status,
            submission__assignment_id=submission.assignment_id,
        )
        .exclude(submission__candidate_id=submission.candidate_id)
        .values_list("submission_id", "evidence")
    )
    return {
        pk
        for pk, evidence in flagged
        if any(
            isinstance(e, dict) and (e.get(OTHER) or {}).get("submission") in own for e in evidence
        )
    }


Judge = Callable[[Submission], tuple[CheckOutcome, set[int]]]


def cohort_judge(
    *, submission: Submission, job: Job | None, judge: Judge, check_id: str, flagged: str
) -> CheckOutcome:
    """Judge this hand-in against its cohort with `judge` (its outcome, and the hand-ins it
    matched), write the outcome, and judge again the hand-ins it matched or that named this
    candidate before (their outcome at status `flagged`); returns its own outcome."""
    with transaction.atomic():
        # One judgment of an assignment's cohort at a time (PostgreSQL; SQLite's immediate
        # transactions serialise anyway): two hand-ins analysed at once cannot both miss
        # each other, nor can an outcome computed before the other's ids overwrite a later one.
        assignment_lock(submission.assignment_id)
        outcome, others = judge(submission)
        checks_store(submission, job, [outcome])
        again = others | _named_before(submission, check_id, flagged)
        for other in Submission.objects.filter(pk__in=again):
            their_job = other.jobs.filter(kind=Job.Kind.ANALYSIS).last()
            checks_store(other, their_job, [judge(other)[0]])
    return outcome


def cohort_recordings_unique(*, submission: Submission, job: Job | None) -> CheckOutcome:
    """Judge this hand-in against its cohort, write its outcome, and re-judge the hand-ins
    it shares an id with (or shared one with before); returns its own outcome."""
    return cohort_judge(
        submission=submission, job=job, judge=_judge, check_id=RECORDINGS_UNIQUE, flagged="fail"
    )
