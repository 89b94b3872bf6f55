"""Writing check outcomes: one CheckResult row per (submission, check id)."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.rules import not_applicable, shape_rules
from submissions.models import CheckResult, Job, Submission
from submissions.redact import redact_text

# Sent (sender=CheckResult, submission_id=...) inside the transaction that wrote a
# submission's check results: the rows are written in one statement, which sends no
# post_save, and what shows them (the comparison table) moves on once for all of them.
checks_stored = Signal()

_UPDATED = ["status", "summary", "cause", "evidence", "job", "updated"]


def checks_store(submission: Submission, job: Job | None, outcomes: list[CheckOutcome]) -> None:
    """Upsert check results by (submission, check id): a re-run never duplicates them.

    A check that does not apply to the assignment's shape is stored as `skip` with the
    reason, whatever was computed: one place, so no job can apply another shape's rules.
    All of them in one INSERT ... ON CONFLICT UPDATE: one row at a time cost a lookup, a
    write and a table invalidation per check (about 3 ms each, a tenth of a small hand-in's
    analysis). An id given twice keeps its last outcome.
    """
    assignment = submission.assignment
    rules = shape_rules(assignment.shape, assignment.check_rules)
    rows: dict[str, CheckResult] = {}
    for outcome in outcomes:
        rule = rules.get(outcome.id)
        if rule is not None and not rule.applies:
            outcome = CheckOutcome(outcome.id, "skip", not_applicable(rule, assignment.shape))
        rows[outcome.id] = CheckResult(
            submission=submission,
            check_id=outcome.id,
            status=outcome.status,
            summary=redact_text(outcome.summary)[:2000],
            cause=outcome.cause,
            evidence=outcome.evidence,
            job=job,
        )
    if not rows:
        return
    with transaction.atomic():
        # In check id order: two jobs of one hand-in writing some of the same ids at once
        # (both write env.dependencies_installed) lock those rows in the same order, so
        # one waits for the other instead of each holding a row the other needs.
        CheckResult.objects.bulk_create(
            sorted(rows.values(), key=lambda row: row.check_id),
            update_conflicts=True,
            unique_fields=["submission", "check_id"],
            update_fields=_UPDATED,
        )
        checks_stored.send(sender=CheckResult, submission_id=submission.pk)
