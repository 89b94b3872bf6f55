"""The assignment lock that cohort judgments and spot-check spending queue on (PostgreSQL)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction

from submissions.models import Submission, assignment_lock


@contextlib.contextmanager
def _held_by_another_connection(assignment_pk: int) -> Iterator[None]:
    """The assignment's lock taken in a transaction of another thread, for the block."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                assignment_lock(assignment_pk)
                held.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        holder.join()


@pytest.mark.django_db(transaction=True)
def test_an_upload_commits_while_a_cohort_judgment_holds_its_assignment(
    assignment, candidate
) -> None:
    """Found by bench/bench_host_disk.py: uploads arriving while the worker hosts analysed
    ended analyses in "deadlock detected". The upload's Submission row is checked against
    its assignment at COMMIT (KEY SHARE), which FOR UPDATE on the assignment blocked, while
    the judgment waited for the table generation the upload had moved."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises every write anyway")
    with _held_by_another_connection(assignment.pk):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '3s'")  # a blocked commit fails
            Submission.objects.create(
                candidate=candidate, assignment=assignment, archive="archives/x.zip",
                archive_sha256="1" * 64,
            )  # fmt: skip
        assert Submission.objects.filter(assignment=assignment).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_holders_of_one_assignments_lock_take_turns(assignment) -> None:
    """The lock still serialises what queues on it: a second holder waits for the first."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises every write anyway")
    with (
        _held_by_another_connection(assignment.pk),
        pytest.raises(Exception, match="lock timeout"),
        transaction.atomic(),
    ):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '500ms'")
        assignment_lock(assignment.pk)
