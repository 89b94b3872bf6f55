"""A real Celery worker process runs jobs, on Redis and on the embedded filesystem broker."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from reviewer import celery_app
from submissions.intake import submission_create
from submissions.jobs import job_create
from submissions.models import Job

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]
ROOT = Path(__file__).resolve().parent.parent
REDIS = ("127.0.0.1", 6379)


def _redis_up() -> bool:
    try:
        with socket.create_connection(REDIS, timeout=1):
            return True
    except OSError:
        return False


def _configure(broker: str) -> dict[str, str]:
    """Point this process's Celery app at `broker`; return the env a worker needs for it."""
    conf = celery_app.conf
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "CR_TEST_DATA_DIR": str(settings.DATA_DIR),
        "CR_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
        "CR_TEST_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "PYTHONUNBUFFERED": "1",
        "JOB_HEARTBEAT_SECONDS": "1",
    }
    if broker == "redis":
        conf.broker_url = f"redis://{REDIS[0]}:{REDIS[1]}/0"
        conf.broker_transport_options = {"visibility_timeout": 3600}
        env["REDIS_URL"] = conf.broker_url
    else:
        folder = Path(settings.BROKER_DIR)
        conf.broker_url = "filesystem://"
        conf.broker_transport_options = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.2,
        }
        for sub in ("queue", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
    celery_app.pool.force_close_all()
    celery_app._pool = None
    return env


@pytest.fixture
def start_worker() -> Iterator:
    """Start `celery worker` subprocesses (one prefork child each) on a chosen broker."""
    saved = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    procs: list[subprocess.Popen[str]] = []

    def start(broker: str) -> subprocess.Popen[str]:
        if broker == "redis" and not _redis_up():
            pytest.fail("Redis is not running on 127.0.0.1:6379 (CI starts it; so must you)")
        extra = _configure(broker)
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "PYTEST_XDIST_WORKER"}}
        env.update(extra)
        log_path = Path(settings.DATA_DIR) / f"worker-{broker}-{len(procs)}.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "reviewer",
                    "worker",
                    "--pool",
                    "prefork",
                    "--concurrency",
                    "1",
                    "-l",
                    "info",
                    "-Q",
                    extra["CR_TEST_QUEUE"],
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        proc.log_path = log_path  # type: ignore[attr-defined]
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGQUIT)  # cold shutdown: the pool children go with it
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    celery_app.conf.broker_url, celery_app.conf.broker_transport_options = saved
    celery_app._pool = None


def _wait_final(job: Job, proc: subprocess.Popen[str], timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_final:
            return job
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    log = Path(proc.log_path).read_text()[-4000:]  # type: ignore[attr-defined]
    pytest.fail(f"job {job.pk} still {job.state} after {timeout}s; worker log:\n{log}")


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
    job = _wait_final(result.submission.jobs.get(), worker)
    assert job.state == Job.State.PASSED, job.error
    assert job.attempts == 1
    # Intake queues the analysis job, which the same worker runs next.
    analysis = _wait_final(result.submission.jobs.get(kind=Job.Kind.ANALYSIS), worker)
    assert analysis.state == Job.State.PASSED, analysis.error
    result.submission.refresh_from_db()
    assert result.submission.status == "ready"
    assert result.submission.checks.filter(check_id="cassettes.keys_match").exists()


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
    job = _wait_final(_kill_job(assignment, candidate, small_zip), worker, timeout=90)
    assert job.state == Job.State.ERROR
    assert job.attempts == 3
    assert "worker lost 3 times" in job.error
    assert worker.poll() is None  # the worker survived and replaced its child


def test_killed_worker_child_is_rescued_by_the_reconciler_on_the_embedded_broker(
    start_worker, assignment, candidate, small_zip
) -> None:
    from submissions.jobs import jobs_reconcile

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
