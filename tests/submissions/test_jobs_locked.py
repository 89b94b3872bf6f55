"""A write that meets SQLite's lock waits and tries again instead of losing the job."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.db import OperationalError

from submissions.intake.upload import submission_create
from submissions.jobs import engine
from submissions.jobs.locked import is_locked, retry_locked
from submissions.models import Job


def _flaky(failures: int, message: str = "database is locked"):
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise OperationalError(message)
        return "done"

    return fn, calls


def test_a_locked_database_is_waited_out_with_backoff() -> None:
    fn, calls = _flaky(3)
    waits: list[float] = []
    assert retry_locked(fn, sleep=waits.append) == "done"
    assert len(calls) == 4 and waits == [0.25, 0.5, 1.0]


def test_other_database_errors_are_not_retried() -> None:
    fn, calls = _flaky(1, "no such table: submissions_job")
    with pytest.raises(OperationalError, match="no such table"):
        retry_locked(fn, sleep=lambda _: None)
    assert len(calls) == 1


def test_a_lock_that_outlasts_every_try_is_raised() -> None:
    fn, calls = _flaky(100)
    with pytest.raises(OperationalError):
        retry_locked(fn, attempts=3, sleep=lambda _: None)
    assert len(calls) == 3
    assert is_locked(OperationalError("database table is locked: submissions_job"))
    assert not is_locked(ValueError("database is locked"))


@pytest.mark.django_db
def test_a_job_whose_claim_meets_a_lock_still_runs_to_its_end(
    assignment, candidate, small_zip, monkeypatch
) -> None:
    with mock.patch("submissions.jobs.queue.job_enqueue", return_value=True):
        submission = submission_create(
            upload=io.BytesIO(small_zip),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission
    job = submission.jobs.get(kind=Job.Kind.INTAKE)
    real_claim = engine._claim
    fails = iter([True, False])

    def claim(job_id: int):
        if next(fails, False):
            raise OperationalError("database is locked")
        return real_claim(job_id)

    monkeypatch.setattr(engine, "_claim", claim)
    monkeypatch.setattr("submissions.jobs.locked.time.sleep", lambda _: None)
    with mock.patch("submissions.jobs.queue.job_enqueue", return_value=True):
        assert engine.job_execute(job_id=job.pk) == "passed"
    job.refresh_from_db()
    assert job.state == "passed" and job.attempts == 1


def test_the_task_retries_later_when_the_lock_outlasts_the_engine(monkeypatch) -> None:
    from celery.exceptions import Retry

    from submissions import tasks

    def locked(**_: object) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(tasks, "job_execute", locked)
    with pytest.raises(Retry):
        tasks.run_job.apply(args=(1,), throw=True).get()
