"""A job kind that only the test-suite creates, to drive real workers through faults."""

from __future__ import annotations

import os
import signal
import time

from submissions.jobs.types import JobError, JobFailed, Outcome, Progress
from submissions.models import Job


def selftest_run(job: Job, progress: Progress) -> Outcome:
    """Do what the job's params ask: pass, fail, error, sleep, or kill this worker process."""
    action = job.params.get("action", "pass")
    progress.step(action, 50)
    if action == "kill":
        # Emulates an OOM kill of the pool child: no cleanup, no exception, no ack.
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "sleep":
        time.sleep(float(job.params.get("seconds", 1)))
    if action == "fail":
        raise JobFailed("asked to fail")
    if action == "error":
        raise JobError("asked to error")
    return Outcome(Job.State.PASSED, f"selftest {action}")
