"""A submission's jobs run here or waited for: what `ingest`, `rerun` and `rerecord` do with
`--inline` and `--wait`, and what tests do to judge a hand-in without a worker."""

from __future__ import annotations

import time
from collections.abc import Callable

from submissions.jobs.engine import job_execute
from submissions.models import Job, Submission

Report = Callable[[str], None]


class JobsPending(Exception):
    """`jobs_wait` ran out of time with jobs not ended."""


def _quiet(line: str) -> None:
    pass


def jobs_run_inline(*, submission: Submission, report: Report = _quiet) -> None:
    """Run the submission's queued jobs in this process, oldest first, until none is left
    (a job may queue follow-up jobs, which run too); each start and end goes to `report`."""
    while job := submission.jobs.filter(state=Job.State.QUEUED).order_by("pk").first():
        report(f"running {job.kind} job {job.pk}")
        state = job_execute(job_id=job.pk)
        report(f"{job.kind} job {job.pk}: {state}")


def jobs_wait(
    *, submission: Submission, timeout: float, report: Report = _quiet, poll: float = 0.5
) -> None:
    """Poll the submission's jobs until all have ended, each change of state, progress or
    step going to `report`; raises JobsPending after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    seen: dict[int, tuple[str, int, str]] = {}
    while True:
        jobs = list(submission.jobs.order_by("pk"))
        for job in jobs:
            now = (job.state, job.progress, job.step)
            if seen.get(job.pk) != now:
                seen[job.pk] = now
                line = f"{job.kind} job {job.pk}: {job.state} {job.progress}% {job.step}"
                if job.error:
                    line += f" — {job.error}"
                report(line)
        if jobs and all(job.is_final for job in jobs):
            return
        if time.monotonic() > deadline:
            raise JobsPending(
                f"jobs still pending after {timeout:.0f} s: is a worker running? "
                "(start one with `make worker`, or use --inline)"
            )
        time.sleep(poll)
