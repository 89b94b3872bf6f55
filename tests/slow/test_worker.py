"""A real Celery worker process runs jobs, on Redis and on the embedded filesystem broker."""

from __future__ import annotations

import io
import json
import random
import subprocess
import time
from pathlib import Path

import pytest

from submissions.intake.upload import submission_create
from submissions.jobs.queue import job_create
from submissions.models import Job
from tests.workers import wait_final

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]


@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_real_worker_runs_an_intake_job_to_passed(
    start_worker, broker: str, assignment, candidate, small_zip
) -> None:
    worker = start_worker(broker)
    result = submission_create(
        upload=io.BytesIO(small_zip),
        filename="r.zip",
        candidate=candidate,
        assignment=assignment,
    )
    job = wait_final(result.submission.jobs.get(), worker)
    assert job.state == Job.State.PASSED, job.error
    assert job.attempts == 1
    # Intake queues the analysis job, which the same worker runs next.
    analysis = wait_final(result.submission.jobs.get(kind=Job.Kind.ANALYSIS), worker)
    assert analysis.state == Job.State.PASSED, analysis.error
    # The worker settles the submission just after storing the job's end.
    deadline = time.monotonic() + 10
    while result.submission.status != "ready" and time.monotonic() < deadline:
        time.sleep(0.05)
        result.submission.refresh_from_db()
    assert result.submission.status == "ready"
    assert result.submission.checks.filter(check_id="cassettes.keys_match").exists()
    # The worker published its heartbeat (host, pid, its sandbox's report) at start.
    from submissions.jobs.workers import fresh_workers

    # (Workers other tests started on this database may still beat: this one must too.)
    assert worker.pid in [w.pid for w in fresh_workers()]


def _kill_job(assignment, candidate, small_zip) -> Job:
    submission = submission_create(
        upload=io.BytesIO(small_zip),
        filename="r.zip",
        candidate=candidate,
        assignment=assignment,
    ).submission
    submission.jobs.update(state=Job.State.PASSED)  # only the crashing job matters here
    return job_create(submission=submission, kind=Job.Kind.SELFTEST, params={"action": "kill"})


def test_killed_worker_child_is_redelivered_then_ends_in_error_on_redis(
    start_worker, assignment, candidate, small_zip
) -> None:
    worker = start_worker("redis")
    job = wait_final(_kill_job(assignment, candidate, small_zip), worker, timeout=90)
    assert job.state == Job.State.ERROR
    assert job.attempts == 3
    assert "worker lost 3 times" in job.error
    assert worker.poll() is None  # the worker survived and replaced its child


def test_killed_worker_child_is_rescued_by_the_reconciler_on_the_embedded_broker(
    start_worker, assignment, candidate, small_zip
) -> None:
    from submissions.jobs.queue import jobs_reconcile

    # kombu's filesystem transport drops a message once fetched, so a killed child's message
    # is never redelivered: the reconciler (run by the worker's beat every 30 s) recovers it.
    worker = start_worker("filesystem")
    job = _kill_job(assignment, candidate, small_zip)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_final:
            break
        jobs_reconcile()
        time.sleep(0.5)
    assert job.state == Job.State.ERROR, Path(worker.log_path).read_text()[-3000:]
    assert job.attempts == 3
    assert "worker lost 3 times" in job.error
    assert worker.poll() is None


def test_two_workers_and_an_uploader_lose_no_job_on_the_embedded_default(
    start_worker, assignment, small_zip, settings
) -> None:
    """Issue 18: with two worker processes writing beside the uploads (SQLite's one writer at
    a time, on the embedded default), every job ends passed and no one meets a locked
    database."""
    from submissions.models import Candidate

    workers = [start_worker("filesystem"), start_worker("filesystem")]
    submissions = []
    for i in range(20):
        person = Candidate.objects.create(name=f"Concurrent {i}")
        upload = submission_create(
            upload=io.BytesIO(small_zip), filename="r.zip", candidate=person, assignment=assignment
        )
        submissions.append(upload.submission)
    deadline = time.monotonic() + 240
    pending = Job.objects.filter(submission__in=submissions).exclude(state__in=Job.FINAL_STATES)
    while (pending.exists() or Job.objects.filter(submission__in=submissions).count() < 40) and (
        time.monotonic() < deadline
    ):
        assert all(w.poll() is None for w in workers), "a worker died"
        time.sleep(0.3)
    logs = "\n".join(Path(w.log_path).read_text() for w in workers)  # type: ignore[attr-defined]
    states = sorted(Job.objects.filter(submission__in=submissions).values_list("state", flat=True))
    assert states == ["passed"] * 40, (states, logs[-3000:])
    assert "database is locked" not in logs


def test_the_one_process_demo_serves_read_only_pages_to_visitors(tmp_path: Path) -> None:
    """scripts/demo-server.sh, as the demo container runs it: SQLite, the filesystem broker,
    DEMO_MODE; anonymous visitors read the seeded cohort, a write is refused."""
    import os
    import signal
    import socket
    import urllib.error
    import urllib.request

    from tests.paths import ROOT

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        DATA_DIR=str(tmp_path / "demo"), PORT=str(port), DJANGO_SETTINGS_MODULE="reviewer.settings"
    )
    log = (tmp_path / "demo.log").open("w")
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "demo-server.sh")],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        page = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                page = urllib.request.urlopen(f"{base}/", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "Public read-only demo" in page, (tmp_path / "demo.log").read_text()[-3000:]
        assert "cassette" in page.lower()  # the seeded cohort, read as the demo viewer
        request = urllib.request.Request(f"{base}/logout/", data=b"", method="POST")
        try:
            urllib.request.urlopen(request, timeout=5)
            refused = None
        except urllib.error.HTTPError as exc:
            refused = exc.code
        assert refused == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _big_cassette(i: int, pad: int) -> str:
    from cassettes_app.keys import recompute_key

    request = {
        "model": "gpt-4o-mini-2024-07-18",
        "messages": [
            {"role": "user", "content": f"ticket {i}: {random.Random(i).randbytes(pad).hex()}"}
        ],
        "temperature": 0,
    }
    response = {
        "id": f"chatcmpl-9xYz{i:04d}AbCdEfGh",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": f"triaged {i}"}}],
    }
    key = recompute_key(request, ("user", "request_id", "id", "created"))
    return json.dumps({"key": key, "request": request, "response": response})


def test_a_large_tree_is_parsed_by_a_pool_inside_a_real_worker(
    start_worker, assignment, candidate
) -> None:
    """The prefork child starts its own (spawned) pool, and stores what one process would."""
    from cassettes_app.analysis import front
    from tests.conftest import make_zip

    count = front.POOL_MIN_FILES + 6
    pad = front.POOL_MIN_BYTES // (2 * count) + 100  # bytes, written as hex
    files = {f"cassettes/c{i:03d}.json": _big_cassette(i, pad) for i in range(count)}
    files["README.md"] = "# Triage agent\n"
    worker = start_worker("filesystem")
    result = submission_create(
        upload=io.BytesIO(make_zip(files)),
        filename="big.zip",
        candidate=candidate,
        assignment=assignment,
    )
    assert not result.reason, result.reason
    intake = wait_final(result.submission.jobs.get(), worker)
    assert intake.state == Job.State.PASSED, intake.error
    analysis = wait_final(result.submission.jobs.get(kind=Job.Kind.ANALYSIS), worker, timeout=120)
    assert analysis.state == Job.State.PASSED, analysis.error
    assert f"parsed {count} recording files in 2 processes (peak " in analysis.log
    submission = result.submission
    assert submission.recordings.count() == count
    assert submission.turns.count() == count
    assert set(submission.response_ids.values_list("value", flat=True)) == {
        f"chatcmpl-9xYz{i:04d}AbCdEfGh" for i in range(count)
    }
    keys = submission.checks.get(check_id="cassettes.keys_match")
    assert keys.status == "pass", keys.summary
