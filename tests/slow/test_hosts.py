"""Issue 31, done when: web and two workers as separate "hosts" (process groups with their own
DATA_DIR, WORK_DIR and HOST_NAME) sharing only the database, Redis and an S3 server (moto)
that the test starts. Hand-ins go in over HTTP, every job ends, the web host shows a file
from the bucket with an empty WORK_DIR, and a worker host killed mid-job is taken over by the
other host in under 30 s, with no job lost; a pool child killed alone (its host alive) has its
job run again by the redelivery, promptly and once."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from submissions.jobs.queue import job_create
from submissions.models import Job, Submission, WorkerBeat
from submissions.roles import REVIEWERS
from tests.conftest import make_zip
from tests.hosts import Hosts, free_port, s3_bucket, worker_argv
from tests.slow.test_s3 import s3_endpoint  # noqa: F401 - the moto server fixture
from tests.workers import _configure, _redis_up, reset_publisher

pytestmark = [pytest.mark.worker, pytest.mark.s3, pytest.mark.django_db(transaction=True)]

HANDINS = 4


@pytest.fixture
def hosts(s3_endpoint, tmp_path: Path, settings) -> Iterator[Hosts]:  # noqa: F811
    """Process groups as hosts (tests/hosts.py), each its own folders and name, sharing the
    test's database, Redis and a bucket of the moto server; all killed at the end."""
    if not _redis_up():
        pytest.fail("Redis is not running on 127.0.0.1:6379 (CI starts it; so must you)")
    shared = _configure("redis")  # this process publishes to the same queue
    shared.pop("CR_TEST_DATA_DIR")
    shared.update(s3_bucket(s3_endpoint, f"hosts-{tmp_path.name.lower().replace('_', '-')[-30:]}"))
    shared.update(WORKER_BEAT_SECONDS="1", WORKER_STALE_SECONDS="3", JOB_RECONCILE_SECONDS="2")
    group = Hosts(tmp_path, shared, data_env="CR_TEST_DATA_DIR")
    yield group
    group.stop()
    WorkerBeat.objects.filter(host__in=["web", "worker-a", "worker-b"]).delete()
    reset_publisher()


def _wait(what, until, hosts: Hosts, timeout: float) -> float:
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what} not within {timeout}s\n{hosts.tail()}")
        time.sleep(0.2)
    return time.monotonic() - start


def test_web_and_two_worker_hosts_share_only_database_broker_and_storage(
    hosts, assignment, settings
) -> None:
    import requests

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    port = free_port()
    # No worker beside the web host: it keeps no tree of what it receives (INTAKE_KEEP_TREE).
    hosts.start("web", ["django", "runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}"],
                INTAKE_KEEP_TREE="0")  # fmt: skip
    hosts.start("web", ["celery", "-A", "reviewer", "beat", "-l", "info", "-s",
                        str(Path(settings.DATA_DIR) / f"beat-{port}")])  # fmt: skip
    for name in ("worker-a", "worker-b"):
        hosts.start(name, worker_argv(queue))
    base = f"http://127.0.0.1:{port}"

    user = User.objects.create_user("hosts", password="pw-hosts-123")
    user.groups.add(Group.objects.get_or_create(name=REVIEWERS)[0])
    http = requests.Session()
    _wait("the web host", lambda: _get(http, f"{base}/login/"), hosts, 60)
    token = http.cookies["csrftoken"]
    http.post(f"{base}/login/", data={"username": "hosts", "password": "pw-hosts-123",
                                      "csrfmiddlewaretoken": token}, timeout=10)  # fmt: skip
    token = http.cookies["csrftoken"]  # rotated at login
    for i in range(HANDINS):
        zipped = make_zip({"README.md": f"# Hand-in {i}\nsecond line\n",
                           "cassettes/0123456789abcdef.json": '{"key": "0123456789abcdef"}'})  # fmt: skip
        answer = http.post(
            f"{base}{assignment.get_absolute_url()}",
            data={"candidate": f"Host candidate {i}", "csrfmiddlewaretoken": token},
            files={"archive": (f"h{i}.zip", zipped, "application/zip")}, timeout=30,
        )  # fmt: skip
        assert re.search(r"/submissions/\d+/$", answer.url), answer.text[-2000:]
    submissions = Submission.objects.filter(assignment=assignment)
    assert submissions.count() == HANDINS
    jobs = Job.objects.filter(submission__in=submissions)

    def all_ended() -> bool:
        return jobs.count() >= 2 * HANDINS and not jobs.exclude(state__in=Job.FINAL_STATES).exists()

    took = _wait("every job ending", all_ended, hosts, 60)
    assert sorted(set(jobs.values_list("state", flat=True))) == ["passed"], hosts.tail()
    ran_on = {runner.rpartition(":")[0] for runner in jobs.values_list("runner", flat=True)}
    assert ran_on <= {"worker-a", "worker-b"}, ran_on
    print(f"{2 * HANDINS} jobs ended in {took:.1f}s on {sorted(ran_on)}")

    # The web host's WORK_DIR is empty (it unpacked each upload to check it, in a scratch
    # folder, and kept nothing), as a second replica's or a wiped disk's would be: its file
    # viewer reads from the bucket.
    web_work = hosts.home("web") / "work"
    assert not web_work.exists() or not any(web_work.iterdir())  # it kept nothing
    first = submissions.order_by("pk").first()
    assert first is not None
    shown = http.get(f"{base}/submissions/{first.pk}/file/",
                     params={"path": "README.md", "line": "2"}, timeout=10)  # fmt: skip
    assert shown.status_code == 200 and "Hand-in 0" in shown.text
    assert not web_work.exists() or not any(web_work.iterdir())

    # A long job; the host running it dies (the whole process group), the other takes it over.
    slow = job_create(submission=first, kind=Job.Kind.SELFTEST,
                      params={"action": "sleep", "seconds": 6})  # fmt: skip

    def running() -> bool:
        slow.refresh_from_db()
        return slow.state == Job.State.RUNNING and bool(slow.runner)

    _wait("the slow job starting", running, hosts, 30)
    victim = slow.runner.rpartition(":")[0]
    survivor = ({"worker-a", "worker-b"} - {victim}).pop()
    killed = time.monotonic()
    hosts.kill(victim)

    def taken_over() -> bool:
        slow.refresh_from_db()
        return slow.runner.startswith(f"{survivor}:")

    _wait("the takeover", taken_over, hosts, 30)
    takeover = time.monotonic() - killed
    print(f"{victim} killed; {survivor} took its job over in {takeover:.1f}s")
    assert takeover < 30
    _wait("the taken-over job ending", lambda: slow.refresh_from_db() or slow.is_final, hosts, 30)
    assert slow.state == Job.State.PASSED, (slow.error, hosts.tail())
    assert sorted(set(jobs.values_list("state", flat=True))) == ["passed"]
    assert jobs.count() == 2 * HANDINS + 1  # no job lost, none doubled


def test_a_pool_child_killed_alone_has_its_job_run_again_by_the_redelivery(
    hosts, assignment, candidate, settings
) -> None:
    """SIGKILL to the pool process running a job, not its worker: the worker rejects the
    message back to the queue while its host still beats. The other host used to ack that
    redelivery and drop it in milliseconds; the job came back only if the reconciler happened
    to run on the victim's host, or after JOB_STALE_SECONDS (120 s). No beat runs here, so no
    reconciler: the redelivery alone must carry the job, once, within seconds."""
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    workers = {name: hosts.start(name, worker_argv(queue)) for name in ("worker-a", "worker-b")}
    ready = WorkerBeat.objects.filter(host__in=workers)
    _wait("both worker hosts beating", lambda: ready.count() >= 2, hosts, 60)
    submission = Submission.objects.create(
        candidate=candidate, assignment=assignment, archive="archives/none.zip",
        archive_sha256="0" * 64, status=Submission.Status.READY,
    )  # fmt: skip
    job = job_create(submission=submission, kind=Job.Kind.SELFTEST,
                     params={"action": "sleep", "seconds": 4})  # fmt: skip

    def running() -> bool:
        job.refresh_from_db()
        return job.state == Job.State.RUNNING and bool(job.runner)

    _wait("the job in a pool child starting", running, hosts, 30)
    host, _, pid = job.runner.rpartition(":")
    assert int(pid) != workers[host].pid  # a pool child, not the worker (prefork)
    os.kill(int(pid), signal.SIGKILL)
    killed = time.monotonic()
    _wait("the killed child's job ending", lambda: job.refresh_from_db() or job.is_final,
          hosts, 40)  # fmt: skip
    took = time.monotonic() - killed
    assert workers[host].poll() is None  # the host itself lived on
    assert job.state == Job.State.PASSED, (job.error, hosts.tail())
    assert job.attempts == 2 and job.log.count("worker lost during attempt 1") == 1, job.log
    finished_on = job.runner.rpartition(":")[0]
    print(f"pool child {host}:{pid} killed; its job ended on {finished_on} {took:.1f}s later")
    # The 4 s job again, and a beat or two: well under JOB_STALE_SECONDS (120 s here).
    assert took < 15
    assert Job.objects.filter(submission=submission).count() == 1


def _get(http, url: str) -> bool:
    try:
        return http.get(url, timeout=5).status_code == 200
    except OSError:
        return False
