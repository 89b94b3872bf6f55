"""Which handler runs each job kind: one thin module per kind in `submissions.runs`."""

from __future__ import annotations

from submissions.jobs.types import Handler
from submissions.models import Job
from submissions.runs import (
    analysis,
    intake,
    probe,
    record,
    refcheck,
    replay,
    rerecord,
    selftest,
    spot_check,
    trace,
)

HANDLERS: dict[str, Handler] = {
    Job.Kind.INTAKE: intake.intake_run,
    Job.Kind.ANALYSIS: analysis.analysis_run,
    Job.Kind.REPLAY: replay.replay_run,
    Job.Kind.TRACE: trace.trace_run,
    Job.Kind.PROBE: probe.probe_run,
    Job.Kind.RERECORD: rerecord.rerecord_run,
    Job.Kind.REFCHECK: refcheck.refcheck_run,
    Job.Kind.SELFTEST: selftest.selftest_run,
    Job.Kind.SPOT_CHECK: spot_check.spot_check_job_run,
    Job.Kind.RECORD: record.record_run,
}
