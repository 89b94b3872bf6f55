"""Jobs: the Job row is the source of truth, the broker only carries ids.

State machine: queued → running → passed | failed | error | timed_out. A task that finds its
job in any other state does nothing, so a redelivered message never runs a job twice. A job
whose worker died (SIGKILL, OOM, hard time limit) is taken over by the redelivered message
or by the reconciler, and counted as an attempt; after `max_attempts` it ends `error`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.utils import timezone

from submissions.models import Job, Submission
from submissions.redact import redact_text

log = logging.getLogger(__name__)

# One pool for publishing: a broker that hangs (celery/celery#4556) blocks a pool thread,
# never the web request, which waits at most ENQUEUE_TIMEOUT_SECONDS.
_publisher = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="enqueue")


@dataclass
class Outcome:
    """What a job handler returns: the final state and a one-line summary."""

    state: str
    summary: str = ""


class JobFailed(Exception):
    """A handler's way to end its job `failed` (the submission was judged, and failed)."""


class JobError(Exception):
    """A handler's way to end its job `error` with a reason (the check could not run)."""


Handler = Callable[[Job, "Progress"], Outcome | None]
HANDLERS: dict[str, Handler] = {}


HANDLER_MODULES = (
    "submissions.intake",
    "submissions.analysis",
    "submissions.replay",
    "submissions.trace_job",
    "submissions.service_probe",
    "submissions.rerecord",
    "submissions.selftest",
)


def load_handlers() -> None:
    """Import the modules whose @handler functions run the job kinds."""
    import importlib

    for name in HANDLER_MODULES:
        importlib.import_module(name)


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the function that runs jobs of `kind`."""

    def register(func: Handler) -> Handler:
        HANDLERS[kind] = func
        return func

    return register


def runner_id() -> str:
    """This process as hostname:pid, so a dead runner on the same host can be recognised."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _runner_is_dead(runner: str) -> bool:
    """True when the runner lived on this host and its process is gone."""
    host, _, pid = runner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # A killed pool child stays a zombie until its parent reaps it; it runs nothing.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


class Progress:
    """Moves a running job's progress bar and appends to its capped, redacted log."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def step(self, label: str, percent: int) -> None:
        """Enter a named step at `percent`."""
        self.job.step = label[:100]
        self.job.progress = max(0, min(100, percent))
        self.job.heartbeat_at = timezone.now()
        Job.objects.filter(pk=self.job.pk).update(
            step=self.job.step, progress=self.job.progress, heartbeat_at=self.job.heartbeat_at
        )

    def log(self, text: str) -> None:
        """Append redacted text to the job log, keeping it under JOB_LOG_MAX_BYTES."""
        self.job.log = cap_log(self.job.log + redact_text(text).rstrip("\n") + "\n")
        Job.objects.filter(pk=self.job.pk).update(log=self.job.log)


def cap_log(text: str, limit: int | None = None) -> str:
    """Keep the head and tail of a log that outgrew its cap, with a marker between."""
    limit = limit or settings.JOB_LOG_MAX_BYTES
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f"\n[… {len(data) - limit} bytes of log dropped …]\n".encode()
    keep = (limit - len(marker)) // 2
    head = data[:keep].decode(errors="ignore")
    tail = data[len(data) - keep :].decode(errors="ignore")
    return head + marker.decode() + tail


# ---------------------------------------------------------------- creating and enqueuing


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


def job_enqueue(*, job_id: int) -> bool:
    """Publish a queued job to the broker, bounded in time; on failure the job stays queued."""
    from submissions.tasks import run_job

    def publish() -> None:
        run_job.apply_async(args=[job_id], retry=True)

    future = _publisher.submit(publish)
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


# ---------------------------------------------------------------- running


def _claim(job_id: int) -> Job | None:
    """Move a job to running under a row lock; None when this delivery has nothing to do."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.is_final:
            return None
        if job.state == Job.State.RUNNING:
            # A redelivery: take over only when the previous runner is provably gone.
            if not (_runner_is_dead(job.runner) or _heartbeat_stale(job)):
                return None
            lost = f"worker lost during attempt {job.attempts}"
            job.log = cap_log(job.log + lost + "\n")
        if job.attempts >= job.max_attempts:
            _finish(job, Job.State.ERROR, f"worker lost {job.attempts} times; giving up")
            return None
        job.state = Job.State.RUNNING
        job.attempts += 1
        job.runner = runner_id()
        job.started_at = job.started_at or timezone.now()
        job.heartbeat_at = timezone.now()
        job.error = ""
        job.save()
        return job


def _heartbeat_stale(job: Job) -> bool:
    """True when a running job has not shown life for JOB_STALE_SECONDS."""
    beat = job.heartbeat_at or job.started_at
    stale_before = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS)
    return beat is None or beat < stale_before


def _finish(job: Job, state: str, summary: str = "") -> None:
    """Record a final state; error-like states keep the reason."""
    job.state = state
    job.finished_at = timezone.now()
    if state == Job.State.PASSED:
        job.progress = 100
    if summary:
        if state in (Job.State.ERROR, Job.State.TIMED_OUT, Job.State.FAILED):
            job.error = redact_text(summary)[:2000]
        job.log = cap_log(job.log + redact_text(summary) + "\n")
    job.save()


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


def job_execute(*, job_id: int) -> str | None:
    """Run one job through its handler; returns the final state, or None when skipped."""
    job = _claim(job_id)
    if job is None:
        return None
    load_handlers()
    func = HANDLERS.get(job.kind)
    progress = Progress(job)
    try:
        if func is None:
            raise JobError(f"no handler for job kind {job.kind!r}")
        with _heartbeat(job.pk):
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
        outcome = Outcome(Job.State.ERROR, f"internal error: {type(exc).__name__}: {exc}")
    job.refresh_from_db(fields=["log", "progress", "step"])
    _finish(job, outcome.state, outcome.summary)
    _settle(job.submission_id)
    return outcome.state


# ---------------------------------------------------------------- reconciling


def jobs_reconcile(*, now: timezone.datetime | None = None) -> dict[str, int]:
    """Re-publish queued jobs the broker never got, and rescue or end jobs whose worker died."""
    now = now or timezone.now()
    counts = {"requeued": 0, "rescued": 0, "ended": 0}
    requeue_before = now - timedelta(seconds=settings.JOB_REQUEUE_AFTER_SECONDS)
    queued = Job.objects.filter(state=Job.State.QUEUED).exclude(enqueued_at__gte=requeue_before)
    for job_id in queued.values_list("pk", flat=True):
        if job_enqueue(job_id=job_id):
            counts["requeued"] += 1
    for job in Job.objects.filter(state=Job.State.RUNNING):
        if not (_runner_is_dead(job.runner) or _heartbeat_stale(job)):
            continue
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job.pk)
            if job.state != Job.State.RUNNING:
                continue
            lost = f"worker lost during attempt {job.attempts}"
            if job.attempts >= job.max_attempts:
                _finish(job, Job.State.ERROR, f"{lost}; worker lost {job.attempts} times")
                counts["ended"] += 1
                transaction.on_commit(lambda sid=job.submission_id: _settle(sid))
                continue
            job.state = Job.State.QUEUED
            job.runner = ""
            job.enqueued_at = None
            job.log = cap_log(job.log + lost + "; queued again\n")
            job.save()
            transaction.on_commit(lambda jid=job.pk: job_enqueue(job_id=jid))
            counts["rescued"] += 1
    return counts


WORKER_SEEN_KEY = "cr:worker-seen"


def worker_seen_at() -> float | None:
    """When a worker last showed life (a POSIX timestamp), if ever."""
    from django.core.cache import cache

    seen = cache.get(WORKER_SEEN_KEY)
    return None if seen is None else float(seen)


def worker_seen_now() -> None:
    """Note that a worker is alive (its beat runs the reconciler every 30 s)."""
    from django.core.cache import cache

    cache.set(WORKER_SEEN_KEY, timezone.now().timestamp(), 24 * 3600)


def _settle(submission_id: int) -> None:
    """Settle the submission's status once none of its jobs is still pending."""
    # Imported here: intake registers a job handler and so imports this module.
    from submissions.intake import submission_settle

    submission_settle(submission_id=submission_id)
