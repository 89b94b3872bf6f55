"""Check results as every job writes them: one row per (submission, check), upserted in one
statement, and the comparison table moved on with them, in their transaction."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from cassettes_app.checks import CheckOutcome
from reviewer.models import TableGeneration
from submissions.checks.store import checks_store
from submissions.models import CheckResult, Job, Submission

_KEY = "sk-proj-" + "Zq8vR2mT5xK9wL3nB7pY4cH6" * 2


@pytest.fixture
def submission(assignment, candidate) -> Submission:
    return Submission.objects.create(
        candidate=candidate, assignment=assignment, archive_sha256="1" * 64
    )


def _generation(submission: Submission) -> int:
    return TableGeneration.objects.get(assignment=submission.assignment).value


def test_a_rerun_updates_each_result_in_place(submission) -> None:
    first = Job.objects.create(submission=submission, kind=Job.Kind.ANALYSIS)
    checks_store(
        submission,
        first,
        [
            CheckOutcome("replay.offline_pass", "fail", "exit 1"),
            CheckOutcome("cassettes.fresh", "pass", "all fresh", evidence=[{"file": "a"}]),
        ],
    )
    before = {c.check_id: c for c in submission.checks.all()}
    second = Job.objects.create(submission=submission, kind=Job.Kind.ANALYSIS)
    checks_store(
        submission,
        second,
        [CheckOutcome("replay.offline_pass", "pass", f"ran with {_KEY}", evidence=[1, 2])],
    )
    after = {c.check_id: c for c in submission.checks.all()}
    assert set(after) == {"replay.offline_pass", "cassettes.fresh"}  # none duplicated
    replay = after["replay.offline_pass"]
    assert replay.pk == before["replay.offline_pass"].pk
    assert (replay.status, replay.evidence, replay.job_id) == ("pass", [1, 2], second.pk)
    assert _KEY not in replay.summary and replay.summary.startswith("ran with sk-")
    assert replay.updated >= before["replay.offline_pass"].updated
    fresh = after["cassettes.fresh"]  # not in the second run: kept as it was
    assert (fresh.status, fresh.evidence, fresh.job_id) == ("pass", [{"file": "a"}], first.pk)


def test_an_id_given_twice_keeps_its_last_outcome(submission) -> None:
    checks_store(
        submission,
        None,
        [
            CheckOutcome("replay.offline_pass", "fail", "first"),
            CheckOutcome("replay.offline_pass", "pass", "second"),
        ],
    )
    stored = CheckResult.objects.get(submission=submission, check_id="replay.offline_pass")
    assert (stored.status, stored.summary) == ("pass", "second")


def test_the_table_moves_once_per_write_and_only_when_it_commits(submission) -> None:
    start = _generation(submission)
    outcomes = [CheckOutcome(f"check.n{i}", "pass", "ok") for i in range(12)]
    checks_store(submission, None, outcomes)
    assert _generation(submission) == start + 1
    with pytest.raises(RuntimeError), transaction.atomic():
        checks_store(submission, None, [CheckOutcome("check.late", "fail", "late")])
        raise RuntimeError("the job failed after writing")
    assert _generation(submission) == start + 1
    assert not CheckResult.objects.filter(check_id="check.late").exists()


def test_the_queries_do_not_grow_with_the_checks(submission) -> None:
    checks_store(submission, None, [CheckOutcome("warm.up", "pass", "ok")])
    submission = Submission.objects.select_related("assignment").get(pk=submission.pk)
    counts = []
    for size in (1, 30):
        outcomes = [CheckOutcome(f"check.n{i}", "pass", "ok") for i in range(size)]
        with CaptureQueriesContext(connection) as queries:
            checks_store(submission, None, outcomes)
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert submission.checks.count() == 31


def test_no_outcomes_write_nothing(submission) -> None:
    start = _generation(submission)
    with CaptureQueriesContext(connection) as queries:
        checks_store(submission, None, [])
    assert _generation(submission) == start
    assert not [q for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))]


@pytest.mark.django_db(transaction=True)
def test_two_jobs_writing_the_same_checks_at_once_never_deadlock(submission) -> None:
    """Replay and probe jobs of one hand-in run at once and share check ids: each writes
    its checks in one transaction, so the rows must be locked in one order whatever order
    the outcomes came in (else PostgreSQL ends one job with "deadlock detected")."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises every write anyway")
    ids = [f"shared.check_{c}" for c in "abcdef"]
    rounds = 25
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(order: list[str]) -> None:
        try:
            for n in range(rounds):
                start.wait(10)
                checks_store(
                    submission, None, [CheckOutcome(i, "pass", f"round {n}") for i in order]
                )
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)
            start.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(o,)) for o in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    stored = dict(submission.checks.values_list("check_id", "summary"))
    assert stored == {i: f"round {rounds - 1}" for i in ids}
