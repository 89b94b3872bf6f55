"""The trace-verification job: re-fetch trace rows from the live stub, probe idempotency,
or re-drive the trace against the candidate's stub started inside the sandbox."""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

from django.conf import settings

from cassettes_app.checks import CheckOutcome
from cassettes_app.formats import parse_path
from cassettes_app.formats.base import TraceHop
from submissions import sandbox
from submissions.analysis import checks_store
from submissions.intake import submission_tree
from submissions.jobs import JobError, Outcome, Progress, handler
from submissions.models import Job, Recording, Submission, TraceRow
from submissions.outbound import SafeResponse
from submissions.replay import (
    _sandbox_kwargs,
    _slot,
    _work_parent,
    sandbox_limits,
    sandbox_problems,
    sandbox_run,
)
from submissions.trace_verify import (
    RowResult,
    judge_redrive,
    probe_body_from_hops,
    probe_idempotency,
    redrive_requests,
    verify_live,
)

log = logging.getLogger(__name__)

REDRIVE_PORT = 18080
SPEC_NAME = ".cr-redrive.json"

# Runs inside the sandbox with the runtime's python: starts the candidate's stub, waits for
# its port, sends the recorded requests in order, prints the answers after a nonce. Stdlib
# only; it reads its spec before the stub starts, so the stub cannot change what is sent.
DRIVER = r"""
import json, os, socket, subprocess, sys, time, urllib.error, urllib.request
spec = json.load(open(sys.argv[1]))
nonce = sys.argv[2]
os.unlink(sys.argv[1])
log = open("/tmp/cr-stub.log", "wb")
env = dict(os.environ, PORT=str(spec["port"]))
stub = subprocess.Popen(["/bin/sh", "-c", spec["command"]], env=env, stdin=subprocess.DEVNULL,
                        stdout=log, stderr=log, start_new_session=True)
deadline = time.time() + spec["start_timeout"]
def tail():
    log.flush()
    return open("/tmp/cr-stub.log", "rb").read()[-2000:].decode("utf-8", "replace")
while True:
    try:
        socket.create_connection(("127.0.0.1", spec["port"]), timeout=0.5).close()
        break
    except OSError:
        if stub.poll() is not None or time.time() > deadline:
            print(nonce + json.dumps({"error": "the stub did not start listening", "log": tail()}))
            sys.exit(0)
        time.sleep(0.1)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
answers = []
for r in spec["requests"]:
    body = r["body"].encode() if r["body"] is not None else None
    req = urllib.request.Request(r["url"], data=body, method=r["method"], headers=r["headers"])
    try:
        resp = opener.open(req, timeout=spec["timeout"])
    except urllib.error.HTTPError as err:
        resp = err
    except Exception as err:
        answers.append({"error": type(err).__name__ + ": " + str(err)[:300]})
        continue
    data = resp.read(spec["max_bytes"] + 1)
    answers.append({"status": resp.status if hasattr(resp, "status") else resp.code,
                    "headers": list(resp.headers.items())[:50],
                    "body": data[: spec["max_bytes"]].decode("utf-8", "replace"),
                    "truncated": len(data) > spec["max_bytes"]})
print(nonce + json.dumps({"answers": answers, "log": tail()}))
stub.terminate()
"""


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
    """Each trace row keeps its verification outcome."""
    by_line = {row.line: row for row in rows}
    for trace_row in TraceRow.objects.filter(submission=submission, line__in=list(by_line)):
        row = by_line[trace_row.line]
        trace_row.verification = {"mode": mode, **row.as_dict()}
        trace_row.save(update_fields=["verification"])


def redrive_in_sandbox(
    hops: list[TraceHop], tree: Path, command: str, *, path: str, slot: int
) -> tuple[CheckOutcome, list[RowResult]]:
    """Start the candidate's stub inside the sandbox and replay the trace's stub hops there."""
    base_url = f"http://127.0.0.1:{REDRIVE_PORT}"
    requests = redrive_requests(hops, base_url, max_rows=settings.TRACE_MAX_ROWS)
    if not requests:
        return CheckOutcome("trace.live_match", "skip", "the trace has no stub hop to re-drive"), []
    spec = {
        "port": REDRIVE_PORT,
        "command": command,
        "requests": requests,
        "timeout": settings.TRACE_TIMEOUT_SECONDS,
        "max_bytes": settings.TRACE_MAX_BYTES,
        "start_timeout": 20,
    }
    nonce = "CR-" + secrets.token_hex(16) + ":"
    uid = sandbox.slot_uid(slot, settings.SANDBOX_UID_BASE)
    workspace = sandbox.prepare_workspace(tree, _work_parent(), uid)
    try:
        # Written before any candidate code runs; the driver deletes it once read.
        (workspace / SPEC_NAME).write_text(json.dumps(spec))
        result = sandbox_run(
            ["python3", "-c", DRIVER, SPEC_NAME, nonce],
            workspace=workspace,
            limits=sandbox_limits(),
            slot=slot,
            allow_unsandboxed=settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
            **_sandbox_kwargs(),
        )
    finally:
        sandbox.remove_workspace(workspace)
    report = None
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith(nonce):
            report = json.loads(line[len(nonce) :])
    if report is None:
        tail = (result.stderr or result.stdout)[-1500:].decode("utf-8", "replace")
        return CheckOutcome(
            "trace.live_match",
            "error",
            f"re-drive: the driver gave no answer (exit {result.exit_code})",
            [{"message": "driver output", "output": tail, "mode": "redrive"}],
        ), []
    if "error" in report:
        return CheckOutcome(
            "trace.live_match",
            "fail",
            f"re-drive: {report['error']}",
            [{"message": "stub output", "output": report.get("log", ""), "mode": "redrive"}],
        ), []
    answers: list[SafeResponse | str] = []
    for answer in report["answers"]:
        if "error" in answer:
            answers.append(answer["error"])
        else:
            answers.append(
                SafeResponse(
                    url=base_url,
                    status=int(answer["status"]),
                    headers=[tuple(h) for h in answer["headers"]],
                    body=answer["body"].encode("utf-8"),
                    truncated=bool(answer["truncated"]),
                )
            )
    return judge_redrive(
        hops, answers, base_url=base_url, path=path, max_rows=settings.TRACE_MAX_ROWS
    )


@handler(Job.Kind.TRACE)
def trace_run(job: Job, progress: Progress) -> Outcome:
    """Verify the trace: live against the stub URL, else re-driven in the sandbox."""
    submission: Submission = job.submission
    assignment = submission.assignment
    progress.step("load trace", 5)
    path, hops = trace_hops(submission)
    if not hops:
        outcomes = [
            CheckOutcome("trace.live_match", "skip", "the submission has no trace rows"),
            CheckOutcome("trace.idempotency_enforced", "skip", "the submission has no trace rows"),
        ]
        checks_store(submission, job, outcomes)
        return Outcome(Job.State.PASSED, "no trace to verify")
    allow = list(settings.OUTBOUND_ALLOW)
    outcomes: list[CheckOutcome] = []
    live = None
    if submission.stub_url:
        progress.step("re-fetch rows", 20)
        live, rows = verify_live(
            hops,
            submission.stub_url,
            path=path,
            allow=allow,
            max_rows=settings.TRACE_MAX_ROWS,
            timeout=settings.TRACE_TIMEOUT_SECONDS,
            max_bytes=settings.TRACE_MAX_BYTES,
            id_pattern=assignment.id_pattern or r"ord_[0-9a-f]+",
        )
        _store_rows(submission, rows, "live")
        progress.step("idempotency probe", 60)
        outcomes.append(
            probe_idempotency(
                submission.stub_url,
                allow=allow,
                timeout=settings.TRACE_TIMEOUT_SECONDS,
                body=probe_body_from_hops(hops),
            )
        )
    if (live is None or live.status == "error") and assignment.stub_start_command:
        progress.step("re-drive in the sandbox", 70)
        problems = sandbox_problems()
        if problems and not settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED:
            reason = "re-drive needs the sandbox: " + "; ".join(problems)
            live = CheckOutcome("trace.live_match", "error", reason)
        else:
            with _slot() as slot:
                live, rows = redrive_in_sandbox(
                    hops,
                    submission_tree(submission),
                    assignment.stub_start_command,
                    path=path,
                    slot=slot,
                )
            _store_rows(submission, rows, "redrive")
    if live is None:
        live = CheckOutcome(
            "trace.live_match",
            "skip",
            "no stub URL was given and the assignment names no stub start command",
        )
    outcomes.insert(0, live)
    if not any(o.id == "trace.idempotency_enforced" for o in outcomes):
        outcomes.append(
            CheckOutcome(
                "trace.idempotency_enforced",
                "skip",
                "the idempotency probe needs a live stub URL",
            )
        )
    checks_store(submission, job, outcomes)
    progress.step("done", 100)
    if live.status == "error":
        raise JobError(live.summary)
    return Outcome(Job.State.PASSED, "; ".join(f"{o.id}: {o.status}" for o in outcomes))
