"""Repositories fetched from real git servers on loopback: git's own `http-backend` (the
server most hosts run) and dulwich's. Public and token-protected, a ref moved or rewritten
after intake, git's own bundle format, every hostile tree, and a pack over the cap."""

from __future__ import annotations

import io
from pathlib import Path
from unittest import mock

import pytest

from submissions.intake.archive import RULES
from submissions.intake.repository import ref_check, submission_from_repository
from submissions.intake.trees import tree_path
from submissions.intake.upload import UploadRejected, submission_create
from submissions.jobs import queue
from submissions.models import Finding, Submission
from tests.conftest import SMALL_REPO
from tests.git_factories import git, git_available, make_repo, serve_git_http, serve_repository

needs_git = pytest.mark.skipif(not git_available(), reason="git's server needs git installed")

TOKEN = "ghp_GitHttpBackendToken0123456789abcdef"


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _commit(work: Path, files: dict[str, str], message: str, date: str) -> str:
    for name, text in files.items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(work, "add", "-A")
    stamp = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git(work, "commit", "-q", "-m", message, env=stamp)
    return git(work, "rev-parse", "HEAD").strip()


@pytest.fixture
def git_repo(tmp_path, settings):
    """A repository built with git (two commits), served bare by `git http-backend`."""
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    first = _commit(work, {"v.txt": "one"}, "start", "2024-05-01T10:00:00Z")
    second = _commit(
        work,
        {**{k: str(v) for k, v in SMALL_REPO.items()}, "v.txt": "two"},
        "record",
        "2024-05-02T10:00:00Z",
    )
    root = tmp_path / "served"
    root.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(root / "r.git"))
    return work, root, first, second


def _push(work: Path, root: Path, *args: str) -> None:
    git(work, "push", "-q", *args, str(root / "r.git"), "HEAD:refs/heads/main")


@needs_git
def test_a_public_repository_on_gits_own_server_is_fetched_at_its_head(
    git_repo, assignment, candidate
) -> None:
    _, root, first, second = git_repo
    with serve_git_http(root) as base:
        result = submission_from_repository(
            url=f"{base}/r.git", candidate=candidate, assignment=assignment, ref="main"
        )
        s = result.submission
        assert s.source_commit == second and s.source_ref == "refs/heads/main"
        assert s.source_commit_subject == "record" and not s.source_auth_sealed
        assert (tree_path(s) / "v.txt").read_text() == "two"
        from datetime import UTC, datetime

        early = submission_from_repository(
            url=f"{base}/r.git",
            candidate=candidate,
            assignment=assignment,
            before=datetime(2024, 5, 1, 12, tzinfo=UTC),
        )
        assert early.submission.source_commit == first


@needs_git
def test_a_token_protected_repository_on_gits_server_and_a_ref_moved_after_intake(
    git_repo, assignment, candidate, caplog
) -> None:
    work, root, _, judged = git_repo
    with serve_git_http(root, token=TOKEN) as base, caplog.at_level("DEBUG"):
        url = f"{base}/r.git"
        with pytest.raises(UploadRejected) as refused:
            submission_from_repository(url=url, candidate=candidate, assignment=assignment)
        assert "127.0.0.1" in str(refused.value) and "401" in str(refused.value)
        assert not Submission.objects.exists()  # nothing half-stored
        s = submission_from_repository(
            url=url, candidate=candidate, assignment=assignment, token=TOKEN
        ).submission
        assert s.source_commit == judged and TOKEN not in s.source_auth_sealed
        assert ref_check(s).ref_check_state == "same"
        later = _commit(work, {"v.txt": "three"}, "late fix", "2024-06-01T10:00:00Z")
        _push(work, root)
        moved = ref_check(s)
        assert moved.ref_check_state == "moved" and moved.ref_check_commit == later
        git(work, "reset", "-q", "--hard", "HEAD~2")
        rewritten = _commit(work, {"v.txt": "squashed"}, "squashed", "2024-06-02T10:00:00Z")
        _push(work, root, "--force")
        s = ref_check(s)
        assert s.ref_check_state == "rewritten" and s.ref_check_commit == rewritten
        assert s.source_commit == judged  # what was judged stays
        bad = ref_check(s, token="ghp_not_the_token")
        assert bad.ref_check_state == "failed" and "401" in bad.ref_check_detail
    for text in (caplog.text, bad.ref_check_detail, str(refused.value)):
        assert TOKEN not in text


@needs_git
def test_a_bundle_made_by_git_is_taken_at_its_head(git_repo, assignment, candidate) -> None:
    work, _, _, second = git_repo
    git(work, "bundle", "create", "-q", str(work.parent / "h.bundle"), "--all")
    s = submission_create(
        upload=io.BytesIO((work.parent / "h.bundle").read_bytes()),
        filename="h.bundle",
        candidate=candidate,
        assignment=assignment,
    ).submission
    assert s.source_kind == "bundle" and s.source_commit == second
    assert (tree_path(s) / "v.txt").read_text() == "two"


@needs_git
def test_a_symlink_from_gits_server_is_refused_and_nothing_unpacked(
    git_repo, assignment, candidate
) -> None:
    work, root, _, _ = git_repo
    (work / "link").symlink_to("/etc/passwd")
    git(work, "add", "link")
    git(work, "commit", "-q", "-m", "a link")
    _push(work, root)
    with serve_git_http(root) as base:
        result = submission_from_repository(
            url=f"{base}/r.git", candidate=candidate, assignment=assignment
        )
    assert result.submission.status == Submission.Status.REJECTED
    assert "(link)" in result.reason and not tree_path(result.submission).exists()


HOSTILE = {
    "symlink": ({"README.md": "hi", "link": (0o120000, "/etc/passwd")}, "link"),
    "gitlink": ({"README.md": "hi", "vendor": (0o160000, "")}, "link"),
    "dotdot": ({"README.md": "hi", "../evil.txt": "x"}, "zip_slip"),
    "dot-git": ({"README.md": "hi", ".git/config": "[core]"}, "bad_name"),
    "case": ({"README.md": "a", "readme.md": "b"}, "collision"),
    "control": ({"README.md": "hi", "a\x1bb.txt": "x"}, "bad_name"),
    "deep": ({"/".join(["d"] * 40) + "/f.txt": "x", "README.md": "hi"}, "too_deep"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_repository_on_a_server_is_refused_with_its_rule(
    case, assignment, candidate, settings
) -> None:
    files, rule = HOSTILE[case]
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    with serve_repository(make_repo([files])) as url:
        result = submission_from_repository(url=url, candidate=candidate, assignment=assignment)
    s = result.submission
    assert rule in RULES and f"({rule})" in result.reason
    assert s.status == Submission.Status.REJECTED and not tree_path(s).exists()
    assert not s.jobs.exists()
    assert Finding.objects.get(submission=s).kind == "archive_rejected"


@needs_git
def test_a_pack_over_the_cap_is_refused_and_nothing_is_stored(
    git_repo, assignment, candidate, settings
) -> None:
    import os

    work, root, _, _ = git_repo
    (work / "big.bin").write_bytes(os.urandom(300_000))
    git(work, "add", "big.bin")
    git(work, "commit", "-q", "-m", "big")
    _push(work, root)
    settings.INTAKE_MAX_UPLOAD_BYTES = 100_000
    with serve_git_http(root) as base, pytest.raises(UploadRejected, match="pack_too_large"):
        submission_from_repository(url=f"{base}/r.git", candidate=candidate, assignment=assignment)
    assert not Submission.objects.exists()


# --- checks: a repository against the same tree zipped; its history as evidence -----------


def _served_checks(tmp_path, values, commits, name):
    """Build `commits` with git, serve them with git's server, ingest the URL, run the jobs."""
    from submissions.assignments import assignment_apply
    from submissions.jobs.inline import jobs_run_inline
    from submissions.models import Candidate

    work = tmp_path / name
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for day, (files, message) in enumerate(commits, start=1):
        _commit(work, files, message, f"2024-05-{day:02d}T10:00:00Z")
    root = tmp_path / f"{name}-served"
    root.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(root / "r.git"))
    assignment = assignment_apply(values=values)[0]
    person, _ = Candidate.objects.get_or_create(name=name)
    with serve_git_http(root) as base:
        s = submission_from_repository(
            url=f"{base}/r.git", candidate=person, assignment=assignment
        ).submission
    jobs_run_inline(submission=s)
    return s, {c.check_id: c for c in s.checks.all()}


@pytest.fixture
def values(db, settings):
    from submissions.assignments import assignment_values

    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    return assignment_values({"slug": "served", "title": "Served", "replay_command": ""})


@needs_git
def test_a_repository_and_the_same_tree_zipped_get_the_same_checks(tmp_path, values) -> None:
    import json

    from django.core.management import call_command

    from tests.conftest import ingest_inline

    tree = {k: str(v) for k, v in SMALL_REPO.items()}
    _, zipped = ingest_inline(SMALL_REPO, values, candidate="Zip")
    served, checks = _served_checks(tmp_path, values, [(tree, "hand-in")], "Repo")
    assert checks.pop("cassettes.provenance").status == "pass"
    assert zipped.pop("cassettes.provenance").status == "skip"
    assert checks
    assert {k: (c.status, c.summary) for k, c in checks.items()} == {
        k: (c.status, c.summary) for k, c in zipped.items()
    }
    out = io.StringIO()
    call_command("report", str(served.pk), "--format", "json", stdout=out)
    source = json.loads(out.getvalue())["source"]
    assert source["kind"] == "repository" and source["commit"] == served.source_commit
    assert source["url"].endswith("/r.git") and source["ref"] == "refs/heads/main"


def _cassette(answer: str, recorded_at: str) -> str:
    import json

    return json.dumps(
        {
            "key": "0123456789abcdef",
            "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": answer}}]},
            "recorded_at": recorded_at,
            "model": "m",
        }
    )


CASSETTE = "cassettes/0123456789abcdef.json"
CODE = {"agent.py": "print('triage')\n"}


@needs_git
def test_a_hand_edit_in_a_later_commit_fails_provenance_naming_both(tmp_path, values) -> None:
    commits = [
        ({**CODE, CASSETTE: _cassette("billing", "2024-05-01T09:00:00Z")}, "record"),
        ({CASSETTE: _cassette("shipping", "2024-05-01T09:00:00Z")}, "fix the answer"),
    ]
    _, checks = _served_checks(tmp_path, values, commits, "Edited")
    check = checks["cassettes.provenance"]
    assert check.status == "fail", check.summary
    edit = check.evidence[0]
    assert edit["recorded_in"]["subject"] == "record"
    assert edit["changed_in"]["subject"] == "fix the answer"


@needs_git
def test_a_good_history_passes_provenance(tmp_path, values) -> None:
    commits = [
        ({**CODE, CASSETTE: _cassette("billing", "2024-05-01T09:00:00Z")}, "record"),
        ({CASSETTE: _cassette("shipping", "2024-05-02T09:00:00Z")}, "record again"),
    ]
    _, checks = _served_checks(tmp_path, values, commits, "Good")
    assert checks["cassettes.provenance"].status == "pass", checks["cassettes.provenance"].summary


def _nowhere(token: str, *texts: str) -> None:
    """The token, and the Basic header it is sent in, appear in none of `texts`."""
    import base64

    from submissions.intake.git.fetch import token_authorization

    header = token_authorization(token).removeprefix("Basic ")
    for text in texts:
        assert token not in text and header not in text
        assert base64.b64decode(header).decode() not in text


def _ingest(url: str, *args: str, candidate: str = "Ada") -> int:
    from django.core.management import call_command

    call_command("ingest", url, *args, assignment="cassette-triage", candidate=candidate)
    return Submission.objects.latest("pk").pk


@needs_git
def test_ingest_takes_a_token_from_the_environment_or_stdin_and_never_shows_it(
    git_repo, assignment, capsys, caplog, monkeypatch
) -> None:
    from django.core.management import CommandError, call_command

    from submissions.intake.git.fetch import token_authorization
    from submissions.sealed import unseal

    _, root, _, judged = git_repo
    monkeypatch.setenv("CR_REPO_TOKEN", TOKEN)
    with serve_git_http(root, token=TOKEN) as base, caplog.at_level("DEBUG"):
        url = f"{base}/r.git"
        with pytest.raises(CommandError) as asked:  # no token: what to do, on the command line
            _ingest(url)
        assert "needs an access token" in str(asked.value) and "--token-env" in str(asked.value)
        pk = _ingest(url, "--token-env", "CR_REPO_TOKEN")
        s = Submission.objects.get(pk=pk)
        assert s.source_commit == judged  # the server let the token's fetch in
        assert unseal(s.source_auth_sealed) == token_authorization(TOKEN)  # kept as the form
        assert str(pk) == capsys.readouterr().out.strip().splitlines()[-1]
        # stdin (a pipe: `pass show ... | manage.py ingest URL --token-file -`), another name
        monkeypatch.setattr("sys.stdin", io.StringIO(TOKEN + "\n"))
        other = _ingest(url, "--token-file", "-", candidate="Grace")
        assert Submission.objects.get(pk=other).source_commit == judged
        # a token the server refuses: the host and git's error, not the token
        monkeypatch.setenv("CR_REPO_TOKEN", "ghp_WrongToken0123456789")
        with pytest.raises(CommandError) as refused:
            _ingest(url, "--token-env", "CR_REPO_TOKEN", candidate="Eve")
        assert "127.0.0.1" in str(refused.value) and "401" in str(refused.value)
        assert "ghp_WrongToken" not in str(refused.value)
        assert "the access token was refused" in str(refused.value)
        out, err = capsys.readouterr()
        report = io.StringIO()
        call_command("report", pk, format="json", stdout=report)
        dump = io.StringIO()
        call_command("dumpdata", stdout=dump)
    _nowhere(TOKEN, out, err, caplog.text, str(refused.value), report.getvalue(), dump.getvalue())
    assert '"source"' in report.getvalue()


def test_ingest_refuses_a_token_it_cannot_read_naming_where_not_what(
    assignment, tmp_path, monkeypatch
) -> None:
    from django.core.management import CommandError

    url = "https://git.example.com/r.git"
    monkeypatch.delenv("CR_REPO_TOKEN", raising=False)
    with pytest.raises(CommandError, match="CR_REPO_TOKEN is not set"):
        _ingest(url, "--token-env", "CR_REPO_TOKEN")
    empty = tmp_path / "token"
    empty.write_text("\n")
    with pytest.raises(CommandError, match="holds no access token"):
        _ingest(url, "--token-file", str(empty))
    with pytest.raises(CommandError, match="could not be read"):
        _ingest(url, "--token-file", str(tmp_path / "missing"))
    two = tmp_path / "two"
    two.write_text("ghp_one\nghp_two\n")
    with pytest.raises(CommandError, match="one access token on one line") as caught:
        _ingest(url, "--token-file", str(two))
    assert "ghp_one" not in str(caught.value)
    bundle = tmp_path / "r.bundle"
    bundle.write_bytes(b"# v2 git bundle\n")
    monkeypatch.setenv("CR_REPO_TOKEN", TOKEN)
    with pytest.raises(CommandError, match="for a repository URL") as caught:
        _ingest(str(bundle), "--token-env", "CR_REPO_TOKEN")
    assert TOKEN not in str(caught.value)
    with pytest.raises(CommandError):  # one source of the token, not two
        _ingest(url, "--token-env", "CR_REPO_TOKEN", "--token-file", str(two))
    assert not Submission.objects.exists()
