"""Writing check outcomes: one CheckResult row per (submission, check id)."""

from __future__ import annotations

from cassettes_app.checks import CheckOutcome
from submissions.models import CheckResult, Job, Submission
from submissions.redact import redact_text


def checks_store(submission: Submission, job: Job | None, outcomes: list[CheckOutcome]) -> None:
    """Upsert check results by (submission, check id): a re-run never duplicates them."""
    for outcome in outcomes:
        CheckResult.objects.update_or_create(
            submission=submission,
            check_id=outcome.id,
            defaults={
                "status": outcome.status,
                "summary": redact_text(outcome.summary)[:2000],
                "evidence": outcome.evidence,
                "job": job,
            },
        )
