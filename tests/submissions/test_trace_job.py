"""The trace-verification job: live against a stub URL, or re-driven inside the sandbox."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from reviewer.ops.demo import DEMO_DIR
from submissions.assignments import assignment_values
from submissions.models import Job, TraceRow
from submissions.runs.trace import trace_hops
from tests.conftest import ingest_inline
from tests.paths import ROOT
from tests.stubs.redrive import redrive_here

REPOS = DEMO_DIR / "repos"
HANDINS = ROOT / "tests" / "fixtures" / "handins"


def _values(**overrides) -> dict:
    data = yaml.safe_load((DEMO_DIR / "assignments" / "shop-trace.yaml").read_text())
    data["replay_command"] = ""  # only the trace job here
    data.update(overrides)
    return assignment_values(data)


def _ingest(repo: str, values: dict, stub_url: str = ""):
    return ingest_inline(REPOS / repo, values, candidate=f"Trace {repo}", stub_url=stub_url)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_stub(tmp_path: Path):
    """A shop stub (a demo repository's, or a hand-in's), started on loopback from a copy."""
    procs = []

    def start(repo: str | Path) -> str:
        source = repo if isinstance(repo, Path) else REPOS / repo
        work = tmp_path / source.name
        shutil.copytree(source, work)
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "shop_stub.py"],
            cwd=work,
            env={**os.environ, "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.django_db
def test_live_stub_rows_match_and_idempotency_is_probed(live_stub, settings) -> None:
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    url = live_stub("shop-trace-good")
    # The candidate's harness filled the stub before handing in; do the same here.
    path = REPOS / "shop-trace-good" / "replay.jsonl"
    from cassettes_app.formats import parse_path

    redrive_here(parse_path(str(path)).hops, url)
    s, checks = _ingest("shop-trace-good", _values(stub_start_command=""), stub_url=url)
    assert s.jobs.get(kind=Job.Kind.TRACE).state == Job.State.PASSED
    assert checks["trace.live_match"].status == "pass", checks["trace.live_match"].summary
    probe = checks["trace.idempotency_enforced"]
    assert probe.status == "pass", probe.summary
    assert any("curl" in str(e) for e in probe.evidence)
    verified = TraceRow.objects.filter(submission=s).exclude(verification=None)
    assert verified.exists()
    assert all(r.verification["mode"] == "live" for r in verified)


@pytest.mark.django_db
def test_a_stub_that_lost_its_memory_is_reported_as_restarted(live_stub, settings) -> None:
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    url = live_stub("shop-trace-good")
    _, checks = _ingest("shop-trace-good", _values(stub_start_command=""), stub_url=url)
    live = checks["trace.live_match"]
    assert live.status == "warn"
    assert "restarted" in live.summary


@pytest.mark.django_db
def test_a_stub_without_the_409_branch_fails_the_probe(live_stub, settings) -> None:
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    url = live_stub("shop-trace-flawed")
    _, checks = _ingest("shop-trace-flawed", _values(stub_start_command=""), stub_url=url)
    probe = checks["trace.idempotency_enforced"]
    assert probe.status == "fail"
    assert "409" in probe.summary


@pytest.mark.django_db
def test_the_idempotency_probe_reads_the_assignments_id_pattern(live_stub, settings) -> None:
    """A stub issuing ORD-48213 under `id_pattern: ORD-[0-9]+` (issue 25, case 4)."""
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    url = live_stub(HANDINS / "ord-ids")
    values = _values(stub_start_command="", id_pattern="ORD-[0-9]+")
    _, checks = ingest_inline(HANDINS / "ord-ids", values, candidate="ORD ids", stub_url=url)
    probe = checks["trace.idempotency_enforced"]
    assert probe.status == "pass", probe.summary
    assert checks["trace.no_invented_ids"].status == "pass"


@pytest.mark.django_db
def test_a_loopback_stub_url_is_refused_without_the_allowlist(settings) -> None:
    settings.OUTBOUND_ALLOW = []
    s, checks = _ingest(
        "shop-trace-good", _values(stub_start_command=""), stub_url="http://127.0.0.1:8080/"
    )
    assert checks["trace.live_match"].status == "error"
    assert "loopback" in checks["trace.live_match"].summary
    assert s.jobs.get(kind=Job.Kind.TRACE).state == Job.State.ERROR


@pytest.mark.sandbox
@pytest.mark.django_db
def test_redrive_in_the_sandbox_matches_for_a_correct_stub() -> None:
    s, checks = _ingest("shop-trace-good", _values())
    live = checks["trace.live_match"]
    assert live.status == "pass", (live.summary, live.evidence[:3])
    assert live.evidence[0]["mode"] == "redrive"
    assert checks["trace.idempotency_enforced"].status == "skip"
    path, hops = trace_hops(s)
    assert path == "replay.jsonl" and hops


@pytest.mark.sandbox
@pytest.mark.django_db
def test_redrive_in_the_sandbox_finds_the_row_a_flawed_stub_answers_differently() -> None:
    _, checks = _ingest("shop-trace-flawed", _values())
    live = checks["trace.live_match"]
    assert live.status == "fail", live.summary
    mismatched = [e for e in live.evidence[1:] if e.get("outcome") == "mismatch"]
    assert mismatched


@pytest.mark.django_db
def test_a_sandbox_that_fails_to_start_keeps_the_idempotency_outcome(settings, monkeypatch) -> None:
    """bwrap failing at start (after the self-check passed) ends only the re-drive `error`."""
    from submissions.sandbox import slots
    from submissions.sandbox.types import SandboxUnavailable

    def bwrap_refuses(*args, **kwargs):
        raise SandboxUnavailable("bwrap: setting up uid map: Permission denied")

    monkeypatch.setattr(slots, "sandbox_problems", lambda: [])
    monkeypatch.setattr(slots, "run", bwrap_refuses)
    settings.OUTBOUND_ALLOW = []
    s, checks = _ingest(
        "shop-trace-good",
        _values(stub_start_command="python shop_stub.py"),
        stub_url="http://127.0.0.1:8080/",
    )
    live = checks["trace.live_match"]
    assert live.status == "error"
    assert (
        live.summary == "re-drive needs the sandbox: bwrap: setting up uid map: Permission denied"
    )
    assert live.cause == "sandbox"
    probe = checks["trace.idempotency_enforced"]
    assert probe.status == "error" and "loopback" in probe.summary
    assert probe.cause == ""  # the live stub's own answer, not the sandbox
    job = s.jobs.get(kind=Job.Kind.TRACE)
    assert job.state == Job.State.ERROR
    assert "internal error" not in job.error


@pytest.mark.django_db
def test_a_stub_in_node_with_npm_dependencies_is_not_re_driven(settings) -> None:
    """The sandbox never installs npm packages: the re-drive skips, saying so (issue 25)."""
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"  # nothing may reach the sandbox
    files = {
        p.relative_to(REPOS / "shop-trace-good").as_posix(): p.read_bytes()
        for p in (REPOS / "shop-trace-good").rglob("*")
        if p.is_file()
    }
    files["stub.js"] = b"import express from 'express';\n"
    files["package.json"] = b'{"dependencies": {"express": "^5.1.0"}}'
    files["package-lock.json"] = b"{}"
    s, checks = ingest_inline(files, _values(stub_start_command="npm start"), candidate="Node stub")
    live = checks["trace.live_match"]
    assert live.status == "skip"
    assert live.summary == (
        "not run: the stub needs npm dependencies (package.json, package-lock.json) "
        "and this sandbox installs Python dependencies only"
    )
    assert checks["env.dependencies_installed"].status == "skip"
    assert s.jobs.get(kind=Job.Kind.TRACE).state == Job.State.PASSED


@pytest.mark.django_db
def test_every_verified_row_keeps_its_outcome_in_a_few_statements(assignment, candidate) -> None:
    """A trace's rows are verified by the hundred (TRACE_MAX_ROWS): their outcomes are
    written together, not with a commit each, and only the rows verified change."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from submissions.checks.trace_live.rows import RowResult
    from submissions.models import Recording, Submission
    from submissions.runs.trace import _store_rows

    submission = Submission.objects.create(
        candidate=candidate, assignment=assignment, archive_sha256="2" * 64
    )
    trace = Recording.objects.create(
        submission=submission, path="traces/run.jsonl", role="trace", format="trace_jsonl"
    )
    TraceRow.objects.bulk_create(
        TraceRow(submission=submission, recording=trace, line=n) for n in range(1, 351)
    )
    results = [
        RowResult(n, f"t-{n}", "match" if n % 7 else "mismatch", [{"field": "total"}] * (n % 2))
        for n in range(1, 301)
    ]
    with CaptureQueriesContext(connection) as queries:
        _store_rows(submission, results, "redrive")
    assert len(queries) < 10  # a save per row was 301
    stored = dict(submission.trace_rows.values_list("line", "verification"))
    for n in range(1, 301):
        assert stored[n] == {"mode": "redrive", **results[n - 1].as_dict()}
    assert all(stored[n] is None for n in range(301, 351))  # not verified: untouched
