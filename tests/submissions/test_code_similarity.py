"""cohort.code_similarity: source fingerprints stored with the analysis, compared across
the cohort's hand-ins."""

from __future__ import annotations

import random
import time

import pytest

from cassettes_app.analysis import sources
from cassettes_app.checks.catalog import CODE_SIMILARITY
from submissions import assignments
from submissions.assignments import AssignmentError, assignment_apply, assignment_values
from submissions.models import SourceFingerprint
from tests.conftest import ingest_inline


def _values(**extra: object) -> dict:
    return assignment_values(
        {
            "slug": "similar",
            "title": "Similar",
            "replay_command": "",
            "recordings": ["cassettes/**/*"],
            **extra,
        }
    )


ADA = '''
"""A small cassette store."""

import hashlib
import json
from pathlib import Path


def cassette_key(request, drop=("user_agent", "timestamp")):
    """The sha256 of the canonical request, volatile fields dropped."""
    kept = {name: value for name, value in request.items() if name not in drop}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_cassette(folder, request):
    path = Path(folder) / (cassette_key(request) + ".json")
    if not path.exists():
        raise FileNotFoundError(f"no cassette for {path.name}: record it first")
    with path.open() as handle:
        return json.load(handle)["response"]


def save_cassette(folder, request, response, model):
    path = Path(folder) / (cassette_key(request) + ".json")
    body = {"request": request, "response": response, "model": model}
    path.write_text(json.dumps(body, indent=2, sort_keys=True))
    return path
'''

# Ada's file re-typed: every name changed, other literals, functions reordered, no comments.
BO_COPY = """
import hashlib
import json
from pathlib import Path
def write_fixture(base_dir, req, resp, model_name):
    target = Path(base_dir) / (fixture_id(req) + '.json')
    payload = {'request': req, 'response': resp, 'model': model_name}
    target.write_text(json.dumps(payload, indent=4, sort_keys=True))
    return target
def fixture_id(req, volatile=('ua', 'ts')):
    rest = {k: v for k, v in req.items() if k not in volatile}
    text = json.dumps(rest, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode('utf8')).hexdigest()
def read_fixture(base_dir, req):
    target = Path(base_dir) / (fixture_id(req) + '.json')
    if not target.exists():
        raise FileNotFoundError(f'missing fixture {target.name}')
    with target.open() as fh:
        return json.load(fh)['response']
"""

BO_OWN = """
import os
import sqlite3


class Recorder:
    def __init__(self, db):
        self.conn = sqlite3.connect(db)
        self.conn.execute("create table if not exists calls (k text primary key, v blob)")

    def get(self, key):
        row = self.conn.execute("select v from calls where k = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return row[0]

    def put(self, key, value):
        with self.conn:
            self.conn.execute("insert or replace into calls values (?, ?)", (key, value))

    def keys(self):
        return [k for (k,) in self.conn.execute("select k from calls order by k")]

    def purge(self, older_than):
        cutoff = os.path.getmtime(older_than)
        for key in self.keys():
            if key < str(cutoff):
                self.conn.execute("delete from calls where k = ?", (key,))
"""


@pytest.mark.django_db
def test_the_analysis_stores_each_source_files_fingerprints() -> None:
    repo = {"store.py": ADA, "cassettes/a.json": "{}", "README.md": "# hi\n" * 50}
    submission, _ = ingest_inline(repo, _values(), candidate="Ada")
    paths = set(
        SourceFingerprint.objects.filter(submission=submission).values_list("path", flat=True)
    )
    assert paths == {"store.py"}


@pytest.mark.django_db
def test_a_retyped_renamed_reordered_copy_warns_with_the_file_pair() -> None:
    first, checks = ingest_inline({"cassettes/store.py": ADA}, _values(), candidate="Ada")
    assert checks[CODE_SIMILARITY].status == "pass"
    second, checks = ingest_inline({"src/fixtures.py": BO_COPY}, _values(), candidate="Bo")
    result = checks[CODE_SIMILARITY]
    assert result.status == "warn", result.summary
    assert "Ada" not in result.summary
    [item] = result.evidence
    assert item["path"] == "src/fixtures.py"
    assert item["other"] == {"submission": first.pk, "path": "cassettes/store.py"}
    assert item["share"] > 0.5
    assert "Ada" not in item["message"]
    # The earlier hand-in is judged again, and names the later one.
    theirs = first.checks.get(check_id=CODE_SIMILARITY)
    assert theirs.status == "warn"
    assert [e["other"]["submission"] for e in theirs.evidence] == [second.pk]


@pytest.mark.django_db
def test_independent_hand_ins_pass() -> None:
    _, first = ingest_inline({"store.py": ADA}, _values(), candidate="Ada")
    _, second = ingest_inline({"recorder.py": BO_OWN}, _values(), candidate="Bo")
    assert first[CODE_SIMILARITY].status == "pass"
    assert second[CODE_SIMILARITY].status == "pass", second[CODE_SIMILARITY].summary


@pytest.mark.django_db
def test_sample_code_most_of_the_cohort_carries_does_not_count() -> None:
    # Ada and Bo both hand in the brief's sample store beside their own code; so do Cy and
    # Di: the sample's fingerprints are in every hand-in, so they are starter code.
    ingest_inline({"sample.py": ADA, "own.py": BO_OWN}, _values(), candidate="Ada")
    ingest_inline({"sample.py": ADA}, _values(), candidate="Cy")
    ingest_inline({"lib/sample.py": ADA}, _values(), candidate="Di")
    _, checks = ingest_inline(
        {"vendor_sample.py": ADA, "mine.js": "let x = 1;"}, _values(), candidate="Bo"
    )
    result = checks[CODE_SIMILARITY]
    assert result.status == "pass", result.summary
    assert "shared by most of the cohort not counted" in result.summary


@pytest.mark.django_db
def test_a_hand_in_without_source_files_skips() -> None:
    _, checks = ingest_inline(
        {"README.md": "hi", "cassettes/a.json": "{}"}, _values(), candidate="Ada"
    )
    assert checks[CODE_SIMILARITY].status == "skip"
    assert "no source file" in checks[CODE_SIMILARITY].summary


def _one_line(size: int) -> str:
    """A single line of varied code (varied, so the upload's compression-ratio cap passes)."""
    rng = random.Random(30)
    words = [f"v{rng.randrange(10**6)}{rng.choice('+-*/,;')}" for _ in range(size // 8)]
    return "".join(words)[:size]


@pytest.mark.django_db
def test_hostile_sources_stay_bounded(monkeypatch) -> None:
    # A one-line file far over the read cap, binary files under source names, and more
    # files than the count cap (caps lowered so the fast suite stays fast).
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 64 * 1024)
    monkeypatch.setattr(sources, "MAX_FILES", 50)
    repo = {
        "huge.js": _one_line(2_000_000),
        "blob.py": b"\x00\x01\x02" * 1000,
        "bad.c": bytes(range(128, 256)) * 10,
        **{
            f"many/m{n:03d}.py": f"def f{n}(x):\n    return x * {n} + x - {n}\n" for n in range(300)
        },
    }
    submission, checks = ingest_inline(repo, _values(), candidate="Ada")
    paths = set(
        SourceFingerprint.objects.filter(submission=submission).values_list("path", flat=True)
    )
    assert "blob.py" not in paths and "bad.c" not in paths
    assert "huge.js" in paths  # its first 64 KiB, fingerprinted
    assert len(paths) <= 50
    assert checks[CODE_SIMILARITY].status in ("pass", "warn")


@pytest.mark.scale
def test_a_50_mb_line_and_20000_files_stay_bounded(tmp_path) -> None:
    (tmp_path / "huge.py").write_text("x = 1 + " * (50 * 1024 * 1024 // 8))
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(20_000):
        (folder / f"m{n:05d}.js").write_text(f"function f{n}(a) {{ return a * {n} + a; }}\n")
    (tmp_path / "blob.py").write_bytes(b"\x00" * 4096)
    started = time.monotonic()
    found = list(sources.source_files(tmp_path))
    assert len(found) <= sources.MAX_FILES
    assert all(len(f.hashes) <= sources.MAX_PER_FILE for f in found)
    assert "blob.py" not in {f.path for f in found}
    assert time.monotonic() - started < 60


@pytest.mark.django_db
def test_two_hand_ins_reusing_the_listed_starter_code_do_not_warn(tmp_path) -> None:
    # Ada and Bo each wrote their own code and both kept the brief's sample store: two
    # hand-ins alone cannot tell starter code apart, the assignment's `starter_files` can.
    (tmp_path / "starter").mkdir()
    (tmp_path / "starter" / "cassette.py").write_text(ADA)
    values = assignment_values(
        {
            "slug": "similar",
            "title": "Similar",
            "replay_command": "",
            "recordings": ["cassettes/**/*"],
            "starter_files": ["starter"],
        },
        base_dir=tmp_path,
    )
    assert values["starter_fingerprints"]
    ingest_inline({"cassette.py": ADA, "own.py": BO_OWN}, values, candidate="Ada")
    _, checks = ingest_inline({"lib/store.py": BO_COPY, "main.js": "x()"}, values, candidate="Bo")
    result = checks[CODE_SIMILARITY]
    assert result.status == "pass", result.summary
    assert "starter code" in result.summary


@pytest.mark.django_db
def test_without_the_starter_list_the_same_pair_warns_and_listing_it_clears_both() -> None:
    values = _values()
    first, _ = ingest_inline({"cassette.py": ADA, "own.py": BO_OWN}, values, candidate="Ada")
    second, checks = ingest_inline({"lib/store.py": BO_COPY}, values, candidate="Bo")
    assert checks[CODE_SIMILARITY].status == "warn"
    # The lead lists the sample as starter code (a pasted snippet): both are judged again.
    assignment_apply(values=_values(starter_files=[{"name": "cassette.py", "text": ADA}]))
    for submission in (first, second):
        result = submission.checks.get(check_id=CODE_SIMILARITY)
        assert result.status == "pass", result.summary


@pytest.mark.parametrize(
    ("starter", "message"),
    [
        ("cassette.py", "a path needs the assignment file's folder"),
        ([{"name": "a.py"}], "a snippet is a mapping with a name and a text"),
        ([{"name": "a.py", "text": 3}], "text must be a string"),
        ([7], "not a path or a snippet"),
        ({"a": 1}, "must be a list"),
    ],
)
def test_bad_starter_files_are_refused_naming_the_key(starter, message) -> None:
    with pytest.raises(AssignmentError) as caught:
        _values(starter_files=starter if isinstance(starter, list | dict) else [starter])
    assert str(caught.value).startswith("starter_files:")
    assert message in str(caught.value)


def test_a_missing_or_huge_starter_path_is_refused(tmp_path, monkeypatch) -> None:
    with pytest.raises(AssignmentError, match=r"file not found: nope\.py"):
        assignment_values(
            {"slug": "s", "title": "S", "starter_files": ["nope.py"]}, base_dir=tmp_path
        )
    monkeypatch.setattr(assignments, "STARTER_MAX_BYTES", 1000)
    (tmp_path / "big.py").write_text("x = 1\n" * 1000)
    with pytest.raises(AssignmentError, match="starter_files: more than"):
        assignment_values(
            {"slug": "s", "title": "S", "starter_files": ["big.py"]}, base_dir=tmp_path
        )


@pytest.mark.django_db
def test_each_fingerprint_keeps_the_lines_it_was_found_on() -> None:
    submission, _ = ingest_inline({"store.py": ADA}, _values(), candidate="Ada")
    rows = {
        (r.hash, r.line, r.end_line)
        for r in SourceFingerprint.objects.filter(submission=submission)
    }
    assert rows == set(sources.text_fingerprints("store.py", ADA))
    assert all(1 <= line <= end <= len(ADA.splitlines()) for _, line, end in rows)


@pytest.mark.django_db
def test_a_new_hand_in_judges_again_only_those_it_could_flag(assignment, candidate) -> None:
    # Bo's file holds 100 fingerprints. Sharing 15 of them (a common idiom) cannot put Bo
    # over the threshold whatever part of his file is starter code: he is not judged again.
    # Sharing 30 could (if up to half of his file were starter or cohort-shared code).
    from collections import Counter

    from submissions.checks.similarity import _crossing
    from submissions.models import Submission

    bo = Submission.objects.create(
        candidate=candidate, assignment=assignment, archive="b.zip", archive_sha256="2" * 64
    )
    SourceFingerprint.objects.bulk_create(
        SourceFingerprint(submission=bo, path="bo.py", hash=h) for h in range(100)
    )
    assert _crossing(Counter({("mine.py", bo.pk, "bo.py"): 15})) == set()
    assert _crossing(Counter({("mine.py", bo.pk, "bo.py"): 30})) == {bo.pk}
    assert _crossing(Counter()) == set()
