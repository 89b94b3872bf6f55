"""The record-pass job: the hand-in's record command in the sandbox behind the model proxy;
the domain is `submissions.intake.record_pass`. What the pass wrote is queued for comparison
as a re-record (its own `rerecord` job)."""

from __future__ import annotations

from submissions.deps.prepare import dependencies
from submissions.intake.record_pass import RecordPassRefused, record_pass_run
from submissions.intake.trees import submission_tree
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import Job
from submissions.sandbox.slots import sandbox_slot
from submissions.sandbox.types import SandboxUnavailable


def record_run(job: Job, progress: Progress) -> Outcome:
    """Run one record pass; `error` when it could not run (nothing is spent then)."""
    submission = job.submission
    params = job.params or {}
    tree = submission_tree(submission)
    try:
        with (
            sandbox_slot() as slot,
            dependencies(tree, slot, lambda label: progress.step(label, 5)) as prepared,
        ):
            if prepared.blocker:
                raise JobError(f"dependencies could not be installed: {prepared.blocker}")
            progress.step("record behind the model proxy", 20)
            result = record_pass_run(
                submission=submission,
                tree=tree,
                slot=slot.with_site(prepared.site),
                endpoint=params.get("endpoint"),
            )
    except SandboxUnavailable as exc:
        raise JobError(f"the record pass needs the sandbox: {exc.cause}") from None
    except RecordPassRefused as exc:
        raise JobError(str(exc)) from None
    progress.log(f"record command exit {result.exit_code}; {result.calls} model calls")
    progress.log(f"its output, last lines:\n{result.output_tail}")
    for finding in result.findings:
        progress.log(finding)
    progress.step("done", 100)
    wrote = f"{len(result.written)} recordings written" if result.written else "nothing written"
    summary = f"{result.calls} calls, {result.tokens} tokens; {wrote}"
    if result.findings:
        summary += "; " + "; ".join(result.findings)
    return Outcome(Job.State.PASSED, summary)
