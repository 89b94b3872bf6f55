"""The trace-verification job: re-fetch trace rows from the live stub, probe idempotency,
or re-drive the trace against the candidate's stub started inside the sandbox."""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

from django.conf import settings
from django.db import transaction

from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.catalog import IDEMPOTENCY_ENFORCED, LIVE_MATCH
from cassettes_app.config import DEFAULT_ID_PATTERN
from cassettes_app.formats import parse_path
from cassettes_app.parsed import TraceHop
from submissions.checks.environment import env_dependencies_installed, env_dependencies_unmet
from submissions.checks.store import checks_store
from submissions.checks.trace_live.idempotency import (
    probe_body_from_hops,
    trace_idempotency_enforced,
)
from submissions.checks.trace_live.live import trace_live_match
from submissions.checks.trace_live.redrive import (
    REDRIVE_BUDGET_SECONDS,
    answers_from_driver,
    redrive_requests,
    trace_live_match_from_redrive,
)
from submissions.checks.trace_live.rows import GIVE_UP_AFTER, RowResult
from submissions.deps.ecosystems import unmet_need
from submissions.deps.prepare import dependencies
from submissions.intake.trees import submission_tree
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import CheckResult, Job, Recording, Submission, TraceRow
from submissions.sandbox.slots import Slot, sandbox_slot
from submissions.sandbox.types import RUNTIME_FILES, SandboxUnavailable

log = logging.getLogger(__name__)

REDRIVE_PORT = 18080
SPEC_NAME = ".cr-redrive.json"
# Rows per UPDATE statement when the verifications are stored (a CASE per row).
_UPDATE_BATCH = 100

# Runs inside the sandbox; see the file's docstring.
DRIVER = (RUNTIME_FILES / "redrive_driver.py").read_text(encoding="utf-8")


def trace_hops(submission: Submission) -> tuple[str, list[TraceHop]]:
    """The trace file's hops, parsed again from the tree (in memory only, never stored)."""
    rec = (
        Recording.objects.filter(submission=submission, role=Recording.Role.TRACE)
        .order_by("path")
        .first()
    )
    if rec is None:
        return "", []
    tree = submission_tree(submission)
    result = parse_path(str(tree / rec.path), display_path=rec.path)
    return rec.path, result.hops


def _store_rows(submission: Submission, rows: list[RowResult], mode: str) -> None:
    """Each trace row keeps its verification outcome, all of them in one transaction: a
    save per row was a commit per row (500 rows: 0.1 s on SQLite, 0.3-0.5 s on PostgreSQL)."""
    by_line = {row.line: row for row in rows}
    stored = list(
        TraceRow.objects.filter(submission=submission, line__in=list(by_line)).only("pk", "line")
    )
    for trace_row in stored:
        trace_row.verification = {"mode": mode, **by_line[trace_row.line].as_dict()}
    with transaction.atomic():
        TraceRow.objects.bulk_update(stored, ["verification"], batch_size=_UPDATE_BATCH)


def redrive_in_sandbox(
    hops: list[TraceHop], tree: Path, command: str, *, path: str, slot: Slot, id_pattern: str
) -> tuple[CheckOutcome, list[RowResult]]:
    """Start the candidate's stub inside the sandbox and replay the trace's stub hops there."""
    base_url = f"http://127.0.0.1:{REDRIVE_PORT}"
    requests = redrive_requests(hops, base_url, max_rows=settings.TRACE_MAX_ROWS)
    if not requests:
        return CheckOutcome(LIVE_MATCH, "skip", "the trace has no stub hop to re-drive"), []
    spec = {
        "port": REDRIVE_PORT,
        "command": command,
        "requests": requests,
        "timeout": settings.TRACE_TIMEOUT_SECONDS,
        "max_bytes": settings.TRACE_MAX_BYTES,
        "start_timeout": 20,
        "give_up_after": GIVE_UP_AFTER,
        "budget": REDRIVE_BUDGET_SECONDS,
    }
    nonce = "CR-" + secrets.token_hex(16) + ":"
    with slot.workspace(tree) as workspace:
        # Written before any candidate code runs; the driver deletes it once read.
        (workspace / SPEC_NAME).write_text(json.dumps(spec))
        result = slot.run(
            [*slot.trusted_python, "-c", DRIVER, SPEC_NAME, nonce], workspace=workspace
        )
    report = None
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith(nonce):
            report = json.loads(line[len(nonce) :])
    if report is None:
        tail = (result.stderr or result.stdout)[-1500:].decode("utf-8", "replace")
        return CheckOutcome(
            LIVE_MATCH,
            "error",
            f"re-drive: the driver gave no answer (exit {result.exit_code})",
            [{"message": "driver output", "output": tail, "mode": "redrive"}],
        ), []
    if "error" in report:
        return CheckOutcome(
            LIVE_MATCH,
            "fail",
            f"re-drive: {report['error']}",
            [{"message": "stub output", "output": report.get("log", ""), "mode": "redrive"}],
        ), []
    answers = answers_from_driver(report["answers"], base_url)
    return trace_live_match_from_redrive(
        hops,
        answers,
        base_url=base_url,
        path=path,
        max_rows=settings.TRACE_MAX_ROWS,
        id_pattern=id_pattern,
    )


def _redrive(
    submission: Submission,
    hops: list[TraceHop],
    path: str,
    id_pattern: str,
    progress: Progress,
    outcomes: list[CheckOutcome],
) -> CheckOutcome:
    """trace.live_match from the stub started in the sandbox (env.dependencies_installed is
    added to `outcomes`); each row keeps its re-drive result."""
    command = submission.assignment.stub_start_command
    tree = submission_tree(submission)
    if unmet := unmet_need(tree, command):  # a stub in Node, say: not started
        outcomes.append(env_dependencies_unmet(unmet))
        return skip(LIVE_MATCH, unmet.reason("the stub"))
    # A sandbox that cannot start ends only this check `error`: the idempotency probe's
    # outcome, already computed against the live stub, is kept.
    try:
        with (
            sandbox_slot() as slot,
            dependencies(tree, slot, lambda label: progress.step(label, 70)) as prepared,
        ):
            outcomes.append(env_dependencies_installed(prepared))
            if prepared.blocker:
                return CheckOutcome(LIVE_MATCH, "error", prepared.blocker)
            if prepared.python_refused:
                return CheckOutcome(LIVE_MATCH, "skip", prepared.python_refused)
            live, rows = redrive_in_sandbox(
                hops,
                tree,
                command,
                path=path,
                slot=slot.with_site(prepared.site),
                id_pattern=id_pattern,
            )
    except SandboxUnavailable as exc:
        summary = f"re-drive needs the sandbox: {exc.cause}"
        return CheckOutcome(LIVE_MATCH, "error", summary, cause=CheckResult.Cause.SANDBOX)
    _store_rows(submission, rows, "redrive")
    return live


def trace_run(job: Job, progress: Progress) -> Outcome:
    """Verify the trace: live against the stub URL, else re-driven in the sandbox."""
    submission: Submission = job.submission
    assignment = submission.assignment
    progress.step("load trace", 5)
    path, hops = trace_hops(submission)
    if not hops:
        skipped = [
            CheckOutcome(LIVE_MATCH, "skip", "the submission has no trace rows"),
            CheckOutcome(IDEMPOTENCY_ENFORCED, "skip", "the submission has no trace rows"),
        ]
        checks_store(submission, job, skipped)
        return Outcome(Job.State.PASSED, "no trace to verify")
    allow = list(settings.OUTBOUND_ALLOW)
    # Every consumer reads the ids the assignment's stub issues (ORD-48213, ord_9f2c, ...).
    id_pattern = assignment.id_pattern or DEFAULT_ID_PATTERN
    outcomes: list[CheckOutcome] = []
    live = None
    if submission.stub_url:
        progress.step("re-fetch rows", 20)
        live, rows = trace_live_match(
            hops,
            submission.stub_url,
            path=path,
            allow=allow,
            max_rows=settings.TRACE_MAX_ROWS,
            timeout=settings.TRACE_TIMEOUT_SECONDS,
            max_bytes=settings.TRACE_MAX_BYTES,
            id_pattern=id_pattern,
        )
        _store_rows(submission, rows, "live")
        progress.step("idempotency probe", 60)
        outcomes.append(
            trace_idempotency_enforced(
                submission.stub_url,
                allow=allow,
                timeout=settings.TRACE_TIMEOUT_SECONDS,
                body=probe_body_from_hops(hops),
                id_pattern=id_pattern,
            )
        )
    if (live is None or live.status == "error") and assignment.stub_start_command:
        progress.step("re-drive in the sandbox", 70)
        live = _redrive(submission, hops, path, id_pattern, progress, outcomes)
    if live is None:
        live = CheckOutcome(
            LIVE_MATCH,
            "skip",
            "no stub URL was given and the assignment names no stub start command",
        )
    outcomes.insert(0, live)
    if not any(o.id == IDEMPOTENCY_ENFORCED for o in outcomes):
        outcomes.append(
            CheckOutcome(
                IDEMPOTENCY_ENFORCED,
                "skip",
                "the idempotency probe needs a live stub URL",
            )
        )
    checks_store(submission, job, outcomes)
    progress.step("done", 100)
    if live.status == "error":
        raise JobError(live.summary)
    return Outcome(Job.State.PASSED, "; ".join(f"{o.id}: {o.status}" for o in outcomes))
