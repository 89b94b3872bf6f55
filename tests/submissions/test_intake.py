"""Submissions from uploads: storage, dedupe, rejection, and the ingest/report commands."""

from __future__ import annotations

import io
import json
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from submissions.intake.trees import tree_path
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Finding, Job, Submission
from tests.conftest import make_zip


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _create(assignment, candidate, data: bytes, name: str = "repo.zip"):
    return submission_create(
        upload=io.BytesIO(data), filename=name, candidate=candidate, assignment=assignment
    )


def test_it_stores_the_archive_with_its_sha256_and_unpacks_the_tree(
    assignment, candidate, small_zip
) -> None:
    import hashlib

    result = _create(assignment, candidate, small_zip)
    s = result.submission
    assert result.created and not result.reason
    assert s.archive_sha256 == hashlib.sha256(small_zip).hexdigest()
    assert s.archive_size == len(small_zip)
    assert s.archive.read() == small_zip
    tree = tree_path(s)
    # The single top-level folder of a "download ZIP" is stripped.
    assert (tree / "cassettes" / "0123456789abcdef.json").is_file()
    assert s.file_count == 3
    assert s.jobs.get().kind == Job.Kind.INTAKE


def test_the_same_archive_twice_gives_the_existing_submission(
    assignment, candidate, small_zip
) -> None:
    first = _create(assignment, candidate, small_zip)
    second = _create(assignment, candidate, small_zip, name="again.zip")
    assert not second.created
    assert second.submission.pk == first.submission.pk
    assert Submission.objects.count() == 1
    assert Job.objects.count() == 1


def test_a_rejected_archive_is_kept_with_its_reason_and_no_tree(assignment, candidate) -> None:
    evil = make_zip({"../../evil.txt": "x"}, root=None)
    result = _create(assignment, candidate, evil)
    s = result.submission
    assert s.status == Submission.Status.REJECTED
    assert "../../evil.txt" in result.reason
    assert not tree_path(s).exists()
    assert not s.jobs.exists()
    finding = Finding.objects.get(submission=s)
    assert finding.kind == "archive_rejected" and finding.path == "../../evil.txt"


def test_a_file_that_is_not_an_archive_is_rejected(assignment, candidate) -> None:
    result = _create(assignment, candidate, b"<html>not a zip</html>", name="repo.zip")
    assert result.submission.status == Submission.Status.REJECTED
    assert "not_an_archive" in result.reason


def test_upload_over_the_size_cap_stores_nothing(assignment, candidate, settings) -> None:
    from submissions.intake.upload import UploadRejected

    settings.INTAKE_MAX_UPLOAD_BYTES = 100
    with pytest.raises(UploadRejected, match="upload_too_large"):
        _create(assignment, candidate, b"x" * 1000)
    assert not Submission.objects.exists()


def test_scratch_space_is_cleaned_after_each_upload(
    assignment, candidate, small_zip, settings
) -> None:
    _create(assignment, candidate, small_zip)
    _create(assignment, candidate, make_zip({"a/../../b": "x"}, root=None))
    # Unpacked trees and the jobs' tree locks (other tests' too), not scratch.
    kept = {"submissions", "rerecords", "locks"}
    leftovers = [p.name for p in Path(settings.WORK_DIR).iterdir() if p.name not in kept]
    assert leftovers == []


def test_a_web_host_that_keeps_no_tree_leaves_nothing_and_the_job_unpacks_it(
    assignment, candidate, small_zip, settings, tmp_path
) -> None:
    """A web host with no worker beside it (INTAKE_KEEP_TREE=0) still refuses a hostile
    archive while the uploader waits, but keeps nothing of any upload: the intake job, on
    whichever host, unpacks the tree from storage."""
    from submissions.jobs.engine import job_execute

    settings.INTAKE_KEEP_TREE = False
    settings.WORK_DIR = work = tmp_path / "work"
    s = _create(assignment, candidate, small_zip).submission
    evil = _create(assignment, candidate, make_zip({"../../evil.txt": "x"}, root=None))
    assert evil.submission.status == Submission.Status.REJECTED  # still checked here
    assert s.file_count == 3
    assert list(work.iterdir()) == []  # no tree kept, no scratch left
    assert job_execute(job_id=s.jobs.get().pk) == Job.State.PASSED
    assert (tree_path(s) / "cassettes" / "0123456789abcdef.json").is_file()


def test_tree_is_unpacked_again_from_storage_on_another_machine(
    assignment, candidate, small_zip
) -> None:
    import shutil

    from submissions.intake.trees import submission_tree

    s = _create(assignment, candidate, small_zip).submission
    shutil.rmtree(tree_path(s))
    tree = submission_tree(s)
    assert (tree / "README.md").read_text() == "# Triage agent\n"


def test_ingest_prints_the_id_last_and_runs_inline(assignment, tmp_path, capsys) -> None:
    archive = tmp_path / "sub.zip"
    archive.write_bytes(make_zip({"README.md": "hi"}))
    call_command(
        "ingest", str(archive), assignment="cassette-triage", candidate="Grace", inline=True
    )
    out, err = capsys.readouterr()
    s = Submission.objects.get()
    assert out.strip().splitlines()[-1] == str(s.pk)
    assert "intake job" in err and "analysis job" in err
    assert [(j.kind, j.state) for j in s.jobs.order_by("pk")] == [
        ("intake", "passed"),
        ("analysis", "passed"),
    ]
    assert s.candidate.name == "Grace"


def test_ingest_of_a_hostile_archive_fails_with_the_reason(assignment, tmp_path, capsys) -> None:
    archive = tmp_path / "evil.zip"
    archive.write_bytes(make_zip({"/etc/cron.d/x": "boom"}, root=None))
    with pytest.raises(CommandError, match=r"rejected: .*/etc/cron\.d/x"):
        call_command("ingest", str(archive), assignment="cassette-triage", candidate="Mallory")


def test_ingest_names_unknown_assignment(db, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(make_zip({"a": "b"}))
    with pytest.raises(CommandError, match="no assignment with slug 'nope'"):
        call_command("ingest", str(archive), assignment="nope", candidate="X")


def test_ingest_refuses_a_bad_stub_url(assignment, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(make_zip({"a": "b"}))
    with pytest.raises(CommandError, match="not an http"):
        call_command(
            "ingest",
            str(archive),
            assignment="cassette-triage",
            candidate="X",
            stub_url="file:///etc/passwd",
        )


def test_ingest_wait_times_out_clearly_without_a_worker(assignment, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(make_zip({"a": "b"}))
    with pytest.raises(CommandError, match="is a worker running"):
        call_command(
            "ingest",
            str(archive),
            assignment="cassette-triage",
            candidate="X",
            wait=True,
            timeout=0.5,
        )


def test_report_is_stable_sorted_json_with_what_exists(assignment, tmp_path, capsys) -> None:
    archive = tmp_path / "sub.zip"
    archive.write_bytes(make_zip({"README.md": "hi"}))
    call_command(
        "ingest", str(archive), assignment="cassette-triage", candidate="Grace", inline=True
    )
    sid = capsys.readouterr().out.strip().splitlines()[-1]
    call_command("report", sid, format="json")
    first = capsys.readouterr().out
    call_command("report", sid, format="json")
    assert capsys.readouterr().out == first
    report = json.loads(first)
    assert list(report) == sorted(report)
    assert report["submission"] == int(sid)
    assert report["candidate"] == "Grace"
    assert report["assignment"] == "cassette-triage"
    assert len(report["archive_sha256"]) == 64
    assert report["jobs"] == [
        {
            "kind": "intake",
            "state": "passed",
            "outcome": "finished",
            "attempts": 1,
            "duration_s": mock.ANY,
        },
        {
            "kind": "analysis",
            "state": "passed",
            "outcome": "finished",
            "attempts": 1,
            "duration_s": mock.ANY,
        },
    ]
    ids = [c["id"] for c in report["checks"]]
    assert ids == sorted(ids)
    assert "cassettes.keys_match" in ids and "docs.entrypoints" in ids
    # Replay has not run (no replay command): its checks are absent, not faked.
    assert not any(i.startswith("replay.") for i in ids)
    assert report["scores"]["rubric"] == "cassette"


def test_report_of_unknown_submission_fails(db) -> None:
    with pytest.raises(CommandError, match="no submission 999"):
        call_command("report", "999")
