"""The file viewer: evidence lines open the file there, redacted and lit; nothing outside
the submission's tree, no link, no special file, and no more than the cap is shown. Files come
from the stored archive (zip, tar, git bundle), so an empty WORK_DIR changes nothing."""

from __future__ import annotations

import io
import json
import os
import shutil

import pytest
import yaml
from django.urls import reverse

from reviewer.ops.demo import DEMO_DIR
from reviewer.views.files import MAX_BYTES
from submissions.assignments import assignment_values
from tests.conftest import ingest_inline, make_zip

KEY = "sk-proj-Xk3Jd9sKq2LmPz8RtYvB4nW7cF1gH6eA0uIoQwErTyUiOpAsDfGh"


@pytest.fixture
def submission(db, settings, tmp_path):
    settings.WORK_DIR = tmp_path / "work"
    settings.MEDIA_ROOT = tmp_path / "media"
    data = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    cassette = {
        "key": "k1",
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "<b>ok</b>"}}]},
        "recorded_at": "2026-11-20T09:00:00Z",
        "model": "m",
        "api_key": KEY,
    }
    repo = {
        "cassettes/k1.json": json.dumps(cassette, indent=2),
        # Random hex: a megabyte of one letter would be refused as a zip bomb.
        "big.txt": os.urandom(MAX_BYTES // 2 + 10).hex(),
        "blob.bin": b"\x00\x01\x02" * 10,
        "README.md": "hello",
    }
    s, _ = ingest_inline(repo, assignment_values({**data, "replay_command": ""}))
    return s


def test_an_evidence_line_opens_the_file_there_redacted(
    client, reviewer, submission, settings
) -> None:
    shutil.rmtree(settings.WORK_DIR)  # a web host that never unpacked this hand-in
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    page = client.get(submission.get_absolute_url()).content.decode()
    url = reverse("submission_file", args=[submission.pk])
    assert f'href="{url}?path=cassettes/k1.json' in page  # the recordings list links it
    shown = client.get(url, {"path": "cassettes/k1.json", "line": "9"})
    assert shown.status_code == 200
    html = shown.content.decode()
    assert '<tr id="L9" class="lit">' in html
    assert KEY not in html and KEY[:12] not in html  # redacted, never in full
    assert "&lt;b&gt;ok&lt;/b&gt;" in html and "<b>ok</b>" not in html
    assert '<span class="k">&quot;recorded_at&quot;</span>' in html
    assert not settings.WORK_DIR.exists()  # nothing unpacked on a GET


@pytest.mark.parametrize(
    ("path", "why"),
    [("../../etc/passwd", "not a path inside"), ("/etc/passwd", "not a path inside"),
     ("cassettes/../README.md", "not a path inside"), ("nope.json", "no such file"),
     ("", "not a path inside"), ("./README.md", "not a path inside"),
     ("cassettes//k1.json", "not a path inside"), ("cassettes\\k1.json", "no such file"),
     ("README.md\x00", "no such file"), ("repo-main/README.md", "no such file"),
     ("cassettes", "a folder, not a file"), ("__MACOSX/README.md", "no such file")],
)  # fmt: skip
def test_nothing_outside_the_tree_is_shown(client, reviewer, submission, path, why) -> None:
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    response = client.get(reverse("submission_file", args=[submission.pk]), {"path": path})
    assert response.status_code == 404 and why in response.content.decode()


def test_big_and_binary_files_are_capped_or_named(client, reviewer, submission) -> None:
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[submission.pk])
    big = client.get(url, {"path": "big.txt"}).content.decode()
    assert "only the first 1 MiB is shown" in big and len(big) < 2 * MAX_BYTES
    assert "A binary file" in client.get(url, {"path": "blob.bin"}).content.decode()


def test_another_reviewers_submission_is_not_found(client, reviewer2, submission) -> None:
    client.force_login(reviewer2)
    url = reverse("submission_file", args=[submission.pk])
    assert client.get(url, {"path": "README.md"}).status_code == 404


def test_a_graded_output_the_replay_wrote_opens_as_written_by_its_run(
    client, reviewer, submission
) -> None:
    """Evidence names `out/answers.json`, which the run wrote and the hand-in does not hold:
    the viewer shows the kept copy, says which run wrote it, and links the other run's."""
    from submissions.runfiles import run_files_keep

    kept = run_files_keep(
        submission=submission,
        job=None,
        runs={
            1: {"out/answers.json": b'{"T-1": "billing"}\n', "out/run.log": None},
            2: {"out/answers.json": f'{{"T-1": "billing", "key": "{KEY}"}}'.encode()},
        },
    )
    assert kept == 2
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[submission.pk])
    first = client.get(url, {"path": "out/answers.json"})
    assert first.status_code == 200
    body = first.content.decode()
    assert "written by run 1" in body and "billing" in body
    assert "run=2" in body  # the other run's copy is linked
    second = client.get(url, {"path": "out/answers.json", "run": "2"}).content.decode()
    assert "written by run 2" in second
    assert KEY not in second and "billing" in second  # kept redacted
    assert client.get(url, {"path": "out/run.log"}).status_code == 404  # never written
    run_files_keep(submission=submission, job=None, runs={1: {}})  # a new replay replaces
    assert client.get(url, {"path": "out/answers.json"}).status_code == 404


def test_a_file_over_the_per_file_cap_is_refused_saying_so(
    client, reviewer, submission, settings
) -> None:
    settings.INTAKE_MAX_FILE_BYTES = 1000  # lowered after intake: big.txt is now over it
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[submission.pk])
    response = client.get(url, {"path": "big.txt"})
    assert response.status_code == 413
    assert "over the per-file limit of 1000 bytes" in response.content.decode()
    assert client.get(url, {"path": "README.md"}).status_code == 200  # small files still show


def test_a_code_location_links_to_the_file_with_an_empty_work_dir(
    client, reviewer, submission, settings
) -> None:
    from submissions.models import CheckResult

    shutil.rmtree(settings.WORK_DIR)
    CheckResult.objects.create(
        submission=submission, check_id="replay.no_network_attempts", status="fail",
        summary="read at cassettes/k1.json:9 and gone.py:3",
    )  # fmt: skip
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    page = client.get(submission.get_absolute_url()).content.decode()
    url = reverse("submission_file", args=[submission.pk])
    assert f'<a href="{url}?path=cassettes/k1.json&amp;line=9#L9">cassettes/k1.json:9</a>' in page
    assert "gone.py:3" in page and "path=gone.py" not in page


def test_a_missing_stored_archive_is_a_404_that_says_so(
    client, reviewer, submission, settings
) -> None:
    from django.core.files.storage import default_storage

    default_storage.delete(submission.archive.name)
    submission.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[submission.pk])
    response = client.get(url, {"path": "README.md"})
    assert response.status_code == 404
    assert "the stored archive is missing from storage" in response.content.decode()


def _upload(data: bytes, filename: str):
    from unittest import mock

    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.models import Assignment, Candidate

    assignment, _ = Assignment.objects.get_or_create(title="A", slug="a")
    person, _ = Candidate.objects.get_or_create(name="Cand")
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(data), filename=filename, candidate=person, assignment=assignment
        ).submission


@pytest.mark.parametrize("fmt", ["tar", "tar.gz", "tar.xz"])
def test_a_tar_hand_in_shows_its_files_from_storage(client, reviewer, settings, tmp_path, fmt):
    from tests.archive_factories import tar_bytes, tar_dir, tar_file

    settings.WORK_DIR, settings.MEDIA_ROOT = tmp_path / "work", tmp_path / "media"
    members = [tar_dir("proj/"), tar_file("proj/src/app.py", b"print(1)\nprint(2)\n"),
               tar_file("proj/README.md", b"hi")]  # fmt: skip
    s = _upload(tar_bytes(members, fmt), f"repo.{fmt}")
    assert s.status != "rejected", s.status_reason
    shutil.rmtree(settings.WORK_DIR)
    s.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[s.pk])
    html = client.get(url, {"path": "src/app.py", "line": "2"}).content.decode()
    assert '<tr id="L2" class="lit">' in html and "print(2)" in html
    missing = client.get(url, {"path": "proj/README.md"})  # the single root was stripped
    assert missing.status_code == 404 and "no such file" in missing.content.decode()
    assert client.get(url, {"path": "src"}).status_code == 404


def test_a_git_bundle_shows_the_file_at_the_judged_commit(client, reviewer, settings, tmp_path):
    from tests.git_factories import make_bundle

    settings.WORK_DIR, settings.MEDIA_ROOT = tmp_path / "work", tmp_path / "media"
    settings.ARCHIVE_CACHE_DIR = tmp_path / "cache"
    data = make_bundle([{"v.txt": "one", "d/x.txt": "x"}, {"v.txt": "two\nlines", "d/x.txt": "x"}])
    s = _upload(data, "repo.bundle")
    assert s.source_commit and s.status != "rejected", s.status_reason
    shutil.rmtree(settings.WORK_DIR)
    s.reviewers.add(reviewer)
    client.force_login(reviewer)
    url = reverse("submission_file", args=[s.pk])
    html = client.get(url, {"path": "v.txt", "line": "2"}).content.decode()
    assert '<tr id="L2" class="lit">' in html and "lines" in html
    # The bundle's pack was indexed once in this host's cache: later reads inflate only
    # the objects they need. An index evicted from the cache is made again.
    cache = settings.ARCHIVE_CACHE_DIR
    made = sorted(p.name for p in cache.iterdir())
    assert made == [f"{s.archive_sha256}.git.idx", f"{s.archive_sha256}.git.pack"]
    (cache / made[0]).unlink()
    again = client.get(url, {"path": "v.txt"})
    assert again.status_code == 200 and "lines" in again.content.decode()  # the judged commit
    assert (cache / made[0]).is_file()
    for path, why in [("d", "a folder, not a file"), ("nope", "no such file"),
                      ("d/x.txt/y", "no such file"), (".git/config", "no such file")]:  # fmt: skip
        response = client.get(url, {"path": path})
        assert response.status_code == 404 and why in response.content.decode(), path


def test_a_remote_storage_archive_is_fetched_once_into_a_bounded_cache(
    reviewer, settings, tmp_path
) -> None:
    """A storage that is not a local folder (S3): the archive is copied into this host's cache
    by sha256, checked against its hash, and the cache keeps under its byte cap, least recently
    used out first."""
    from submissions.intake.stored import member_read

    settings.WORK_DIR = tmp_path / "work"
    settings.ARCHIVE_CACHE_DIR = cache = tmp_path / "cache"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    first = _upload(make_zip({"a.txt": "A" * 1000}), "a.zip")
    second = _upload(make_zip({"b.txt": os.urandom(3000).hex()}), "b.zip")
    settings.ARCHIVE_CACHE_BYTES = first.archive_size + second.archive_size - 1
    assert member_read(first, "a.txt", limit=10).head == b"A" * 10
    assert member_read(first, "a.txt", limit=MAX_BYTES).size == 1000
    assert sorted(p.name for p in cache.iterdir()) == [first.archive_sha256]
    member_read(second, "b.txt", limit=10)
    assert sorted(p.name for p in cache.iterdir()) == [second.archive_sha256]  # first evicted


def test_a_cached_archive_whose_hash_does_not_match_is_refused(reviewer, settings, tmp_path):
    from submissions.intake.stored import MemberRefused, member_read

    settings.WORK_DIR, settings.ARCHIVE_CACHE_DIR = tmp_path / "work", tmp_path / "cache"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    s = _upload(make_zip({"a.txt": "A"}), "a.zip")
    s.archive_sha256 = "0" * 64
    with pytest.raises(MemberRefused, match="does not match its recorded hash"):
        member_read(s, "a.txt", limit=10)
    assert list((tmp_path / "cache").iterdir()) == []  # nothing kept of a bad copy


def test_hostile_names_in_an_archive_never_match_a_tree_path() -> None:
    """Names unpacking refuses or skips are never served, whatever the request asks."""
    from submissions.intake.archive.core import DEFAULT_LIMITS
    from submissions.intake.archive.members import NoSuchMember, read_member
    from tests.archive_factories import zip_bytes

    data = zip_bytes({"../evil.txt": b"x", "/abs.txt": b"x", "a/../b.txt": b"x",
                      "C:/win.txt": b"x", "__MACOSX/ok.txt": b"x", "ok.txt": b"fine"})  # fmt: skip
    for path in ["evil.txt", "abs.txt", "b.txt", "win.txt", "__MACOSX/ok.txt", "C:/win.txt"]:
        with pytest.raises(NoSuchMember):
            read_member(io.BytesIO(data), len(data), "zip", path, 100, DEFAULT_LIMITS)
    ok = read_member(io.BytesIO(data), len(data), "zip", "ok.txt", 100, DEFAULT_LIMITS)
    assert (ok.head, ok.size) == (b"fine", 4)
