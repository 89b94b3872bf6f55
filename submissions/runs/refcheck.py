"""The *Check again* job: fetch a repository submission's ref again, say whether it moved.

It judges nothing anew: the commit judged and its checks stay; the submission records when
the ref was checked, where it points now and whether it is the same, moved on or rewritten.
The access token, when the repository needs one, is the sealed one kept on the submission:
a job's params and log never hold it.
"""

from __future__ import annotations

from submissions.intake.repository import ref_check
from submissions.jobs.types import Outcome, Progress
from submissions.models import Job, Submission


def refcheck_run(job: Job, progress: Progress) -> Outcome:
    """Fetch the ref again; passed when it could be read (whatever it found), else failed."""
    progress.step("fetch the ref again", 10)
    submission = ref_check(job.submission)
    state = (
        Job.State.FAILED
        if submission.ref_check_state == Submission.RefState.FAILED
        else (Job.State.PASSED)
    )
    return Outcome(
        state, f"{submission.get_ref_check_state_display()}: {submission.ref_check_detail}"
    )
