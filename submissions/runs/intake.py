"""The intake job: make sure the tree is unpacked on this worker, describe it, queue analysis."""

from __future__ import annotations

from submissions.intake.archive import ArchiveRejected
from submissions.intake.trees import submission_tree
from submissions.jobs.queue import job_create
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import Job, Submission


def intake_run(job: Job, progress: Progress) -> Outcome:
    """Make sure the tree is unpacked on this worker and describe it."""
    submission = job.submission
    progress.step("unpack", 10)
    try:
        tree = submission_tree(submission)
    except ArchiveRejected as exc:
        raise JobError(f"the stored archive no longer unpacks: {exc}") from exc
    except FileNotFoundError as exc:
        raise JobError(f"the stored archive is missing: {exc}") from exc
    progress.step("inventory", 60)
    files = 0
    total = 0
    for path in tree.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            total += path.stat().st_size
    progress.log(f"unpacked {files} files, {total} bytes ({submission.archive_format})")
    # Saved, not updated: the comparison table shows the status (its signal moves it).
    submission.file_count, submission.unpacked_bytes = files, total
    submission.status = Submission.Status.PROCESSING
    submission.save(update_fields=["file_count", "unpacked_bytes", "status"])
    # A redelivered intake must not queue a second analysis.
    if not submission.jobs.filter(kind=Job.Kind.ANALYSIS).exists():
        job_create(submission=submission, kind=Job.Kind.ANALYSIS)
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, f"{files} files unpacked")
