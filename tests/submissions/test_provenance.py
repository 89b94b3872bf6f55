"""`cassettes.provenance`: the hand-in's history read for hand-edited recordings."""

from __future__ import annotations

import io
import json
import time

import pytest

from cassettes_app.checks.catalog import PROVENANCE
from cassettes_app.checks.provenance import ARCHIVE_REASON
from submissions.intake.git.history import MAX_COMMITS, recording_history
from submissions.intake.git.objects import Objects
from tests.git_factories import make_bundle, make_repo

KEY = "0123456789abcdef"
PATH = f"cassettes/{KEY}.json"
CODE = {"agent.py": "print('triage')\n", "Makefile": "test:\n\tpython agent.py\n"}


def _cassette(answer: str, recorded_at: str) -> str:
    return json.dumps(
        {
            "key": KEY,
            "request": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": answer}}]},
            "recorded_at": recorded_at,
            "model": "gpt-4o-mini",
        }
    )


def _checks(db_assignment_values, data: bytes, name: str = "Ada"):
    from unittest import mock

    from submissions.assignments import assignment_apply
    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.jobs.inline import jobs_run_inline
    from submissions.models import Candidate

    assignment = assignment_apply(values=db_assignment_values)[0]
    person, _ = Candidate.objects.get_or_create(name=name)
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        submission = submission_create(
            upload=io.BytesIO(data),
            filename="hand-in.bundle",
            candidate=person,
            assignment=assignment,
        ).submission
        jobs_run_inline(submission=submission)
    return submission, {c.check_id: c for c in submission.checks.all()}


@pytest.fixture
def values(db):
    from submissions.assignments import assignment_values

    return assignment_values(
        {"slug": "prov", "title": "Provenance", "shape": "cassette", "replay_command": ""}
    )


def test_a_cassette_edited_later_with_its_time_kept_fails_naming_both_commits(values) -> None:
    commits = [
        {**CODE, PATH: _cassette("billing", "2024-05-01T10:00:00Z")},
        {**CODE, PATH: _cassette("shipping", "2024-05-01T10:00:00Z")},
    ]
    data = make_bundle(commits, messages=["record cassettes", "fix the answer"])
    _, checks = _checks(values, data)
    check = checks[PROVENANCE]
    assert check.status == "fail", check.summary
    edit = check.evidence[0]
    assert edit["path"] == PATH
    assert edit["recorded_in"]["subject"] == "record cassettes"
    assert edit["changed_in"]["subject"] == "fix the answer"
    assert edit["recorded_at"] == "2024-05-01T10:00:00Z"
    assert edit["recorded_in"]["short"] in edit["message"]
    assert edit["changed_in"]["short"] in edit["message"]
    assert "2023-11-14" in edit["changed_in"]["date"]  # the commit's own date, shown


def test_both_commits_are_linked_and_the_viewer_shows_the_file_at_each(
    values, client, lead
) -> None:
    from django.urls import reverse

    commits = [
        {**CODE, PATH: _cassette("billing", "2024-05-01T10:00:00Z")},
        {**CODE, PATH: _cassette("<b>shipping</b>", "2024-05-01T10:00:00Z")},
        {**CODE, PATH: _cassette("<b>shipping</b>", "2024-05-01T10:00:00Z"), "late.txt": "x"},
    ]
    data = make_bundle(commits, messages=["record cassettes", "fix <i>the</i> answer", "more"])
    submission, checks = _checks(values, data)
    edit = checks[PROVENANCE].evidence[0]
    recorded, changed = edit["recorded_in"]["commit"], edit["changed_in"]["commit"]
    client.force_login(lead)
    page = client.get(submission.get_absolute_url()).content.decode()
    viewer = reverse("submission_file", args=[submission.pk])
    for sha in (recorded, changed):
        assert f"{viewer}?path=cassettes/{KEY}.json&amp;commit={sha}" in page
    before = client.get(viewer, {"path": PATH, "commit": recorded}).content.decode()
    after = client.get(viewer, {"path": PATH, "commit": changed}).content.decode()
    assert "billing" in before and "shipping" not in before and "not the commit judged" in before
    assert "&lt;b&gt;shipping" in after and "<b>shipping" not in after  # escaped
    assert "fix &lt;i&gt;the&lt;/i&gt; answer" in after
    judged = client.get(viewer, {"path": "late.txt"})
    assert judged.status_code == 200 and "the commit judged" in judged.content.decode()
    # late.txt is not at the earlier commit; a made-up commit and a prefix are refused
    assert client.get(viewer, {"path": "late.txt", "commit": recorded}).status_code == 404
    missing = client.get(viewer, {"path": PATH, "commit": "f" * 40})
    assert missing.status_code == 404 and "no such commit" in missing.content.decode()
    short = client.get(viewer, {"path": PATH, "commit": recorded[:10]})
    assert short.status_code == 404 and "40 hex digits" in short.content.decode()


def test_the_viewer_refuses_a_commit_for_an_archive(values, client, lead) -> None:
    from django.urls import reverse

    from tests.archive_factories import zip_bytes

    submission, _ = _checks(
        values, zip_bytes({PATH: _cassette("a", "2024-05-01T10:00:00Z").encode()})
    )
    client.force_login(lead)
    viewer = reverse("submission_file", args=[submission.pk])
    shown = client.get(viewer, {"path": PATH, "commit": "a" * 40})
    assert shown.status_code == 404 and "an archive has no history" in shown.content.decode()


def test_a_re_recorded_cassette_passes(values) -> None:
    commits = [
        {**CODE, PATH: _cassette("billing", "2024-05-01T10:00:00Z")},
        {**CODE, PATH: _cassette("shipping", "2024-05-02T09:30:00Z")},
    ]
    _, checks = _checks(values, make_bundle(commits))
    check = checks[PROVENANCE]
    assert check.status == "pass", check.summary
    assert "2 commits read" in check.summary
    assert not [e for e in check.evidence if e.get("level") != "info"]


def test_a_recording_committed_before_any_code_is_information(values) -> None:
    commits = [
        {"README.md": "# hi\n", PATH: _cassette("billing", "2024-05-01T10:00:00Z")},
        {"README.md": "# hi\n", **CODE, PATH: _cassette("billing", "2024-05-01T10:00:00Z")},
    ]
    _, checks = _checks(values, make_bundle(commits, messages=["cassettes", "the code"]))
    check = checks[PROVENANCE]
    assert check.status == "pass"
    (note,) = check.evidence
    assert note["level"] == "info" and note["path"] == PATH
    assert "before any code" in note["message"] and "“the code”" in note["message"]


def test_an_archive_skips_it_with_the_reason(values) -> None:
    from tests.conftest import ingest_inline

    _, checks = ingest_inline({**CODE, PATH: _cassette("a", "2024-05-01T10:00:00Z")}, values)
    assert checks[PROVENANCE].status == "skip"
    assert checks[PROVENANCE].summary == ARCHIVE_REASON


def test_a_history_of_5000_commits_is_read_to_the_bound() -> None:
    commits = [
        {**CODE, "notes.txt": str(i), PATH: _cassette("a", "2024-05-01T10:00:00Z")}
        for i in range(5000)
    ]
    repo = make_repo(commits, times=list(range(1_700_000_000, 1_700_005_000)))
    objects = Objects({b"refs/heads/main": repo.refs[b"refs/heads/main"]}, repo.object_store)
    start = time.monotonic()
    history = recording_history(objects, repo.refs[b"refs/heads/main"].decode(), [PATH])
    assert time.monotonic() - start < 5
    assert history.commits == MAX_COMMITS < 5000 and history.bounded
    assert history.changes == []  # the cassette never changed in the commits read

    from cassettes_app.checks.provenance import cassettes_provenance

    outcome = cassettes_provenance(history, [PATH], lambda path, data: ())
    assert outcome.status == "pass"
    assert f"the newest {MAX_COMMITS}; older ones were not read" in outcome.summary
