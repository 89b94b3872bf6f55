"""The job state machine, enqueueing with the broker down, and the reconciler."""

from __future__ import annotations

import io
import socket
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.utils import timezone

from reviewer import celery_app
from submissions.intake.upload import submission_create
from submissions.jobs import engine, queue, registry, state
from submissions.jobs.engine import job_execute
from submissions.jobs.queue import job_create, jobs_reconcile
from submissions.jobs.types import cap_log
from submissions.models import Job, Submission
from tests.workers import reset_publisher


@pytest.fixture
def submission(db: None, assignment, candidate, small_zip) -> Submission:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(small_zip),
            filename="repo.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission


def _selftest(submission: Submission, action: str = "pass", **params) -> Job:
    return Job.objects.create(
        submission=submission, kind=Job.Kind.SELFTEST, params={"action": action, **params}
    )


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch):
    """Point Celery at a closed port on loopback: publishing fails fast."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = celery_app.conf
    saved = (conf.broker_url, conf.broker_transport, conf.broker_transport_options)
    conf.broker_url = f"redis://127.0.0.1:{port}/0"
    conf.broker_transport = None  # the URL's (the embedded default names its own)
    conf.broker_transport_options = {"socket_connect_timeout": 0.5}
    reset_publisher()
    yield
    conf.broker_url, conf.broker_transport, conf.broker_transport_options = saved
    reset_publisher()


def test_intake_job_runs_to_passed_and_submission_becomes_ready(submission: Submission) -> None:
    job = submission.jobs.get()
    assert job.state == Job.State.QUEUED
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    job.refresh_from_db()
    assert job.attempts == 1
    assert job.progress == 100
    assert job.finished_at and job.started_at
    assert "unpacked 3 files" in job.log
    submission.refresh_from_db()
    assert submission.status == Submission.Status.PROCESSING  # analysis is queued next
    analysis = submission.jobs.get(kind=Job.Kind.ANALYSIS)
    assert job_execute(job_id=analysis.pk) == Job.State.PASSED
    submission.refresh_from_db()
    assert submission.status == Submission.Status.READY


def test_a_finished_job_is_not_run_again(submission: Submission) -> None:
    job = _selftest(submission)
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    assert job_execute(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.attempts == 1


@pytest.fixture
def asked_again(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, float | None]]:
    """What the engine published again, instead of the broker."""
    published: list[tuple[int, float | None]] = []
    monkeypatch.setattr(
        engine, "job_publish", lambda job_id, countdown=None: published.append((job_id, countdown))
    )
    return published


def test_a_running_job_with_a_live_runner_is_left_alone_and_asked_again(
    submission: Submission, asked_again, settings
) -> None:
    job = _selftest(submission)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, runner=state.runner_id(), heartbeat_at=timezone.now(), attempts=1
    )
    assert job_execute(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.attempts == 1
    # Not acked and forgotten: the delivery comes back once the runner's host beat again.
    assert asked_again == [(job.pk, settings.WORKER_BEAT_SECONDS)]


def test_redelivery_after_runner_died_takes_over_and_counts_an_attempt(
    submission: Submission,
) -> None:
    job = _selftest(submission)
    dead = f"{socket.gethostname()}:999999999"
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, runner=dead, heartbeat_at=timezone.now(), attempts=1
    )
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    job.refresh_from_db()
    assert job.attempts == 2
    assert "worker lost during attempt 1" in job.log


def test_redelivery_after_the_last_attempt_ends_in_error(submission: Submission) -> None:
    job = _selftest(submission)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, runner=f"{socket.gethostname()}:999999999", attempts=3
    )
    assert job_execute(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.state == Job.State.ERROR
    assert "worker lost 3 times" in job.error


@pytest.mark.parametrize(
    ("action", "state"),
    [("fail", "failed"), ("error", "error"), ("pass", "passed")],
)
def test_handler_outcomes_map_to_states(submission: Submission, action: str, state: str) -> None:
    job = _selftest(submission, action)
    assert job_execute(job_id=job.pk) == state


def test_a_crashing_handler_ends_in_error_with_the_reason(
    submission: Submission, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(job, progress):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, boom)
    job = _selftest(submission)
    assert job_execute(job_id=job.pk) == Job.State.ERROR
    job.refresh_from_db()
    assert "RuntimeError: disk on fire" in job.error


def test_soft_time_limit_ends_timed_out(
    submission: Submission, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    def slow(job, progress):
        progress.log("started")
        raise SoftTimeLimitExceeded()

    monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, slow)
    job = _selftest(submission)
    assert job_execute(job_id=job.pk) == Job.State.TIMED_OUT
    job.refresh_from_db()
    assert "started" in job.log  # the partial log is kept


def test_job_log_is_redacted_and_capped(
    submission: Submission, monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    settings.JOB_LOG_MAX_BYTES = 2048
    secret = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3gH5jK7m"

    def chatty(job, progress):
        progress.log(f"calling with Authorization: Bearer {secret}")
        for i in range(500):
            progress.log(f"line {i}")

    monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, chatty)
    job = _selftest(submission)
    job_execute(job_id=job.pk)
    job.refresh_from_db()
    assert secret not in job.log
    assert len(job.log.encode()) <= 2048 + 200
    assert "bytes of log dropped" in job.log
    assert "line 499" in job.log


def test_cap_log_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    capped = cap_log(text, 1000)
    assert capped.startswith("HEAD") and capped.endswith("TAIL")
    assert len(capped.encode()) <= 1000


def test_enqueue_happens_only_after_commit(
    db: None, assignment, candidate, small_zip, django_capture_on_commit_callbacks
) -> None:
    with mock.patch.object(queue, "job_enqueue") as enqueue:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            result = submission_create(
                upload=io.BytesIO(small_zip),
                filename="r.zip",
                candidate=candidate,
                assignment=assignment,
            )
            assert enqueue.call_count == 0
        assert enqueue.call_count == 0 and callbacks  # nothing published before the commit
        for callback in callbacks:
            callback()
        enqueue.assert_called_once_with(job_id=result.submission.jobs.get().pk)


def test_upload_with_broker_down_keeps_submission_and_queued_job(
    db: None, assignment, candidate, small_zip, broker_down, django_capture_on_commit_callbacks
) -> None:
    started = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        result = submission_create(
            upload=io.BytesIO(small_zip),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
        )
    assert (timezone.now() - started).total_seconds() < 5
    job = result.submission.jobs.get()
    assert job.state == Job.State.QUEUED
    assert "queue" in job.enqueue_error
    assert job.enqueued_at is None


def test_page_says_the_queue_is_unreachable(
    client,
    reviewer,
    assignment,
    candidate,
    small_zip,
    broker_down,
    django_capture_on_commit_callbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        result = submission_create(
            upload=io.BytesIO(small_zip),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
            uploaded_by=reviewer,
        )
    client.force_login(reviewer)
    page = client.get(result.submission.get_absolute_url())
    assert b"job queue is unreachable" in page.content


def test_reconciler_enqueues_a_stale_queued_job_once_broker_is_back(
    submission: Submission, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = submission.jobs.get()
    Job.objects.filter(pk=job.pk).update(enqueue_error="the queue is unreachable")
    published: list[int] = []
    monkeypatch.setattr(
        "submissions.jobs.queue.job_publish",
        lambda job_id: published.append(job_id),
    )
    assert jobs_reconcile()["requeued"] == 1
    assert published == [job.pk]
    job.refresh_from_db()
    assert job.enqueue_error == "" and job.enqueued_at is not None
    # A second pass soon after does not publish it again.
    assert jobs_reconcile()["requeued"] == 0
    assert published == [job.pk]


def test_reconciler_requeues_a_job_whose_worker_died(
    submission: Submission, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setattr("submissions.jobs.queue.job_publish", lambda job_id: None)
    job = _selftest(submission)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        runner=f"{socket.gethostname()}:999999999",
        attempts=1,
        enqueued_at=timezone.now(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        counts = jobs_reconcile()
    assert counts["rescued"] == 1
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    job.refresh_from_db()
    assert job.attempts == 2


def test_reconciler_ends_a_job_with_stale_heartbeat_after_the_cap(
    submission: Submission, settings
) -> None:
    job = _selftest(submission)
    long_ago = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS + 60)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        runner="another-host:42",
        attempts=3,
        heartbeat_at=long_ago,
        enqueued_at=long_ago,
    )
    assert jobs_reconcile()["ended"] == 1
    job.refresh_from_db()
    assert job.state == Job.State.ERROR
    assert "worker lost 3 times" in job.error


def test_reconciler_leaves_a_healthy_running_job(submission: Submission) -> None:
    submission.jobs.update(enqueued_at=timezone.now())  # the intake job was published
    job = _selftest(submission)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        runner="another-host:42",
        attempts=1,
        heartbeat_at=timezone.now(),
        enqueued_at=timezone.now(),
    )
    assert jobs_reconcile() == {"requeued": 0, "rescued": 0, "ended": 0}


def test_job_create_refuses_nothing_but_publishes_nothing_inside_rollback(
    db: None, submission: Submission, django_capture_on_commit_callbacks
) -> None:
    from django.db import transaction

    with mock.patch.object(queue, "job_enqueue") as enqueue:
        with django_capture_on_commit_callbacks(execute=True):
            try:
                with transaction.atomic():
                    job_create(submission=submission, kind=Job.Kind.SELFTEST)
                    raise RuntimeError("simulated database error")
            except RuntimeError:
                pass
        enqueue.assert_not_called()
    assert not submission.jobs.filter(kind=Job.Kind.SELFTEST).exists()


def _committed_submission(name: str) -> Submission:
    """A bare submission for tests whose job must commit (other threads and connections)."""
    from submissions.models import Assignment, Candidate

    return Submission.objects.create(
        candidate=Candidate.objects.create(name=name),
        assignment=Assignment.objects.create(slug=name, title=name),
        archive="a.zip",
        archive_sha256=name.encode().hex().ljust(64, "0"),
    )


@pytest.mark.django_db(transaction=True)
def test_a_connection_broken_by_the_time_limit_is_replaced_and_the_end_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A soft time limit raised mid-query leaves the connection unusable: the job still ends."""
    from celery.exceptions import SoftTimeLimitExceeded
    from django.db import connection

    submission = _committed_submission("t")
    closed = []

    def interrupted(job, progress):
        monkeypatch.setattr(connection, "is_usable", lambda: False)
        real_close = connection.close
        monkeypatch.setattr(connection, "close", lambda: (closed.append(1), real_close()))
        raise SoftTimeLimitExceeded()

    monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, interrupted)
    job = Job.objects.create(submission=submission, kind=Job.Kind.SELFTEST)
    assert job_execute(job_id=job.pk) == Job.State.TIMED_OUT
    assert closed
    job.refresh_from_db()
    assert job.state == Job.State.TIMED_OUT


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_closes_its_database_connection(
    monkeypatch: pytest.MonkeyPatch, settings
) -> None:
    """Connections are kept for a minute: one left by each job's heartbeat thread would pile up."""
    import threading
    import time

    submission = _committed_submission("h")
    settings.JOB_HEARTBEAT_SECONDS = 0.01
    closed_in: list[str] = []
    real_close_all = engine.connections.close_all

    def close_all() -> None:
        closed_in.append(threading.current_thread().name)
        real_close_all()

    monkeypatch.setattr(engine.connections, "close_all", close_all)
    monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, lambda job, progress: time.sleep(0.1))
    job = _selftest(submission)
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    assert any(name.startswith("heartbeat-") for name in closed_in)
    job.refresh_from_db()
    assert job.heartbeat_at is not None  # it did beat, through its own connection


def test_a_jobs_outcome_never_borrows_a_checks_word(monkeypatch, submission) -> None:
    """A job that judged the hand-in 'finished' (even if the hand-in failed); one that could
    not run says so; one our code crashed in is 'failed (our error)'."""
    from submissions.jobs.types import JobError, JobFailed

    outcomes = {}
    for name, handler in {
        "judged": lambda job, progress: None,
        "judged-failing": _raiser(JobFailed("3 checks failed")),
        "no-sandbox": _raiser(JobError("needs the sandbox: bwrap missing")),
        "crash": _raiser(KeyError("boom")),
    }.items():
        monkeypatch.setitem(registry.HANDLERS, Job.Kind.SELFTEST, handler)
        job = Job.objects.create(submission=submission, kind=Job.Kind.SELFTEST)
        engine.job_execute(job_id=job.pk)
        job.refresh_from_db()
        outcomes[name] = job.outcome
    assert outcomes == {
        "judged": "finished",
        "judged-failing": "finished",
        "no-sandbox": "could not run",
        "crash": "failed (our error)",
    }


def _raiser(exc: Exception):
    def handler(job, progress):
        raise exc

    return handler


def test_the_sandbox_lock_folder_is_a_setting() -> None:
    """Per-host paths are settings (#31): the slot and uid locks follow SANDBOX_LOCK_DIR."""
    import os
    import subprocess
    import sys

    code = "from submissions.sandbox.types import LOCK_DIR; print(LOCK_DIR)"
    env = {**os.environ, "SANDBOX_LOCK_DIR": "/var/lock/cr-test"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "/var/lock/cr-test", out.stderr
    env.pop("SANDBOX_LOCK_DIR")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "/run/cassette-review", out.stderr


@pytest.mark.django_db
def test_a_runner_on_another_host_is_dead_when_its_hosts_workers_went_quiet(settings) -> None:
    """Another host's dead runner used to wait out JOB_STALE_SECONDS (120 s); its workers'
    heartbeats now tell within WORKER_STALE_SECONDS, whichever host asks."""
    from datetime import timedelta

    from django.utils import timezone

    from submissions.jobs.state import runner_is_dead
    from submissions.models import WorkerBeat

    settings.WORKER_STALE_SECONDS = 30
    assert runner_is_dead("other-host:4242") is False  # no beat ever: nothing is known
    beat = WorkerBeat.objects.create(host="other-host", pid=17, seen=timezone.now())
    assert runner_is_dead("other-host:4242") is False  # its host is alive
    beat.seen = timezone.now() - timedelta(seconds=31)
    beat.save()
    assert runner_is_dead("other-host:4242") is True  # every worker of the host went quiet
    WorkerBeat.objects.create(host="other-host", pid=18, seen=timezone.now())
    assert runner_is_dead("other-host:4242") is False  # one of its workers still beats


def _running_elsewhere(submission: Submission, pid: int, heartbeat_at) -> Job:
    job = _selftest(submission)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, runner=f"worker-a:{pid}", heartbeat_at=heartbeat_at, attempts=1
    )
    return job


def test_a_redelivered_job_whose_pool_child_died_on_a_live_host_is_taken_over(
    submission: Submission, asked_again
) -> None:
    """#31: a pool child killed alone is redelivered while its host still beats. It used to be
    acked and dropped (the job then waited JOB_STALE_SECONDS); now the host's beats decide:
    a beat taken after the child's last heartbeat that does not list it means it is gone."""
    from submissions.models import WorkerBeat

    now = timezone.now()
    beat = WorkerBeat.objects.create(host="worker-a", pid=100, seen=now, children=[101])
    job = _running_elsewhere(submission, 101, heartbeat_at=now - timedelta(seconds=1))
    # The host's newest beat still lists the child: maybe alive, asked again, not dropped.
    assert job_execute(job_id=job.pk) is None
    assert asked_again == [(job.pk, 5)]
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.runner == "worker-a:101"
    # Its next beat no longer lists it: taken over here, one attempt more, nothing asked.
    beat.children, beat.seen = [102], timezone.now()
    beat.save()
    assert job_execute(job_id=job.pk) == Job.State.PASSED
    job.refresh_from_db()
    assert job.attempts == 2 and "worker lost during attempt 1" in job.log
    assert job.runner == state.runner_id()
    assert asked_again == [(job.pk, 5)]
    # The job has ended: a late copy of the message finds nothing to do and is not asked again.
    assert job_execute(job_id=job.pk) is None
    assert len(asked_again) == 1


def test_a_beat_older_than_the_runners_heartbeat_decides_nothing(
    submission: Submission, asked_again
) -> None:
    """A child forked after its worker's last beat is not in it yet: only a beat taken after
    the runner last showed life may declare it gone, and a worker that is the runner (a solo
    pool) is alive while it beats."""
    from submissions.jobs.workers import process_alive
    from submissions.models import WorkerBeat

    now = timezone.now()
    WorkerBeat.objects.create(host="worker-a", pid=100, seen=now - timedelta(seconds=2))
    job = _running_elsewhere(submission, 103, heartbeat_at=now)
    assert process_alive("worker-a", 103, alive_at=now) is None
    assert job_execute(job_id=job.pk) is None
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and len(asked_again) == 1
    assert process_alive("worker-a", 100, alive_at=now) is True
    assert process_alive("worker-b", 100, alive_at=now) is None  # never beat: unknown
    # A second worker on the host that beat after the heartbeat is not enough: all must.
    WorkerBeat.objects.create(host="worker-a", pid=200, seen=now + timedelta(seconds=1))
    assert process_alive("worker-a", 103, alive_at=now) is None
    WorkerBeat.objects.filter(pid=100).update(seen=now + timedelta(seconds=1))
    assert process_alive("worker-a", 103, alive_at=now) is False


def test_a_beat_lists_the_workers_live_children_not_its_zombies(tmp_path) -> None:
    """The pool processes come from /proc: direct children only, zombies (killed, not yet
    reaped) left out, and a command name with spaces and parentheses read right."""
    import subprocess
    import sys

    from submissions.jobs.workers import child_pids

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(100):  # the short one ends and stays a zombie until waited for
            stat = Path(f"/proc/{dead.pid}/stat").read_text()
            if stat.rpartition(")")[2].split()[0] == "Z":
                break
            time.sleep(0.05)
        children = child_pids()
        assert live.pid in children and dead.pid not in children
    finally:
        live.kill()
        live.wait()
        dead.wait()
    odd = tmp_path / "4242"
    odd.mkdir()
    (odd / "stat").write_text("4242 (a) S 7 (b)) S 99 1 1\n")
    (tmp_path / "self").mkdir()
    assert child_pids(99, proc=tmp_path) == [4242]
    assert child_pids(7, proc=tmp_path) == []
    assert child_pids(99, proc=tmp_path / "missing") == []


@pytest.mark.django_db
def test_the_sandbox_banner_speaks_of_the_workers_not_the_web_host(monkeypatch) -> None:
    """A web host without bubblewrap said on every page that replays would fail while the
    workers' replays passed: the workers' own reports decide now."""
    from django.utils import timezone

    from reviewer import context
    from submissions.models import WorkerBeat

    monkeypatch.setattr(
        "submissions.sandbox.slots.sandbox_problems", lambda **_: ["bwrap: not installed here"]
    )
    monkeypatch.setattr(context, "_sandbox_seen", None)
    assert context.sandbox_missing() == ("bwrap: not installed here",)  # no worker: this host
    able = WorkerBeat.objects.create(host="w1", pid=1, seen=timezone.now(), sandbox_problems=[])
    monkeypatch.setattr(context, "_sandbox_seen", None)
    assert context.sandbox_missing() == ()  # a live worker's sandbox works
    able.sandbox_problems = ["no user namespaces"]
    able.save()
    monkeypatch.setattr(context, "_sandbox_seen", None)
    assert context.sandbox_missing() == ("no user namespaces",)  # every live worker is broken
