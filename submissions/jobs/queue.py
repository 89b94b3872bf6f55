"""Creating, publishing and reconciling jobs: the Job row is the truth, the broker carries ids."""

from __future__ import annotations

import concurrent.futures
import logging
from datetime import datetime, timedelta
from functools import partial

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from submissions.jobs.state import (
    heartbeat_stale,
    job_finish,
    runner_is_dead,
    submission_settle,
)
from submissions.jobs.types import cap_log
from submissions.models import Job, Submission
from submissions.redact import redact_text

log = logging.getLogger(__name__)

# One pool for publishing: a broker that hangs (celery/celery#4556) blocks a pool thread,
# never the web request, which waits at most ENQUEUE_TIMEOUT_SECONDS.
RUN_JOB_TASK = "submissions.tasks.run_job"
_publisher = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="enqueue")


def job_create(*, submission: Submission, kind: str, params: dict | None = None) -> Job:
    """Create a queued job and publish it once the surrounding transaction commits."""
    job = Job.objects.create(
        submission=submission,
        kind=kind,
        params=params or {},
        max_attempts=settings.JOB_MAX_ATTEMPTS,
    )
    transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


def job_publish(job_id: int, *, countdown: float | None = None) -> None:
    """Send the run_job task by name (submissions/tasks.py imports this module, not back)."""
    current_app.send_task(RUN_JOB_TASK, args=[job_id], retry=True, countdown=countdown)


def job_enqueue(*, job_id: int) -> bool:
    """Publish a queued job to the broker, bounded in time; on failure the job stays queued."""
    future = _publisher.submit(job_publish, job_id)
    try:
        future.result(timeout=settings.ENQUEUE_TIMEOUT_SECONDS)
    except Exception as exc:  # the broker is down, slow, or refused: the reconciler retries
        reason = (
            "the queue did not answer in time"
            if isinstance(exc, concurrent.futures.TimeoutError)
            else f"the queue is unreachable ({type(exc).__name__}: {exc})"
        )
        log.warning("enqueue of job %s failed: %s", job_id, reason)
        Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(
            enqueue_error=redact_text(reason)[:500]
        )
        return False
    Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(
        enqueue_error="", enqueued_at=timezone.now()
    )
    return True


def jobs_reconcile(*, now: datetime | None = None) -> dict[str, int]:
    """Re-publish queued jobs the broker never got, and rescue or end jobs whose worker died."""
    now = now or timezone.now()
    counts = {"requeued": 0, "rescued": 0, "ended": 0}
    requeue_before = now - timedelta(seconds=settings.JOB_REQUEUE_AFTER_SECONDS)
    queued = Job.objects.filter(state=Job.State.QUEUED).exclude(enqueued_at__gte=requeue_before)
    for job_id in queued.values_list("pk", flat=True):
        if job_enqueue(job_id=job_id):
            counts["requeued"] += 1
    for job in Job.objects.filter(state=Job.State.RUNNING):
        if not (runner_is_dead(job.runner, alive_at=job.heartbeat_at) or heartbeat_stale(job)):
            continue
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job.pk)
            if job.state != Job.State.RUNNING:
                continue
            lost = f"worker lost during attempt {job.attempts}"
            if job.attempts >= job.max_attempts:
                job_finish(
                    job,
                    Job.State.ERROR,
                    f"{lost}; worker lost {job.attempts} times",
                    internal=True,
                )
                counts["ended"] += 1
                transaction.on_commit(partial(submission_settle, submission_id=job.submission_id))
                continue
            job.state = Job.State.QUEUED
            job.runner = ""
            job.enqueued_at = None
            job.log = cap_log(job.log + lost + "; queued again\n")
            job.save()
            transaction.on_commit(partial(job_enqueue, job_id=job.pk))
            counts["rescued"] += 1
    return counts
