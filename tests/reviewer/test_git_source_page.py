"""A git hand-in's page: the commit judged, its date and subject, and where it came from."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.urls import reverse

from submissions.intake.upload import submission_create
from submissions.jobs import queue
from tests.conftest import SMALL_REPO
from tests.git_factories import make_bundle


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _bundle_submission(assignment, candidate, commits=None, messages=None):
    data = make_bundle(
        commits or [{"v.txt": "one"}, SMALL_REPO], messages=messages or ["start", "Add cassettes"]
    )
    return submission_create(
        upload=io.BytesIO(data), filename="h.bundle", candidate=candidate, assignment=assignment
    ).submission


def test_the_page_shows_the_commit_its_date_and_subject(
    client, lead, assignment, candidate
) -> None:
    s = _bundle_submission(assignment, candidate)
    assert s.source_commit_subject == "Add cassettes"
    assert s.source_commit_time.isoformat() == "2023-11-14T23:13:20+00:00"
    client.force_login(lead)
    page = client.get(s.get_absolute_url()).content.decode()
    assert s.source_commit[:10] in page
    assert "2023-11-14 23:13:20" in page and "“Add cassettes”" in page
    assert "refs/heads/main" in page and "Git bundle" in page
    assert "commit dates are the candidate's to set" in page
    shown = client.get(
        reverse("submission_file", args=[s.pk]) + "?path=cassettes/0123456789abcdef.json"
    )
    assert s.source_commit[:10] in shown.content.decode()


def test_an_archive_shows_no_commit(client, lead, assignment, candidate, small_zip) -> None:
    s = submission_create(
        upload=io.BytesIO(small_zip), filename="r.zip", candidate=candidate, assignment=assignment
    ).submission
    client.force_login(lead)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "<dt>Commit</dt>" not in page
