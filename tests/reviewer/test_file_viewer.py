"""The file viewer: evidence lines open the file there, redacted and lit; nothing outside
the submission's tree, no link, no special file, and no more than the cap is shown."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from django.urls import reverse

from reviewer.ops.demo import DEMO_DIR
from reviewer.views.files import MAX_BYTES, FileRefused, _safe_open
from submissions.assignments import assignment_values
from tests.conftest import ingest_inline

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


def test_an_evidence_line_opens_the_file_there_redacted(client, reviewer, submission) -> None:
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


@pytest.mark.parametrize(
    ("path", "why"),
    [("../../etc/passwd", "not a path inside"), ("/etc/passwd", "not a path inside"),
     ("cassettes/../README.md", "not a path inside"), ("nope.json", "no such file"),
     ("", "not a path inside")],
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


def test_links_and_special_files_are_refused(tmp_path) -> None:
    root = tmp_path / "tree"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("ok")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "dirlink")
    os.mkfifo(root / "fifo")
    assert _safe_open(root, "d/f.txt") == (b"ok", 2)
    for path, why in [("link.txt", "symbolic link"), ("dirlink/secret.txt", "symbolic link"),
                      ("fifo", "not a regular file")]:  # fmt: skip
        with pytest.raises(FileRefused, match=why):
            _safe_open(root, path)


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
