"""Celery tasks: thin adapters that take ids and call the domain."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from submissions.checks.spot_schedule import spot_checks_schedule
from submissions.jobs.engine import job_execute
from submissions.jobs.locked import is_locked
from submissions.jobs.queue import jobs_reconcile


@shared_task(name="submissions.tasks.run_job", bind=True, max_retries=8)
def run_job(self, job_id: int) -> str | None:
    """Run one job by id; a database still locked after the engine's own tries is retried
    later with backoff, not raised (the job would sit queued until a reconciler came)."""
    try:
        return job_execute(job_id=job_id)
    except OperationalError as exc:
        if not is_locked(exc):
            raise
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from None


@shared_task(name="submissions.tasks.reconcile")
def reconcile() -> dict[str, int]:
    """Re-enqueue jobs the broker lost and end or rescue those whose worker died."""
    return jobs_reconcile()


@shared_task(name="submissions.tasks.spot_check_references")
def spot_check_references() -> int:
    """Queue the spot checks of the assignments' reference hand-ins that are due (beat)."""
    return len(spot_checks_schedule())
