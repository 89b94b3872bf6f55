"""Celery tasks: thin adapters that take ids and call the domain."""

from __future__ import annotations

from celery import shared_task

from submissions.jobs.engine import job_execute
from submissions.jobs.queue import jobs_reconcile, worker_seen_now


@shared_task(name="submissions.tasks.run_job")
def run_job(job_id: int) -> str | None:
    """Run one job by id."""
    return job_execute(job_id=job_id)


@shared_task(name="submissions.tasks.reconcile")
def reconcile() -> dict[str, int]:
    """Re-enqueue jobs the broker lost and end or rescue those whose worker died."""
    worker_seen_now()
    return jobs_reconcile()
