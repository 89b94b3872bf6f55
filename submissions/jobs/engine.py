"""Running one job: claim it under a row lock, run its handler with a heartbeat, record the end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.utils import timezone

from submissions.intake.trees import tree_in_use
from submissions.jobs.locked import retry_locked
from submissions.jobs.queue import job_publish
from submissions.jobs.registry import HANDLERS
from submissions.jobs.state import (
    heartbeat_stale,
    job_finish,
    runner_id,
    runner_is_dead,
    submission_settle,
)
from submissions.jobs.types import JobError, JobFailed, Outcome, Progress, cap_log
from submissions.models import Job

log = logging.getLogger(__name__)


BUSY: Literal["busy"] = "busy"


def _claim(job_id: int) -> Job | Literal["busy"] | None:
    """Move a job to running under a row lock; None when this delivery has nothing to do,
    BUSY when the job runs under a runner not known to be dead (ask again later)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.is_final:
            return None
        if job.state == Job.State.RUNNING:
            # A redelivery: take over only when the previous runner is provably gone.
            dead = runner_is_dead(job.runner, alive_at=job.heartbeat_at)
            if not (dead or heartbeat_stale(job)):
                return BUSY
            lost = f"worker lost during attempt {job.attempts}"
            job.log = cap_log(job.log + lost + "\n")
        if job.attempts >= job.max_attempts:
            job_finish(job, Job.State.ERROR, f"worker lost {job.attempts} times; giving up")
            return None
        job.state = Job.State.RUNNING
        job.attempts += 1
        job.runner = runner_id()
        job.started_at = job.started_at or timezone.now()
        job.heartbeat_at = timezone.now()
        job.error = ""
        job.save()
        return job


@contextmanager
def _heartbeat(job_id: int) -> Iterator[None]:
    """Touch the job's heartbeat from a side thread while its handler runs."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.JOB_HEARTBEAT_SECONDS):
                try:
                    Job.objects.filter(pk=job_id, state=Job.State.RUNNING).update(
                        heartbeat_at=timezone.now()
                    )
                except Exception:  # a missed beat is harmless; the next one retries
                    log.exception("heartbeat for job %s failed", job_id)
                finally:
                    close_old_connections()
        finally:
            # This thread's connection: kept alive by CONN_MAX_AGE, it would outlive the
            # thread, one idle database session per job.
            connections.close_all()

    thread = threading.Thread(target=beat, name=f"heartbeat-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _drop_broken_connection() -> None:
    """Replace a database connection the handler left unusable, so the job's end is stored.

    A soft time limit is a signal: raised in the middle of a query, it leaves PostgreSQL's
    connection busy ("another command is already in progress") and every later query on it
    fails. Outside a transaction, an unusable connection is closed and the next query opens
    a new one.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if not connection.is_usable():
        connection.close()


def _ask_again(job_id: int) -> None:
    """Publish a redelivered job again, to be judged after the runner's host next beats.

    With acks_late, a redelivery most often means the runner died: a pool child killed
    alone is rejected back to the queue by its worker at once, while that host still beats
    and lists the child until its next beat. Acking this delivery would drop the job until
    the reconciler noticed its stale heartbeat (JOB_STALE_SECONDS); asking again after
    WORKER_BEAT_SECONDS lets the next check see the child gone. While the runner lives, one
    message circulates per redelivery until the job ends: no copy is added.
    """
    countdown = settings.WORKER_BEAT_SECONDS
    log.info("job %s was redelivered while its runner may live; asked again in %ss", job_id,
             countdown)  # fmt: skip
    try:
        job_publish(job_id, countdown=countdown)
    except Exception:  # the broker is down: the reconciler rescues the job once it is stale
        log.exception("could not ask again for job %s", job_id)


def job_execute(*, job_id: int) -> str | None:
    """Run one job through its handler; returns the final state, or None when skipped."""
    job = retry_locked(lambda: _claim(job_id))
    if job == BUSY:
        _ask_again(job_id)
        return None
    if job is None:
        return None
    func = HANDLERS.get(job.kind)
    progress = Progress(job)
    try:
        if func is None:
            raise JobError(f"no handler for job kind {job.kind!r}")
        # The tree stays on this host while the job reads it (the per-host cache's eviction
        # skips a held tree).
        with _heartbeat(job.pk), tree_in_use(job.submission_id):
            outcome = func(job, progress) or Outcome(Job.State.PASSED)
    except JobFailed as exc:
        outcome = Outcome(Job.State.FAILED, str(exc))
    except JobError as exc:
        outcome = Outcome(Job.State.ERROR, str(exc))
    except SoftTimeLimitExceeded:
        _drop_broken_connection()
        outcome = Outcome(Job.State.TIMED_OUT, "the job hit its soft time limit")
    except Exception as exc:
        _drop_broken_connection()
        log.exception("job %s crashed", job.pk)
        outcome = Outcome(
            Job.State.ERROR, f"internal error: {type(exc).__name__}: {exc}", internal=True
        )
    retry_locked(lambda: job.refresh_from_db(fields=["log", "progress", "step"]))
    retry_locked(lambda: job_finish(job, outcome.state, outcome.summary, internal=outcome.internal))
    retry_locked(lambda: submission_settle(submission_id=job.submission_id))
    return outcome.state
