"""The service probe job: start the candidate's ticket service in the sandbox and probe it.

With no network in the sandbox the model is unavailable by construction, so every answer
shows how the service degrades. A stdlib driver inside the same sandbox
(`submissions/sandbox/runtime/probe_driver.py`) starts the service (PORT set), waits for its
port, sends each built-in log line twice, watches the ledger grow after every request, stops
the service and prints what it saw after a random nonce. The checks it writes are judged in
`submissions.checks.service`.
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

from cassettes_app.checks import skip
from submissions.checks.environment import env_dependencies_installed, env_dependencies_unmet
from submissions.checks.probe_exchanges import (
    ProbeConfig,
    ProbeReport,
    build_requests,
    parse_driver_output,
)
from submissions.checks.service import PROBE_CHECKS, service_checks, service_error_outcomes
from submissions.checks.store import checks_store
from submissions.deps.ecosystems import unmet_need
from submissions.deps.prepare import dependencies
from submissions.intake.trees import submission_tree
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import CheckResult, Job, Submission
from submissions.redact import redact_text
from submissions.sandbox.slots import (
    Slot,
    sandbox_slot,
)
from submissions.sandbox.types import RUNTIME_FILES, SandboxUnavailable

log = logging.getLogger(__name__)


SPEC_NAME = ".cr-probe.json"


# Runs inside the sandbox; see the file's docstring.
DRIVER = (RUNTIME_FILES / "probe_driver.py").read_text(encoding="utf-8")


class ProbeDriverError(RuntimeError):
    """The driver printed nothing usable; `output` is its (redacted) tail."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def probe_in_sandbox(tree: Path, config: ProbeConfig, *, slot: Slot) -> ProbeReport:
    """Start the service in a fresh copy of the tree and probe it.

    Raises sandbox.SandboxUnavailable when the sandbox cannot start, ProbeDriverError when
    the driver reported nothing at all.
    """
    requests = build_requests(config)
    limits = slot.limits
    nonce = "CR-" + secrets.token_hex(16) + ":"
    output = limits.output_bytes
    budget = max(10.0, min(config.probe_seconds, limits.wall_seconds - config.start_timeout - 15))
    spec = {
        "nonce": nonce,
        "port": config.port,
        "command": config.command,
        "requests": requests,
        "ledgers": list(config.ledger_globs),
        "start_timeout": config.start_timeout,
        "timeout": config.request_timeout,
        "probe_seconds": budget,
        "settle": config.settle_seconds,
        "body_max": min(256 * 1024, output // 4),
        "body_max_total": output // 2,
        "ledger_max_bytes": output // 5,
        "log_tail": 4000,
    }
    with slot.workspace(tree) as workspace:
        # Written before any candidate code runs; the driver deletes it once read.
        (workspace / SPEC_NAME).write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        result = slot.run([*slot.trusted_python, "-c", DRIVER, SPEC_NAME], workspace=workspace)
    report = parse_driver_output(result.stdout, nonce, config, requests)
    if report is None:
        tail = (result.stderr or result.stdout)[-1500:].decode("utf-8", "replace")
        why = f", {result.killed_reason}" if result.killed_reason else ""
        raise ProbeDriverError(
            f"the probe driver gave no answer (exit {result.exit_code}{why})", redact_text(tail)
        )
    report.run = result
    if result.stdout_truncated:
        report.complete = False
    return report


def probe_run(job: Job, progress: Progress) -> Outcome:
    """Start the candidate's service in the sandbox, probe it, write the service checks."""
    submission: Submission = job.submission
    assignment = submission.assignment
    if not assignment.service_start_command.strip():
        reason = "the assignment names no service start command"
        checks_store(submission, job, [skip(cid, reason) for cid in PROBE_CHECKS])
        return Outcome(Job.State.PASSED, reason)
    config = ProbeConfig.from_assignment(assignment)
    tree = submission_tree(submission)
    if unmet := unmet_need(tree, config.command):  # a service in Node, say: not started
        reason = unmet.reason("the service")
        skipped = [skip(cid, reason) for cid in PROBE_CHECKS]
        checks_store(submission, job, [env_dependencies_unmet(unmet), *skipped])
        return Outcome(Job.State.PASSED, reason)
    try:
        with (
            sandbox_slot() as slot,
            dependencies(tree, slot, lambda label: progress.step(label, 5)) as prepared,
        ):
            env_check = env_dependencies_installed(prepared)
            if prepared.blocker:
                outcomes = [env_check, *service_error_outcomes(prepared.blocker)]
                checks_store(submission, job, outcomes)
                return Outcome(Job.State.FAILED, prepared.blocker)
            if prepared.python_refused:  # the setting says: skip, with the reason
                skipped = [skip(cid, prepared.python_refused) for cid in PROBE_CHECKS]
                checks_store(submission, job, [env_check, *skipped])
                return Outcome(Job.State.PASSED, prepared.python_refused)
            progress.step("start the service", 10)
            report = probe_in_sandbox(tree, config, slot=slot.with_site(prepared.site))
    except SandboxUnavailable as exc:
        reason = f"the service probe needs the sandbox: {exc.cause}"
        outcomes = service_error_outcomes(reason, cause=CheckResult.Cause.SANDBOX)
        checks_store(submission, job, outcomes)
        raise JobError(reason) from None
    except ProbeDriverError as exc:
        checks_store(
            submission,
            job,
            service_error_outcomes(str(exc), [{"message": "driver output", "output": exc.output}]),
        )
        raise JobError(str(exc)) from None
    progress.step("judge", 90)
    outcomes = service_checks(report)
    checks_store(submission, job, [env_check, *outcomes])
    summary = "; ".join(f"{o.id}: {o.status}" for o in outcomes)
    progress.log(f"probe of `{config.command}` on port {config.port}: {summary}")
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, summary)
