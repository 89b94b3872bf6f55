"""The shared cast: two reviewers, a hiring lead, an assignment, and archive builders."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.contrib.auth.models import Group, User

from submissions.assignments import assignment_apply, assignment_values
from submissions.models import Assignment, Candidate
from submissions.roles import HIRING_LEADS, REVIEWERS
from tests.workers import start_worker  # noqa: F401 - a shared fixture (real Celery workers)


def make_zip(files: dict[str, bytes | str], *, root: str | None = "repo-main") -> bytes:
    """A zip of `files`, under one top-level folder like a host's "download ZIP"."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(f"{root}/{name}" if root else name, content)
    return buffer.getvalue()


SMALL_REPO = {
    "README.md": "# Triage agent\n",
    "Makefile": "test:\n\tpython -m pytest\n",
    "cassettes/0123456789abcdef.json": '{"key": "0123456789abcdef", "request": {}, "response": {}}',
}


@pytest.fixture(autouse=True)
def _fresh_fragment_cache():
    """Rendered page parts are cached per process: each test starts without another's.

    The sandbox banner's half-minute cache is set to "checked now, nothing missing", so a
    page's query count does not depend on when the process last read the workers' beats;
    the banner's own tests empty it.
    """
    import time

    from django.core.cache import caches

    from reviewer import context

    caches["fragments"].clear()
    context._sandbox_seen = (time.monotonic(), ())
    yield


@pytest.fixture(autouse=True)
def _builtin_rubrics(request: pytest.FixtureRequest) -> None:
    """The built-in rubrics, for a test whose database is flushed around it.

    A migration installs them, but a transactional test's flush removes them: the next
    transactional test on that process (a live server, threads saving scores at once)
    found no rubric, depending on the order the tests ran in."""
    marker = request.node.get_closest_marker("django_db")
    names = request.fixturenames
    if not (
        "transactional_db" in names
        or "live_server" in names
        or (marker is not None and marker.kwargs.get("transaction"))
    ):
        return
    request.getfixturevalue("transactional_db")
    from reviewer.models import RubricRow, RubricTemplate
    from reviewer.review.rubrics import install_builtin_rubrics

    if not RubricTemplate.objects.filter(builtin=True).exists():
        install_builtin_rubrics(RubricTemplate, RubricRow)


@pytest.fixture
def reviewer(db: None) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    user.groups.add(Group.objects.get_or_create(name=REVIEWERS)[0])
    return user


@pytest.fixture
def reviewer2(db: None) -> User:
    user = User.objects.create_user("bob", password="pw-bob-123")
    user.groups.add(Group.objects.get_or_create(name=REVIEWERS)[0])
    return user


@pytest.fixture
def lead(db: None) -> User:
    user = User.objects.create_user("carol", password="pw-carol-123")
    user.groups.add(Group.objects.get_or_create(name=HIRING_LEADS)[0])
    return user


@pytest.fixture
def assignment(db: None) -> Assignment:
    # No replay command: unit tests stop after analysis; test_replay drives the sandbox.
    values = assignment_values(
        {"slug": "cassette-triage", "title": "Cassette triage", "replay_command": ""}
    )
    return assignment_apply(values=values)[0]


@pytest.fixture
def candidate(db: None) -> Candidate:
    return Candidate.objects.create(name="Ada Candidate")


@pytest.fixture
def small_zip() -> bytes:
    return make_zip(SMALL_REPO)


def stored_unqueued(files: dict, *, candidate, assignment, uploaded_by=None):
    """A submission stored from a zip of `files` with its jobs left unqueued (no worker runs)."""
    from unittest import mock

    from submissions.intake.upload import submission_create
    from submissions.jobs import queue

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(make_zip(files)),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
            uploaded_by=uploaded_by,
        ).submission


def ingest_inline(
    repo, values: dict, *, candidate: str = "Candidate", stub_url: str = "", uploaded_at=None
):
    """Apply an assignment, upload a repo (a folder or {path: content}) and run its jobs here.

    `values` are model field values (from assignment_values); the jobs run in this process,
    in order, as a worker would run them. `uploaded_at` pins the upload time the freshness
    check measures against (committed recordings keep their dates while the calendar moves).
    """
    from pathlib import Path
    from unittest import mock

    from reviewer.ops.demo import zip_tree
    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.jobs.inline import jobs_run_inline

    assignment = assignment_apply(values=values)[0]
    person, _ = Candidate.objects.get_or_create(name=candidate)
    data = zip_tree(repo, repo.name) if isinstance(repo, Path) else make_zip(repo)
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        submission = submission_create(
            upload=io.BytesIO(data),
            filename="repo.zip",
            candidate=person,
            assignment=assignment,
            stub_url=stub_url,
        ).submission
        if uploaded_at is not None:
            type(submission).objects.filter(pk=submission.pk).update(created=uploaded_at)
            submission.refresh_from_db()
        jobs_run_inline(submission=submission)
    return submission, {c.check_id: c for c in submission.checks.all()}


@pytest.fixture(scope="session", autouse=True)
def _end_leftover_database_sessions(django_db_setup, django_db_blocker):
    """Before the test database is dropped, end sessions that subprocesses left behind.

    Tests start real workers, stubs and servers; a process a test killed on purpose can
    leave its PostgreSQL session open for a moment, and the drop then fails with "being
    accessed by other users" (a warning, and a database left behind).
    """
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
