"""The demo cohort seeds cleanly and idempotently, like real uploads."""

from __future__ import annotations

from unittest import mock

from django.core.management import call_command

from reviewer.demo import DEMO_DIR, zip_tree
from submissions.jobs import queue
from submissions.models import Assignment, Submission


def test_seed_demo_ingests_every_demo_repo_and_prints_logins(db, capsys) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
        out = capsys.readouterr().out
        assert "reviewer:review-the-tapes" in out and "lead:lead-the-hiring" in out
        repos = {p.name for p in (DEMO_DIR / "repos").iterdir() if p.is_dir()}
        assert Submission.objects.count() == len(repos) >= 8
        assert not Submission.objects.filter(status=Submission.Status.REJECTED).exists()
        assert Assignment.objects.count() == 4
        call_command("seed_demo")  # idempotent: same archives, same submissions
    assert Submission.objects.count() == len(repos)


def test_demo_zip_is_deterministic_and_has_one_top_folder() -> None:
    repo = DEMO_DIR / "repos" / "cassette-good"
    first = zip_tree(repo, "cassette-good-main")
    assert first == zip_tree(repo, "cassette-good-main")
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert all(n.startswith("cassette-good-main/") for n in names)
    assert not any("__pycache__" in n for n in names)


def test_demo_users_can_log_in(client, db) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    assert client.login(username="reviewer", password="review-the-tapes")
    page = client.get("/")
    assert b"Cassette" in page.content
