"""The machine-readable report of one submission (DESIGN.md, "Machine-readable report")."""

from __future__ import annotations

from typing import Any

from reviewer.models import Review, ScoreEvent
from reviewer.review.contradiction import contradiction
from reviewer.review.rubrics import review_total, rubric_for
from reviewer.review.scoring import checks_not_applying
from submissions.models import Submission


def report_build(submission: Submission) -> dict[str, Any]:
    """Everything the dashboard knows of a submission, as plain JSON-able data."""
    results = list(submission.checks.order_by("check_id"))
    checks = [
        {"id": c.check_id, "status": c.status, "summary": c.summary, "evidence": c.evidence}
        for c in results
    ]
    findings = [
        {
            "kind": f.kind,
            "severity": f.severity,
            "path": f.path,
            "line": f.line,
            "message": f.message,
        }
        for f in submission.findings.order_by("path", "line", "kind", "pk")
    ]
    jobs = [
        {
            "kind": j.kind,
            "state": j.state,
            "outcome": j.outcome,
            "attempts": j.attempts,
            "duration_s": j.duration_s,
        }
        for j in submission.jobs.order_by("pk")
    ]
    return {
        "submission": submission.pk,
        "candidate": submission.candidate.name,
        "assignment": submission.assignment.slug,
        "archive_sha256": submission.archive_sha256,
        "source": {
            "kind": submission.source_kind,
            "url": submission.source_url,
            "ref": submission.source_ref,
            "commit": submission.source_commit,
            "commit_date": (
                submission.source_commit_time.isoformat() if submission.source_commit_time else ""
            ),
            "commit_subject": submission.source_commit_subject,
            # Where the repository's ref pointed at the last *Check again*: never what was
            # judged (the commit above), and never the access token kept for it.
            "ref_check": {
                "state": submission.ref_check_state,
                "commit": submission.ref_check_commit,
                "checked_at": (
                    submission.ref_checked_at.isoformat() if submission.ref_checked_at else ""
                ),
            },
        },
        "status": submission.status,
        "checks": checks,
        "findings": findings,
        "recordings": _recordings(submission),
        "jobs": jobs,
        "scores": _scores(submission, {c.check_id: c.status for c in results}),
    }


def _recordings(submission: Submission) -> list[dict[str, Any]]:
    """Parsed recordings, once the analysis step stores them."""
    related = getattr(submission, "recordings", None)
    if related is None:
        return []
    return [
        {
            "path": r.path,
            "format": r.format,
            "interactions": r.interaction_count,
            "turns": r.turn_count,
            "model": r.model,
            "recorded_at": r.recorded_at.isoformat() if r.recorded_at else None,
        }
        for r in related.order_by("path")
    ]


def _scores(submission: Submission, statuses: dict[str, str]) -> dict[str, Any]:
    """Each review's row values, weighted total, recommendation (null when none was given)
    and the rows whose score contradicts their linked checks, in a stable order."""
    not_applying = checks_not_applying(submission.assignment)
    rubric = rubric_for(submission.assignment)
    reviews = (
        Review.objects.filter(submission=submission)
        .select_related("reviewer")
        .prefetch_related("scores__row", "rubric__rows")
        .order_by("reviewer__username")
    )
    out: dict[str, Any] = {"rubric": rubric.slug if rubric else None, "reviews": []}
    for review in reviews:
        rows = sorted(review.scores.all(), key=lambda s: s.row.order)
        contradicted = {
            s.row.title: found.as_json()
            for s in rows
            if (
                found := contradiction(
                    s.value, s.row.check_ids, statuses, not_applying=not_applying
                )
            )
        }
        out["reviews"].append(
            {
                "reviewer": review.reviewer.get_username(),
                "state": review.state,
                "recommendation": review.recommendation or None,
                "rows": {s.row.title: s.value for s in rows},
                "contradicts_checks": contradicted,
                # Over every row of the rubric, as the desk and the cohort count it: an
                # unscored row weighs in as not yet scored, not as absent.
                "total": review_total(review.rubric.rows.all(), rows),
            }
        )
    # Every change of every review, oldest first: nothing changed without a trace.
    out["audit"] = [
        {
            "at": e.at.isoformat(),
            "who": e.actor.get_username(),
            "kind": e.kind,
            "row": e.row.title if e.row else None,
            "old": e.old,
            "new": e.new,
            "reason": e.reason,
        }
        for e in ScoreEvent.objects.filter(submission=submission).select_related("actor", "row")
    ]
    return out
