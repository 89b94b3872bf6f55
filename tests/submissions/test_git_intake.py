"""Hand-ins from a git bundle: judged at one commit, under the archive rules, never half-stored."""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from submissions.intake.archive import RULES, ArchiveRejected
from submissions.intake.git.pack import GitLimits, scan_pack
from submissions.intake.trees import submission_tree, tree_path
from submissions.intake.upload import GitSource, submission_create
from submissions.jobs import queue
from submissions.models import Finding, Job, Submission
from tests.conftest import SMALL_REPO
from tests.git_factories import copy_delta, make_bundle, make_pack


@pytest.fixture(autouse=True)
def no_broker():
    from unittest import mock

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _create(assignment, candidate, data: bytes, source: GitSource | None = None):
    return submission_create(
        upload=io.BytesIO(data),
        filename="repo.bundle",
        candidate=candidate,
        assignment=assignment,
        source=source,
    )


def test_a_bundle_is_stored_with_its_sha256_and_judged_at_its_head(assignment, candidate) -> None:
    data = make_bundle([SMALL_REPO])
    result = _create(assignment, candidate, data)
    s = result.submission
    assert result.created and not result.reason
    assert s.archive_sha256 == hashlib.sha256(data).hexdigest()
    assert s.archive.read() == data
    assert s.source_kind == Submission.SourceKind.BUNDLE
    assert s.source_ref == "refs/heads/main"
    assert len(s.source_commit) == 40
    assert s.source_url == ""
    assert s.archive_format == "git bundle" and s.file_count == 3
    tree = tree_path(s)
    assert (tree / "cassettes" / "0123456789abcdef.json").read_text() == SMALL_REPO[
        "cassettes/0123456789abcdef.json"
    ]
    assert s.jobs.get().kind == Job.Kind.INTAKE


def test_a_bundle_gets_the_same_checks_as_the_same_tree_zipped(db) -> None:
    from submissions.assignments import assignment_values
    from tests.conftest import ingest_inline

    values = assignment_values({"slug": "git-same", "title": "Same", "replay_command": ""})
    _, zipped = ingest_inline(SMALL_REPO, values, candidate="Zip")
    bundled, checks = _ingest_bundle_inline(make_bundle([SMALL_REPO]), values, "Bundle")
    assert bundled.status != Submission.Status.REJECTED
    # Only the history differs: a bundle has one to read, a zip has none.
    assert checks.pop("cassettes.provenance").status == "pass"
    assert zipped.pop("cassettes.provenance").status == "skip"
    assert {k: c.status for k, c in checks.items()} == {k: c.status for k, c in zipped.items()}
    assert checks


def _ingest_bundle_inline(data: bytes, values: dict, name: str):
    from submissions.assignments import assignment_apply
    from submissions.jobs.inline import jobs_run_inline
    from submissions.models import Candidate

    assignment = assignment_apply(values=values)[0]
    person, _ = Candidate.objects.get_or_create(name=name)
    submission = _create(assignment, person, data).submission
    jobs_run_inline(submission=submission)
    return submission, {c.check_id: c for c in submission.checks.all()}


HOSTILE = {
    "symlink": ({"README.md": "hi", "link": (0o120000, "/etc/passwd")}, "link", "link"),
    "gitlink": ({"README.md": "hi", "vendor": (0o160000, "")}, "link", "vendor"),
    "dotdot": ({"README.md": "hi", "../evil.txt": "x"}, "zip_slip", ".."),
    "dot-git": ({"README.md": "hi", ".git/config": "[core]"}, "bad_name", ".git"),
    "dot-git-case": ({"README.md": "hi", ".GIT/hooks/x": "x"}, "bad_name", ".GIT"),
    "case": ({"README.md": "a", "readme.md": "b"}, "collision", None),
    "control": ({"README.md": "hi", "a\x1bb.txt": "x"}, "bad_name", "a\x1bb.txt"),
    "deep": ({"/".join(["d"] * 40) + "/f.txt": "x", "README.md": "hi"}, "too_deep", None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_tree_is_refused_with_its_rule_and_nothing_half_stored(
    assignment, candidate, case
) -> None:
    files, rule, entry = HOSTILE[case]
    result = _create(assignment, candidate, make_bundle([files]))
    s = result.submission
    assert rule in RULES
    assert s.status == Submission.Status.REJECTED
    assert f"({rule})" in result.reason
    assert len(s.source_commit) == 40  # the commit judged is kept with the refusal
    assert not tree_path(s).exists()
    assert not s.jobs.exists()
    finding = Finding.objects.get(submission=s)
    assert finding.kind == "archive_rejected"
    if entry is not None:
        assert finding.path.startswith(entry)


def test_an_oversized_blob_is_refused_before_it_is_inflated(
    assignment, candidate, settings
) -> None:
    settings.INTAKE_MAX_FILE_BYTES = 1000
    result = _create(assignment, candidate, make_bundle([{"big.bin": b"x" * 5000}]))
    assert result.submission.status == Submission.Status.REJECTED
    assert "(object_too_large)" in result.reason
    assert not tree_path(result.submission).exists()


def test_an_lfs_pointer_is_written_and_reported(assignment, candidate) -> None:
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 9\n"
    files = {**SMALL_REPO, "cassettes/big.json": pointer}
    s = _create(assignment, candidate, make_bundle([files])).submission
    finding = Finding.objects.get(submission=s, kind="lfs_pointer")
    assert finding.path == "cassettes/big.json"
    assert "LFS pointer" in finding.message
    assert (tree_path(s) / "cassettes" / "big.json").read_text() == pointer


def test_before_picks_the_last_commit_dated_at_or_before_it(assignment, candidate) -> None:
    times = [1_700_000_000, 1_700_003_600, 1_700_007_200]
    data = make_bundle([{"v.txt": "one"}, {"v.txt": "two"}, {"v.txt": "three"}], times=times)
    before = datetime.fromtimestamp(1_700_003_600, UTC)
    s = _create(assignment, candidate, data, GitSource(before=before)).submission
    assert (tree_path(s) / "v.txt").read_text() == "two"
    late = _create(assignment, candidate, data).submission
    assert late.pk != s.pk and (tree_path(late) / "v.txt").read_text() == "three"


def test_before_the_first_commit_is_refused(assignment, candidate) -> None:
    data = make_bundle([{"v.txt": "one"}])
    early = GitSource(before=datetime(2000, 1, 1, tzinfo=UTC))
    result = _create(assignment, candidate, data, early)
    assert "(no_commit_before)" in result.reason


def test_the_same_commit_twice_is_the_same_submission(assignment, candidate) -> None:
    first = _create(assignment, candidate, make_bundle([SMALL_REPO]))
    # Another bundle (another branch name, so other bytes) of the same commit.
    again = _create(assignment, candidate, make_bundle([SMALL_REPO], ref=b"trunk"))
    assert not again.created
    assert again.submission.pk == first.submission.pk
    assert Submission.objects.count() == 1


def test_an_unknown_ref_is_refused_with_the_refs_there(assignment, candidate) -> None:
    result = _create(assignment, candidate, make_bundle([SMALL_REPO]), GitSource(ref="nope"))
    assert "(no_such_ref)" in result.reason and "refs/heads/main" in result.reason


def test_a_bundle_tree_is_unpacked_again_from_storage(assignment, candidate) -> None:
    s = _create(assignment, candidate, make_bundle([{"v.txt": "one"}, {"v.txt": "two"}])).submission
    shutil.rmtree(tree_path(s))
    assert (submission_tree(s) / "v.txt").read_text() == "two"


def test_a_thin_bundle_is_refused_as_incomplete(assignment, candidate) -> None:
    data = make_bundle([SMALL_REPO])
    head, _, rest = data.partition(b"\n")
    thin = head + b"\n-" + b"a" * 40 + b" base\n" + rest
    assert "(incomplete)" in _create(assignment, candidate, thin).reason


# --- the pack guard ----------------------------------------------------------------------


def test_a_delta_chain_deeper_than_the_cap_is_refused() -> None:
    base = b"x" * 100
    pack = make_pack(base, [copy_delta(100, 100)] * 5)
    assert scan_pack(pack, GitLimits()).deepest_delta == 5
    with pytest.raises(ArchiveRejected) as caught:
        scan_pack(pack, GitLimits(max_delta_depth=3))
    assert caught.value.rule == "delta_too_deep"


def test_a_delta_bomb_is_refused_from_its_instructions() -> None:
    # 3 bytes of instructions a copy, each copying the 64 KiB base: a few KB make gigabytes.
    base = b"y" * 0x10000
    bomb = copy_delta(0x10000, 0x10000 * 2000, copies=2000)
    with pytest.raises(ArchiveRejected) as caught:
        scan_pack(make_pack(base, [bomb]), GitLimits(max_object_bytes=10 * 2**20))
    assert caught.value.rule == "object_too_large"
    # A delta that states a small target but copies more is refused as lying.
    liar = copy_delta(0x10000, 10, copies=2000)
    with pytest.raises(ArchiveRejected) as caught:
        scan_pack(make_pack(base, [liar]), GitLimits())
    assert caught.value.rule == "corrupt"


def test_a_history_past_the_total_cap_is_refused() -> None:
    pack = make_pack(b"z" * 1000, [copy_delta(1000, 1000)] * 3)
    with pytest.raises(ArchiveRejected) as caught:
        scan_pack(pack, GitLimits(max_inflated_bytes=3000))
    assert caught.value.rule == "history_too_large"


# --- the command -------------------------------------------------------------------------


def test_ingest_of_a_bundle_prints_the_id_last(assignment, tmp_path, capsys) -> None:
    path = tmp_path / "hand-in.bundle"
    path.write_bytes(make_bundle([{"v.txt": "one"}, {"v.txt": "two"}]))
    call_command(
        "ingest",
        str(path),
        "--before",
        "2023-11-14T22:13:20",
        assignment="cassette-triage",
        candidate="Grace",
    )
    out = capsys.readouterr()
    s = Submission.objects.get(pk=int(out.out.strip().splitlines()[-1]))
    assert s.source_kind == "bundle" and s.source_commit in out.err
    assert (tree_path(s) / "v.txt").read_text() == "one"


def test_ingest_of_a_hostile_bundle_exits_with_the_rule(assignment, tmp_path, capsys) -> None:
    path = tmp_path / "evil.bundle"
    path.write_bytes(make_bundle([{"link": (0o120000, "/etc/shadow")}]))
    with pytest.raises(CommandError, match=r"\(link\)"):
        call_command("ingest", str(path), assignment="cassette-triage", candidate="Eve")
    assert capsys.readouterr().out.strip().isdigit()


# --- a repository URL --------------------------------------------------------------------


@pytest.fixture
def git_server():
    """dulwich's own smart-HTTP server on loopback, serving one repository at /repo.git."""
    from tests.git_factories import make_repo, serve_repository

    repo = make_repo([{"v.txt": "one"}, {**SMALL_REPO, "v.txt": "two"}])
    with serve_repository(repo) as url:
        yield url, repo


def test_a_repository_url_on_an_allowed_loopback_is_fetched_at_its_head(
    assignment, candidate, settings, git_server
) -> None:
    from submissions.intake.repository import submission_from_repository

    url, repo = git_server
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    token_url = url.replace("http://", "http://ada:s3cr3t-token@")
    result = submission_from_repository(url=token_url, candidate=candidate, assignment=assignment)
    s = result.submission
    assert result.created and not result.reason
    assert s.source_kind == Submission.SourceKind.REPOSITORY
    assert s.source_url == url  # the credentials are not stored
    assert s.source_ref == "refs/heads/main"
    assert s.source_commit == repo.refs[b"refs/heads/main"].decode()
    assert s.archive_name == "repo.bundle"
    assert (tree_path(s) / "v.txt").read_text() == "two"
    assert "s3cr3t" not in s.archive.read().decode("latin-1")
    # the URL's credentials are kept sealed for Check again, never in clear
    from submissions.sealed import unseal

    assert s.source_auth_sealed and "s3cr3t" not in s.source_auth_sealed
    assert base64.b64decode(unseal(s.source_auth_sealed)[6:]) == b"ada:s3cr3t-token"
    again = submission_from_repository(url=url, candidate=candidate, assignment=assignment)
    assert not again.created and again.submission.pk == s.pk


def test_a_repository_url_on_loopback_is_refused_unless_allowed(
    assignment, candidate, settings, git_server, capsys
) -> None:
    url, _ = git_server
    settings.OUTBOUND_ALLOW = []
    with pytest.raises(CommandError) as caught:
        call_command(
            "ingest",
            url.replace("http://", "http://ada:s3cr3t-token@"),
            assignment="cassette-triage",
            candidate="Eve",
        )
    assert "(fetch_refused)" in str(caught.value)
    assert "s3cr3t" not in str(caught.value) + "".join(capsys.readouterr())
    assert not Submission.objects.exists()


def test_plain_http_is_refused_for_a_host_not_listed(settings) -> None:
    from submissions.intake.git.fetch import check_scheme

    with pytest.raises(ArchiveRejected, match="fetch_refused"):
        check_scheme("http://example.com/repo.git", [])
    check_scheme("https://example.com/repo.git", [])
    check_scheme("http://127.0.0.1:8000/r.git", ["127.0.0.0/8"])


def test_ingest_of_a_url_picks_the_ref_and_before(assignment, settings, git_server, capsys) -> None:
    url, _ = git_server
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    call_command(
        "ingest",
        url,
        "--ref",
        "main",
        "--before",
        "2023-11-14T22:13:20+00:00",
        assignment="cassette-triage",
        candidate="Grace",
    )
    s = Submission.objects.get(pk=int(capsys.readouterr().out.strip().splitlines()[-1]))
    assert s.source_ref == "refs/heads/main"
    assert (tree_path(s) / "v.txt").read_text() == "one"
