"""Writing check outcomes: one CheckResult row per (submission, check id)."""

from __future__ import annotations

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.rules import not_applicable, shape_rules
from submissions.models import CheckResult, Job, Submission
from submissions.redact import redact_text


def checks_store(submission: Submission, job: Job | None, outcomes: list[CheckOutcome]) -> None:
    """Upsert check results by (submission, check id): a re-run never duplicates them.

    A check that does not apply to the assignment's shape is stored as `skip` with the
    reason, whatever was computed: one place, so no job can apply another shape's rules.
    """
    assignment = submission.assignment
    rules = shape_rules(assignment.shape, assignment.check_rules)
    for outcome in outcomes:
        rule = rules.get(outcome.id)
        if rule is not None and not rule.applies:
            outcome = CheckOutcome(outcome.id, "skip", not_applicable(rule, assignment.shape))
        CheckResult.objects.update_or_create(
            submission=submission,
            check_id=outcome.id,
            defaults={
                "status": outcome.status,
                "summary": redact_text(outcome.summary)[:2000],
                "cause": outcome.cause,
                "evidence": outcome.evidence,
                "job": job,
            },
        )
