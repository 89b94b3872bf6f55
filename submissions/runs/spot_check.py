"""The spot-check job: re-ask the recordings a reviewer picked (or sampled) against the
team's model endpoint, within its caps; the domain is `submissions.checks.spot_check`."""

from __future__ import annotations

from submissions.checks.spot_check import spot_check_ask, spot_check_run
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import Job, SpotCheck


def spot_check_job_run(job: Job, progress: Progress) -> Outcome:
    """Run one SpotCheck row's re-asks; `error` when the check could not run."""
    spot_pk = (job.params or {}).get("spot_check")
    spot = (
        SpotCheck.objects.filter(pk=spot_pk, submission=job.submission).first()
        if isinstance(spot_pk, int)
        else None
    )
    if spot is None:
        raise JobError("the spot check this job runs no longer exists")
    if spot.status != SpotCheck.Status.QUEUED:
        # A redelivery after the calls were made: never spend twice.
        return Outcome(Job.State.PASSED, f"already ran: {spot.summary}")

    def on_sample(done: int, total: int) -> None:
        progress.step(f"re-ask ({done + 1} of {total})", 5 + 90 * done // max(total, 1))

    progress.step("re-ask", 5)
    try:
        outcome = spot_check_run(
            submission=job.submission, ask=spot_check_ask(spot), job=job, spot=spot,
            on_sample=on_sample,
        )  # fmt: skip
    except Exception as exc:
        SpotCheck.objects.filter(pk=spot.pk).update(
            status=SpotCheck.Status.ERROR, summary=f"{type(exc).__name__}"
        )
        raise
    progress.step("done", 100)
    if outcome.status == "error":
        return Outcome(Job.State.ERROR, outcome.summary)
    return Outcome(Job.State.PASSED, f"{outcome.status}: {outcome.summary}")
