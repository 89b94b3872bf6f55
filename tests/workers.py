"""Real Celery worker processes for tests: on Redis or the embedded filesystem broker."""

from __future__ import annotations

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
from tests.paths import ROOT

REDIS = ("127.0.0.1", 6379)


def reset_publisher() -> None:
    """Drop this process's broker connections so the next publish uses the current conf.

    The producer pool holds the connection pool it was made with, and kombu's registry hands
    the same closed pool back for the same URL: all three must go, or the next publish fails
    with "Acquire on closed pool".
    """
    from kombu import pools

    celery_app.pool.force_close_all()
    pools.reset()  # kombu keeps closed pools in a global registry keyed by broker URL
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


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
        # A large tree's analysis starts a pool of this many, whatever the machine's cores.
        "ANALYSIS_PROCESSES": "2",
    }
    if broker == "redis":
        conf.broker_url = f"redis://{REDIS[0]}:{REDIS[1]}/0"
        conf.broker_transport = None  # the URL's own (the embedded default names its own)
        conf.broker_transport_options = {"visibility_timeout": 3600}
        env["REDIS_URL"] = conf.broker_url
    else:
        folder = Path(settings.BROKER_DIR)
        conf.broker_url = "filesystem://"
        conf.broker_transport = "reviewer.broker:Transport"  # as reviewer/settings.py
        conf.broker_transport_options = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.2,
        }
        for sub in ("queue", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
    reset_publisher()
    return env


@pytest.fixture
def start_worker() -> Iterator:
    """Start `celery worker` subprocesses (one prefork child each) on a chosen broker."""
    conf = celery_app.conf
    saved = (conf.broker_url, conf.broker_transport, conf.broker_transport_options)
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
    # The stopped workers' heartbeats go with them: a fresh beat left behind would make the
    # next test on this database read a live worker (its sandbox, its host) that is gone.
    from submissions.models import WorkerBeat

    WorkerBeat.objects.filter(pid__in=[proc.pid for proc in procs]).delete()
    conf.broker_url, conf.broker_transport, conf.broker_transport_options = saved
    reset_publisher()


def wait_final(job, proc: subprocess.Popen[str], timeout: float = 60):
    """`job` reloaded once it ended; the test fails with the worker's log if it has not
    ended within `timeout` seconds, or the worker died first."""
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
