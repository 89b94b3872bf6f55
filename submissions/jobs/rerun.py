"""Running a submission's jobs again: after the sandbox was installed, the assignment
changed, or a job failed for a reason outside the hand-in (a network error, a busy slot).

Earlier jobs stay as they were (their logs are the history); the new jobs' results replace
the checks they write, and the submission settles again when they end.
"""

from __future__ import annotations

from django.db import transaction

from submissions.jobs.queue import job_create
from submissions.models import Job, Submission, TraceRow

# What `--kind` / the page's choice may name, and the job kind each runs.
RERUN_KINDS = {
    "all": Job.Kind.ANALYSIS,  # analysis queues replay, trace and probe after itself
    "replay": Job.Kind.REPLAY,
    "trace": Job.Kind.TRACE,
    "probe": Job.Kind.PROBE,
}


class RerunRefused(Exception):
    """The jobs cannot run again now; the message says why."""


def _why_not(submission: Submission, kind: str) -> str | None:
    """Why a job of `kind` cannot run for this submission, or None."""
    assignment = submission.assignment
    if kind == Job.Kind.REPLAY and not assignment.replay_command.strip():
        return "the assignment has no replay command"
    if kind == Job.Kind.TRACE:
        if not TraceRow.objects.filter(submission=submission).exists():
            return "the submission has no trace rows"
        if not (submission.stub_url or assignment.stub_start_command):
            return "no stub URL was given and the assignment names no stub start command"
    if kind == Job.Kind.PROBE and not assignment.service_start_command.strip():
        return "the assignment names no service start command"
    return None


def submission_rerun(*, submission: Submission, what: str = "all") -> Job:
    """Queue `what` (a RERUN_KINDS key) again for a submission; RerunRefused says why not."""
    if what not in RERUN_KINDS:
        raise RerunRefused(f"unknown job kind {what!r} (one of {', '.join(RERUN_KINDS)})")
    kind = RERUN_KINDS[what]
    with transaction.atomic():
        # The row lock orders two re-runs of one submission: the second sees the first's jobs.
        submission = Submission.objects.select_for_update().get(pk=submission.pk)
        if submission.status == Submission.Status.REJECTED:
            raise RerunRefused("the archive was rejected at upload: there is nothing to run")
        pending = submission.jobs.exclude(state__in=Job.FINAL_STATES).count()
        if pending:
            raise RerunRefused(
                f"{pending} job{'s' if pending != 1 else ''} still queued or running"
            )
        if (why := _why_not(submission, kind)) is not None:
            raise RerunRefused(why)
        # Saved, not updated: the comparison table shows the status (its signal moves it).
        submission.status, submission.status_reason = Submission.Status.PROCESSING, ""
        submission.save(update_fields=["status", "status_reason"])
        return job_create(submission=submission, kind=kind, params={"rerun": True})
