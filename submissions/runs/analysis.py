"""The analysis job: discover and parse every recording, store it, and write static checks.

A thin handler: the analyser (`cassettes_app.analysis`) parses the tree and computes every
static check from the assignment's settings (`analysis_config`, plain values);
`submissions.recordings` stores what it parsed; `checks_store` writes the outcomes; the
cohort checks compare the recorded response ids and the source fingerprints with the
assignment's other hand-ins.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from django.conf import settings

from cassettes_app.analysis import Analyzer
from submissions.assignments import analysis_config
from submissions.checks.cohort import cohort_recordings_unique
from submissions.checks.similarity import cohort_code_similarity
from submissions.checks.store import checks_store
from submissions.intake.provenance import submission_history
from submissions.intake.trees import submission_tree
from submissions.jobs.queue import job_create
from submissions.jobs.types import Outcome, Progress
from submissions.models import Job, Submission, TraceRow
from submissions.recordings import (
    findings_store,
    fingerprints_store,
    recordings_store,
    unlogged_queries,
)


def analysis_run(job: Job, progress: Progress) -> Outcome:
    """Parse every recording of the submission, store it, and write the static checks."""
    with unlogged_queries(), young_collections_only():
        return _analysis(job, progress)


# The largest generation-2 threshold the collector takes (a C int).
_NEVER = 2**31 - 1


@contextlib.contextmanager
def young_collections_only() -> Iterator[None]:
    """Run the block with the cyclic collector's young generations only.

    A full collection walks every object the process holds; the analysis keeps a little of
    every file it reads (its facts, its messages' keys), and it ran one each time that had
    grown by a quarter, none of them finding anything to free: 0.4 s of 10,000 recordings'
    analysis, 0.9 s of 20,000. Young collections still free the cycles that die young (all
    the cycles it ever made, as measured); the process's thresholds come back after.
    """
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


def _analysis(job: Job, progress: Progress) -> Outcome:
    submission = job.submission
    progress.step("unpack", 2)
    tree = submission_tree(submission)
    analyzer = Analyzer(tree, analysis_config(submission), settings.ANALYSIS_PROCESSES)
    stored = recordings_store(
        submission=submission, analyzer=analyzer, step=progress.step, log=progress.log
    )
    progress.step("fingerprints", 85)
    sources = fingerprints_store(submission=submission, root=tree)
    progress.log(f"fingerprinted {sources} source files")
    progress.step("checks", 90)
    outcomes = analyzer.checks(submission_history(submission, analyzer.recording_paths))
    checks_store(submission, job, outcomes)
    # After the ids are stored (and committed): the cohort check reads them from the table.
    outcomes.append(cohort_recordings_unique(submission=submission, job=job))
    outcomes.append(cohort_code_similarity(submission=submission, job=job))
    findings_store(submission=submission, job=job, findings=analyzer.findings)
    _next_jobs(submission, job)
    failing = sum(1 for o in outcomes if o.status == "fail")
    summary = (
        f"{stored.files} files, {stored.secret_hits} secret hits, {len(outcomes)} checks, "
        f"{failing} failing"
    )
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, summary)


def _next_jobs(submission: Submission, job: Job) -> None:
    """Queue what follows this analysis, once: a redelivered analysis must not queue twice,
    and a re-run analysis queues its own followers (jobs made before it do not count)."""
    assignment = submission.assignment
    existing = set(submission.jobs.filter(pk__gt=job.pk).values_list("kind", flat=True))
    if assignment.replay_command and Job.Kind.REPLAY not in existing:
        job_create(submission=submission, kind=Job.Kind.REPLAY)
    has_trace = TraceRow.objects.filter(submission=submission).exists()
    verifiable = submission.stub_url or assignment.stub_start_command
    if has_trace and verifiable and Job.Kind.TRACE not in existing:
        job_create(submission=submission, kind=Job.Kind.TRACE)
    if assignment.service_start_command and Job.Kind.PROBE not in existing:
        job_create(submission=submission, kind=Job.Kind.PROBE)
