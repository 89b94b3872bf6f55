"""The comparison's landing table kept in the database: read by a process that has not built
it, never after a change it does not show, stored again by a worker once the change commits."""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import pytest
from django.core.cache import cache, caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from reviewer.cohort import table_cache
from reviewer.models import Note, Review, RubricRow, Score, StoredTable, TableGeneration
from submissions.jobs.state import submission_settle
from submissions.models import Job, Submission
from tests.reviewer.test_comparison import _cohort


def _page(client, assignment) -> str:
    """The comparison's table as the page shows it (the CSRF token, outside it, differs)."""
    response = client.get(reverse("comparison", args=[assignment.slug]))
    assert response.status_code == 200
    return response.content.decode().split("<main")[1]


def _new_process() -> None:
    """What a web process that never built the table holds: nothing of its own."""
    caches["fragments"].clear()


def _fresh(client, assignment) -> str:
    """The table built from the rows, with no copy of any kind to read."""
    _new_process()
    StoredTable.objects.all().delete()
    return _page(client, assignment)


@pytest.fixture
def cohort(client, lead, reviewer, reviewer2, assignment) -> list[Submission]:
    subs = _cohort(assignment, [reviewer, reviewer2], 3, scores=(3, 1))
    client.force_login(lead)
    return subs


def test_a_fresh_process_reads_the_stored_table_and_shows_the_same_page(
    client, assignment, cohort
) -> None:
    built = _fresh(client, assignment)
    assert table_cache.table_store(assignment.pk)
    stored = StoredTable.objects.get(generation_id=assignment.pk)
    assert stored.value == TableGeneration.objects.get(assignment=assignment).value
    _new_process()
    with mock.patch.object(table_cache, "cohort_for") as build:
        shown = _page(client, assignment)
        build.assert_not_called()  # read, not built
    assert shown == built  # byte for byte what a build shows
    assert not table_cache.table_store(assignment.pk)  # current: not stored again


def test_only_the_landing_view_is_stored(client, assignment, cohort) -> None:
    table_cache.table_store(assignment.pk)
    _new_process()
    url = reverse("comparison", args=[assignment.slug])
    with mock.patch.object(table_cache, "cohort_for", wraps=table_cache.cohort_for) as build:
        by_name = client.get(url, {"sort": "name"}).content.decode()
        assert build.call_count == 1  # another view of the table is built, as before
    assert "Candidate 000" in by_name


def _score(subs, reviewer) -> None:
    score = Score.objects.filter(review__submission=subs[0], review__reviewer=reviewer).first()
    score.value = 0
    score.save()


def _score_deleted(subs, reviewer) -> None:
    Score.objects.filter(review__submission=subs[0], review__reviewer=reviewer).first().delete()


def _review_deleted(subs, reviewer) -> None:
    Review.objects.get(submission=subs[1], reviewer=reviewer).delete()


def _review_back_to_draft(subs, reviewer) -> None:
    review = Review.objects.get(submission=subs[1], reviewer=reviewer)
    review.state = Review.State.DRAFT
    review.save()


def _note(subs, reviewer) -> None:
    row = Review.objects.get(submission=subs[0], reviewer=reviewer).rubric.rows.first()
    Note.objects.create(submission=subs[0], author=reviewer, row=row, body="seen it fail")


def _check(subs, reviewer) -> None:
    from cassettes_app.checks import CheckOutcome
    from submissions.checks.store import checks_store

    checks_store(subs[2], None, [CheckOutcome("replay.offline_pass", "fail", "exit 1")])


def _new_submission(subs, reviewer) -> None:
    _cohort(subs[0].assignment, [reviewer], 1, prefix="Newcomer")


def _settled(subs, reviewer) -> None:
    # Its jobs end (states the table does not show), then the status the table shows.
    Job.objects.filter(submission=subs[2]).update(state=Job.State.PASSED)
    submission_settle(submission_id=subs[2].pk)


def _renamed_candidate(subs, reviewer) -> None:
    candidate = subs[0].candidate
    candidate.name = "Renamed Person"
    candidate.save()


def _reweighted_row(subs, reviewer) -> None:
    row = RubricRow.objects.filter(template__slug=subs[0].assignment.rubric).first()
    row.weight += 10
    row.save()


def _renamed_reviewer(subs, reviewer) -> None:
    reviewer.username = "zed"
    reviewer.save()


def _submission_deleted(subs, reviewer) -> None:
    Submission.objects.get(pk=subs[1].pk).delete()


CHANGES: list[Callable] = [
    _score,
    _score_deleted,
    _review_deleted,
    _review_back_to_draft,
    _note,
    _check,
    _new_submission,
    _settled,
    _renamed_candidate,
    _reweighted_row,
    _renamed_reviewer,
    _submission_deleted,
]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_no_change_the_table_shows_is_served_from_an_older_stored_table(
    client, assignment, cohort, reviewer, change
) -> None:
    table_cache.table_store(assignment.pk)
    _new_process()
    before = _page(client, assignment)
    change(cohort, reviewer)
    _new_process()  # a process that never built it: only the stored copy to read
    after = _page(client, assignment)
    assert after != before  # the change shows in the table,
    assert after == _fresh(client, assignment)  # as a build from the rows shows it
    # The worker stores it again, and that copy serves the same page.
    assert table_cache.table_store(assignment.pk)
    _new_process()
    with mock.patch.object(table_cache, "cohort_for") as build:
        assert _page(client, assignment) == after
        build.assert_not_called()


def test_a_submission_settling_moves_the_generation(assignment, cohort) -> None:
    """Its status shows in the table: the settle is saved, so the signal moves it on."""
    Job.objects.filter(submission=cohort[0]).update(state=Job.State.PASSED)
    before = TableGeneration.objects.get(assignment=assignment).value
    submission_settle(submission_id=cohort[0].pk)
    assert Submission.objects.get(pk=cohort[0].pk).status == Submission.Status.READY
    assert TableGeneration.objects.get(assignment=assignment).value > before


def test_a_login_leaves_the_tables_alone_and_a_rename_does_not(client, lead, assignment) -> None:
    before = TableGeneration.objects.get(assignment=assignment).value
    client.force_login(lead)  # writes last_login
    lead.first_name = "Carol"
    lead.save(update_fields=["first_name"])
    assert TableGeneration.objects.get(assignment=assignment).value == before
    lead.username = "carol-lead"
    lead.save(update_fields=["username"])
    assert TableGeneration.objects.get(assignment=assignment).value > before


def test_other_code_leaves_a_stored_table_unread(client, assignment, cohort, monkeypatch) -> None:
    """A deploy that changes what renders the table: the older rendering is never shown."""
    table_cache.table_store(assignment.pk)
    _new_process()
    monkeypatch.setattr(table_cache, "code_digest", lambda: "another-deploy")
    with mock.patch.object(table_cache, "cohort_for", wraps=table_cache.cohort_for) as build:
        _page(client, assignment)
        assert build.call_count == 1
    assert table_cache.table_store(assignment.pk)  # this code's copy replaces it
    assert StoredTable.objects.get(generation_id=assignment.pk).layout.startswith("another-deploy:")


def test_a_store_never_replaces_a_newer_one(assignment, cohort) -> None:
    generation = TableGeneration.objects.get(assignment=assignment)
    StoredTable.objects.create(
        generation=generation,
        value=generation.value + 1,
        layout=table_cache.layout(),
        html_z=table_cache.pack("x"),
    )
    assert not table_cache.table_store(assignment.pk)
    assert table_cache.unpack(StoredTable.objects.get(generation_id=assignment.pk).html_z) == "x"


def test_the_sweep_stores_what_is_missing_or_out_of_date(assignment, cohort, reviewer) -> None:
    assert table_cache.tables_store_stale() == 1
    assert table_cache.tables_store_stale() == 0  # all current
    _score(cohort, reviewer)
    assert table_cache.tables_store_stale() == 1


def test_a_get_writes_nothing(client, assignment, cohort) -> None:
    for stored in (False, True):
        if stored:
            table_cache.table_store(assignment.pk)
        _new_process()
        with CaptureQueriesContext(connection) as ctx:
            _page(client, assignment)
        writes = [
            q["sql"]
            for q in ctx.captured_queries
            if q["sql"].lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE")
        ]
        assert writes == []


class _Inline:
    """The publisher's thread, run in line, so a test sees what it sent."""

    def submit(self, fn, *args):
        fn(*args)


def test_a_change_queues_one_store_once_it_commits(
    assignment, cohort, reviewer, django_capture_on_commit_callbacks
) -> None:
    cache.delete(f"cr:table-store:{assignment.pk}")
    with (
        mock.patch.object(table_cache, "_publisher", _Inline()),
        mock.patch.object(table_cache, "_publish") as publish,
        django_capture_on_commit_callbacks(execute=True),
    ):
        _score(cohort, reviewer)
        _score_deleted(cohort, reviewer)
        publish.assert_not_called()  # not before the commit
    # A burst of changes, one store (it reads them all), after the commit.
    publish.assert_called_once_with(assignment.pk)


def test_a_change_with_the_broker_down_still_saves(
    assignment, cohort, reviewer, django_capture_on_commit_callbacks
) -> None:
    cache.delete(f"cr:table-store:{assignment.pk}")
    with (
        mock.patch.object(table_cache, "_publisher", _Inline()),
        mock.patch.object(table_cache, "_publish", side_effect=ConnectionError("down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        _score(cohort, reviewer)  # logged, not raised: beat's sweep stores it
    assert Score.objects.filter(value=0).exists()


def test_a_broker_that_hangs_never_holds_the_change(
    assignment, cohort, reviewer, django_capture_on_commit_callbacks
) -> None:
    import threading
    import time

    cache.delete(f"cr:table-store:{assignment.pk}")
    release = threading.Event()
    sent = []

    def hang(assignment_id: int) -> None:
        sent.append(assignment_id)
        release.wait(10)

    try:
        with mock.patch.object(table_cache, "_publish", side_effect=hang):
            started = time.monotonic()
            with django_capture_on_commit_callbacks(execute=True):
                _score(cohort, reviewer)
            assert time.monotonic() - started < 2  # the publish hangs 10 s, elsewhere
            deadline = time.monotonic() + 5
            while not sent and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sent == [assignment.pk]
    finally:
        release.set()


def test_a_candidate_moves_only_the_tables_it_shows_in(assignment, cohort) -> None:
    """Each upload's new candidate used to move every assignment's table (each then stored
    again by a worker); it is in none until its hand-in is saved."""
    from submissions.assignments import assignment_apply, assignment_values
    from submissions.models import Candidate

    other = assignment_apply(
        values=assignment_values({"slug": "other", "title": "Other", "replay_command": ""})
    )[0]

    def generations() -> tuple[int, int]:
        values = TableGeneration.objects.in_bulk([assignment.pk, other.pk])
        return values[assignment.pk].value, values[other.pk].value

    before = generations()
    newcomer = Candidate.objects.create(name="Not handed in yet")
    newcomer.delete()  # never handed in: in no table either
    assert generations() == before
    renamed = cohort[0].candidate
    renamed.name = "Renamed"
    renamed.save()
    after = generations()
    assert after[0] > before[0] and after[1] == before[1]  # only where it handed in


def test_the_task_stores_the_table(assignment, cohort) -> None:
    from reviewer.tasks import store_comparison_table, store_comparison_tables

    assert store_comparison_table(assignment.pk) is True
    assert store_comparison_tables() == 0
