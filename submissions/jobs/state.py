"""Job and submission state transitions shared by the engine and the queue."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from submissions.jobs.types import cap_log
from submissions.jobs.workers import host_alive, process_alive
from submissions.models import Job, Submission
from submissions.redact import redact_text


def runner_id() -> str:
    """This process as HOST_NAME:pid, so a dead runner on the same host can be recognised."""
    return f"{settings.HOST_NAME}:{os.getpid()}"


def runner_is_dead(runner: str, *, alive_at: datetime | None = None) -> bool:
    """True when the runner's process is gone: on this host, by its pid; on another host,
    when none of that host's workers was seen for WORKER_STALE_SECONDS (its heartbeats), or,
    given when the runner last showed life (`alive_at`, the job's heartbeat), when that
    host's workers all beat since and none lists it among its pool processes."""
    host, _, pid = runner.rpartition(":")
    if not pid.isdigit():
        return False
    if host != settings.HOST_NAME:
        if alive_at is None:
            return host_alive(host) is False
        return process_alive(host, int(pid), alive_at=alive_at) is False
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


def heartbeat_stale(job: Job) -> bool:
    """True when a running job has not shown life for JOB_STALE_SECONDS."""
    beat = job.heartbeat_at or job.started_at
    stale_before = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS)
    return beat is None or beat < stale_before


def job_finish(job: Job, state: str, summary: str = "", *, internal: bool = False) -> None:
    """Record a final state; error-like states keep the reason. `internal`: the job ended on
    a fault of ours (a crash, a lost worker), not on the hand-in or the environment."""
    job.state = state
    job.internal = internal
    job.finished_at = timezone.now()
    if state == Job.State.PASSED:
        job.progress = 100
    if summary:
        if state in (Job.State.ERROR, Job.State.TIMED_OUT, Job.State.FAILED):
            job.error = redact_text(summary)[:2000]
        job.log = cap_log(job.log + redact_text(summary) + "\n")
    job.save()


def submission_settle(*, submission_id: int) -> None:
    """Mark a submission ready once all its jobs ended (error when intake itself failed)."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None or submission.status == Submission.Status.REJECTED:
        return
    jobs = list(submission.jobs.values_list("kind", "state", "error"))
    if any(state not in Job.FINAL_STATES for _, state, _ in jobs):
        return
    intake_failed = [
        err for kind, state, err in jobs if kind == Job.Kind.INTAKE and state != "passed"
    ]
    if intake_failed:
        status, reason = Submission.Status.ERROR, intake_failed[0] or "intake did not pass"
    else:
        status, reason = Submission.Status.READY, ""
    # Saved, not updated: the status shows in the comparison table, whose copies the save's
    # signal moves on (reviewer/cohort/table_cache.py).
    submission.status, submission.status_reason = status, reason
    submission.save(update_fields=["status", "status_reason"])
