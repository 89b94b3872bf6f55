"""The replay job: pure judgements, and behaviour through the real sandbox."""

from __future__ import annotations

import io
import json
import re
from unittest import mock

import pytest
import yaml

from cassettes_app.checks.catalog import DEPENDENCIES_INSTALLED, REPLAY_CHECKS
from reviewer.ops.demo import DEMO_DIR
from submissions.assignments import assignment_apply, assignment_values
from submissions.checks.replay import (
    Run,
    replay_byte_identical,
    replay_missing_fixture_fails_loudly,
    replay_no_network_attempts,
    replay_offline_pass,
    replay_recordings_used,
)
from submissions.checks.replay_compare import (
    classify,
    describe_attempts,
    first_json_difference,
    missing_module,
    network_attempts,
    probe_outcome,
)
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Candidate, CheckResult, Job, Recording
from submissions.runs.replay import choose_probes, recording_dirs
from submissions.sandbox.types import RunResult
from tests.conftest import ingest_inline, make_zip

# ------------------------------------------------------------------ pure judgements


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        (b'{"x": 1}', b'{"x": 1}', "identical"),
        (b'{"at": "2026-11-29T10:00:00Z"}', b'{"at": "2026-11-29T10:00:07Z"}', "timestamp"),
        (b'{"at": 1764400000}', b'{"at": 1764400007}', "timestamp"),
        (
            b'{"id": "0b7e6a2c-4a4f-4f39-9c43-0c2b8f1f0a11"}',
            b'{"id": "a1f0c2d3-1111-4222-8333-944455556666"}',
            "uuid",
        ),
        (b'{"labels": ["a", "b", "c"]}', b'{"labels": ["c", "a", "b"]}', "ordering"),
        (b"alpha\nbeta\n", b"beta\nalpha\n", "ordering"),
        (b'{"score": 0.30000000000000004}', b'{"score": 0.3}', "float"),
        (b'{"answer": "yes"}', b'{"answer": "no"}', "other"),
    ],
)
def test_differences_are_classified(a: bytes, b: bytes, kind: str) -> None:
    assert classify(a, b, "out/answers.json").kind == kind


def test_several_causes_at_once_are_all_named() -> None:
    a = b'{"at": "2026-11-29T10:00:00Z", "run": "0b7e6a2c-4a4f-4f39-9c43-0c2b8f1f0a11"}'
    b = b'{"at": "2026-11-29T10:00:09Z", "run": "a1f0c2d3-1111-4222-8333-944455556666"}'
    assert classify(a, b, "o").kind == "timestamp+uuid"


def test_diff_names_the_first_json_path() -> None:
    diff = classify(b'{"a": {"b": [1, 2]}}', b'{"a": {"b": [1, 3]}}', "o.json")
    assert diff.first_json_path == "$.a.b[1]"
    assert "-" in diff.diff and "+" in diff.diff
    assert first_json_difference({"a": 1}, {"a": 1}) is None
    assert first_json_difference([1], [1, 2]) == "$[1]"


def test_loopback_and_unix_sockets_are_not_network_attempts() -> None:
    events = [
        {"event": "socket.connect", "address": "('127.0.0.1', 8080)", "caller": "a.py:1"},
        {"event": "socket.connect", "address": "('::1', 8080, 0, 0)", "caller": "a.py:1"},
        {"event": "socket.getaddrinfo", "host": "localhost", "port": "80", "caller": "a.py:2"},
        {"event": "socket.connect", "address": "/run/some.sock", "caller": "a.py:3"},
        {"event": "socket.connect", "address": "('api.openai.com', 443)", "caller": "t.py:41"},
        {"event": "socket.connect", "address": "('api.openai.com', 443)", "caller": "t.py:41"},
        {"event": "open", "path": "cassettes/x.json"},
    ]
    attempts = network_attempts(events)
    assert len(attempts) == 2
    assert describe_attempts(attempts) == "2 connect attempts to api.openai.com:443 from t.py:41"


def _run(label: str, events: list[dict]) -> Run:
    result = RunResult(0, False, b"", b"", False, False, 0.1, events, True, None, {}, {})
    return Run(label, result)


def test_a_probe_going_to_the_network_fails_no_network_attempts() -> None:
    """The probe (a recording removed) is part of replay: its attempt fails the check, and
    the summary says it came with a recording removed."""
    hop = {
        "event": "socket.getaddrinfo",
        "host": "api.openai.com",
        "port": "443",
        "caller": "l.py:3",
    }
    clean = [_run("run 1", []), _run("run 2", [])]
    outcome = replay_no_network_attempts(clean, [_run("probe", [hop])])
    assert outcome.status == "fail"
    assert outcome.summary.startswith(
        "with a recording removed: 1 resolve attempt to api.openai.com:443 from l.py:3"
    )
    assert [e["message"] for e in outcome.evidence] == [
        "probe: 1 resolve attempt to api.openai.com:443 from l.py:3"
    ]
    dirty = [_run("run 1", []), _run("run 2", [hop])]
    assert replay_no_network_attempts(dirty, [_run("probe", [])]).status == "fail"
    assert replay_no_network_attempts(clean).summary.startswith("no network attempt seen")


ATTEMPT = re.compile(r"\b\d+ (connect|resolve) attempts?\b")


@pytest.mark.parametrize("where", ["run 1", "run 2", "probe"])
@pytest.mark.parametrize("exit_code", [0, 1])
def test_no_replay_check_passes_beside_a_summary_reporting_an_attempt(
    where: str, exit_code: int
) -> None:
    """Status and summary never disagree: a pass never reports a network attempt."""
    hop = {"event": "socket.connect", "address": "('api.openai.com', 443)", "caller": "a.py:1"}
    runs = {
        label: _run(label, [hop] if label == where else []) for label in ("run 1", "run 2", "probe")
    }
    runs["probe"].result.exit_code = exit_code
    for run in runs.values():
        run.outputs = {"out/answers.json": b"{}"}
    run1, run2, probe = runs["run 1"], runs["run 2"], runs["probe"]
    outcomes = [
        replay_offline_pass(run1),
        replay_byte_identical(run1, run2, ["out/answers.json"]),
        replay_missing_fixture_fails_loudly([("cassettes/a.json", None, probe)], run1),
        replay_no_network_attempts([run1, run2], [probe]),
        replay_recordings_used(run1, ["cassettes/a.json"])[0],
    ]
    for outcome in outcomes:
        if outcome.status == "pass":
            assert not ATTEMPT.search(outcome.summary), (outcome.id, outcome.summary)
    assert {o.id: o.status for o in outcomes}["replay.no_network_attempts"] == "fail"


@pytest.mark.parametrize(
    ("exit_code", "output", "attempts", "outcome"),
    [
        (1, "KeyError: no cassette for key 27a5a6b300afe880", [], "fails_loudly"),
        (2, "FileNotFoundError: cassettes/27a5a6b300afe880.json", [], "fails_loudly"),
        (1, "Traceback: something unrelated", [], "fails_unclearly"),
        (0, "all good", [], "passes_silently"),
        (
            1,
            "URLError",
            [{"event": "socket.getaddrinfo", "host": "api.openai.com"}],
            "network_fallback",
        ),
    ],
)
def test_probe_outcomes(exit_code, output, attempts, outcome) -> None:
    got, reason = probe_outcome(
        exit_code=exit_code,
        output=output,
        removed="cassettes/27a5a6b300afe880.json",
        key="27a5a6b300afe880",
        attempts=attempts,
    )
    assert got == outcome
    assert reason


def test_recording_dirs_take_the_fixed_prefix_of_each_glob() -> None:
    assert recording_dirs(["cassettes/**/*.json", "fixtures/recordings/*.json", "*.har"]) == [
        ".",
        "cassettes",
        "fixtures/recordings",
    ]


def test_probe_choice_is_deterministic_and_bounded() -> None:
    used = {f"cassettes/{i}.json" for i in range(20)}
    assert choose_probes(used, 2) == choose_probes(set(sorted(used, reverse=True)), 2)
    assert len(choose_probes(used, 2)) == 2
    assert choose_probes(set(), 3) == []


def test_missing_module_is_named() -> None:
    assert missing_module("E   ModuleNotFoundError: No module named 'numpy'\n") == "numpy"
    assert missing_module("AssertionError") is None


# ------------------------------------------------------------------ through the real sandbox

RUN_TWICE = {
    "slug": "rt-test",
    "title": "Run twice (test)",
    "shape": "run-twice",
    "replay_command": "python3 run.py",
    "graded_outputs": ["out/answers.json"],
    "recordings": ["fixtures/*.json"],
}

READER = """
import json, os, pathlib, sys
fixtures = sorted(pathlib.Path("fixtures").glob("*.json"))
answers = []
for name in ["a", "b"]:
    path = pathlib.Path("fixtures") / f"{name}.json"
    if not path.exists():
        MISSING
    answers.append(json.loads(path.read_text())["text"])
pathlib.Path("out").mkdir(exist_ok=True)
EXTRA
pathlib.Path("out/answers.json").write_text(json.dumps(result, sort_keys=True))
"""


def _repo(extra: str, missing: str = 'sys.exit(f"missing fixture {path}")') -> dict[str, str]:
    return {
        "run.py": READER.replace("MISSING", missing).replace("EXTRA", extra),
        "fixtures/a.json": json.dumps({"text": "alpha"}),
        "fixtures/b.json": json.dumps({"text": "beta"}),
    }


def _judge(files_or_dir, values: dict | None = None) -> dict[str, CheckResult]:
    """Ingest a repo, run analysis and replay inline, and return the checks by id."""
    s, checks = ingest_inline(
        files_or_dir, assignment_values(values or RUN_TWICE), candidate="Sandboxed"
    )
    replay = s.jobs.get(kind=Job.Kind.REPLAY)
    assert replay.state in {"passed", "failed"}, replay.error
    return checks


@pytest.mark.parametrize(
    ("extra", "kind"),
    [
        (
            "import datetime; result = {'answers': answers, 'at': datetime.datetime.now().isoformat()}",
            "timestamp",
        ),
        ("import uuid; result = {'answers': answers, 'run': str(uuid.uuid4())}", "uuid"),
        (
            "result = {'answers': answers, 'labels': list({'x1', 'y2', 'z3', 'w4', 'v5'})}",
            "ordering",
        ),
    ],
)
@pytest.mark.sandbox
@pytest.mark.django_db
def test_nondeterministic_outputs_fail_byte_identical_with_their_kind(
    extra: str, kind: str
) -> None:
    checks = _judge(_repo(extra))
    assert checks["replay.offline_pass"].status == "pass"
    check = checks["replay.byte_identical"]
    assert check.status == "fail"
    assert check.evidence[0]["kind"] == kind
    assert check.evidence[0]["diff"].startswith("--- run1/out/answers.json")


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_deterministic_repo_passes_and_fails_loudly_without_a_fixture() -> None:
    checks = _judge(_repo("result = {'answers': answers}"))
    assert checks["replay.offline_pass"].status == "pass"
    assert checks["replay.byte_identical"].status == "pass"
    assert checks["replay.no_network_attempts"].status == "pass"
    assert checks["replay.recordings_used"].status == "pass"
    assert checks["replay.missing_fixture_fails_loudly"].status == "pass"
    assert set(Recording.objects.filter(used=True).values_list("path", flat=True)) == {
        "fixtures/a.json",
        "fixtures/b.json",
    }


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_silent_default_on_a_missing_fixture_fails() -> None:
    checks = _judge(
        _repo("result = {'answers': answers}", missing="answers.append('default'); continue")
    )
    check = checks["replay.missing_fixture_fails_loudly"]
    assert check.status == "fail"
    assert check.evidence[0]["outcome"] == "passes_silently"


@pytest.mark.sandbox
@pytest.mark.django_db
def test_an_orphan_recording_is_reported() -> None:
    files = _repo("result = {'answers': answers}")
    files["fixtures/unused.json"] = json.dumps({"text": "never read"})
    check = _judge(files)["replay.recordings_used"]
    assert check.status == "warn"
    assert [e["path"] for e in check.evidence] == ["fixtures/unused.json"]


@pytest.mark.sandbox
@pytest.mark.django_db
def test_tests_that_need_the_network_fail_offline_with_the_attempt_named() -> None:
    files = _repo("result = {'answers': answers}")
    files["run.py"] = (
        "import urllib.request\n"
        "urllib.request.urlopen('https://api.openai.com/v1/models', timeout=2)\n"
    )
    checks = _judge(files)
    assert checks["replay.offline_pass"].status == "fail"
    net = checks["replay.no_network_attempts"]
    assert net.status == "fail"
    assert "api.openai.com" in net.summary
    assert "run.py:2" in net.summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_suite_that_cannot_import_judges_nothing_that_needs_it() -> None:
    """The issue's repro: a good solution plus an import the runtime lacks, with the graded
    file committed. Nothing that needed the suite to run may pass."""
    files = _repo("result = {'answers': answers}")
    files["run.py"] = "import tenacity  # not in the sandbox runtime\n" + files["run.py"]
    files["out/answers.json"] = json.dumps({"answers": ["alpha", "beta"]}, sort_keys=True)
    checks = _judge(files)
    assert checks["replay.offline_pass"].status == "error"
    identical = checks["replay.byte_identical"]
    assert identical.status == "error" and "no module 'tenacity'" in identical.summary
    missing = checks["replay.missing_fixture_fails_loudly"]
    assert missing.status == "error" and "with every recording present" in missing.summary
    assert "pass" not in {c.status for c in checks.values() if c.check_id.startswith("replay.")}


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_committed_graded_output_is_not_taken_for_one_the_run_wrote() -> None:
    files = _repo("result = {'answers': answers}")
    files["run.py"] = "print('this run writes nothing')\n"
    files["out/answers.json"] = json.dumps({"answers": ["alpha", "beta"]})
    checks = _judge(files)
    assert checks["replay.offline_pass"].status == "pass"
    identical = checks["replay.byte_identical"]
    assert identical.status == "skip"
    assert "not written by the replay: out/answers.json" in identical.summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_run_twice_model_metadata_is_read_from_the_run_log_this_run_wrote() -> None:
    files = _repo(
        "result = {'answers': answers}\n"
        "pathlib.Path('out/run.log').write_text('model=gpt-4o-mini-2024-07-18 took 0.1s\\n')"
    )
    checks = _judge(files)
    meta = checks["cassettes.model_metadata"]
    assert meta.status == "pass"
    assert meta.summary == "out/run.log names the model: gpt-4o-mini-2024-07-18"
    assert checks["replay.byte_identical"].status == "pass"  # the log is never compared

    silent = _repo("result = {'answers': answers}")
    silent["out/run.log"] = "model=gpt-4o-mini (committed, not written by the run)\n"
    meta = _judge(silent)["cassettes.model_metadata"]
    assert meta.status == "warn" and "wrote no out/run.log" in meta.summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_failing_suite_is_not_probed_for_missing_recordings() -> None:
    files = _repo("result = {'answers': answers}\nsys.exit(3)")
    checks = _judge(files)
    assert checks["replay.offline_pass"].status == "fail"
    assert checks["replay.byte_identical"].status == "skip"
    missing = checks["replay.missing_fixture_fails_loudly"]
    assert missing.status == "skip" and "run 1 did not pass (exit 3)" in missing.summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_demo_good_cassette_repo_replays_cleanly() -> None:
    values = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    checks = _judge(DEMO_DIR / "repos" / "cassette-good", values)
    assert checks["replay.offline_pass"].status == "pass", checks["replay.offline_pass"].evidence
    assert checks["replay.byte_identical"].status == "pass"
    assert checks["replay.no_network_attempts"].status == "pass"
    assert checks["replay.missing_fixture_fails_loudly"].status == "pass"


@pytest.mark.sandbox
@pytest.mark.django_db
def test_demo_cassette_repo_that_falls_back_to_the_live_api_is_caught() -> None:
    values = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    checks = _judge(DEMO_DIR / "repos" / "cassette-flawed", values)
    probe = checks["replay.missing_fixture_fails_loudly"]
    assert probe.status == "fail"
    assert probe.evidence[0]["outcome"] == "network_fallback"
    # make test and make demo stay offline with every cassette (demo/README.md, flaw g):
    # only the probe went out, and the probe is part of replay.
    net = checks["replay.no_network_attempts"]
    assert net.status == "fail", net.summary
    assert "with a recording removed" in net.summary and "api.openai.com" in net.summary


@pytest.mark.django_db
def test_without_the_sandbox_replay_ends_in_error_with_the_cause(settings) -> None:
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    assignment = assignment_apply(values=assignment_values(RUN_TWICE))[0]
    candidate = Candidate.objects.create(name="NoSandbox")
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(make_zip(_repo("result = {}"))),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission
        jobs_run_inline(submission=s)
    replay = s.jobs.get(kind=Job.Kind.REPLAY)
    assert replay.state == Job.State.ERROR
    assert "bwrap" in replay.error
    check = s.checks.get(check_id="replay.offline_pass")
    assert check.status == "error" and "bwrap" in check.summary
    assert check.cause == "sandbox"  # a fact the pages read, not the words


def test_probes_prefer_recordings_whose_removal_must_matter() -> None:
    from submissions.runs.replay import probe_preferred

    rows = [
        ("cassettes/good.json", "k1", "k1", "s1"),
        ("cassettes/edited.json", "k2", "kX", "s2"),  # hand-edited key
        ("cassettes/dup.json", "k3", "k3", "s3"),
        ("cassettes/archive/dup.json", "k3", "k3", "s3"),  # a copy of the same recording
        ("fixtures/a.json", "", "", "s4"),  # no key at all
    ]
    preferred = probe_preferred(rows)
    assert preferred == {"cassettes/good.json"}
    used = {r[0] for r in rows}
    assert choose_probes(used, 1, preferred=preferred) == ["cassettes/good.json"]


@pytest.mark.sandbox
@pytest.mark.django_db
def test_demo_run_twice_repos_executable_run_sh_and_their_flaws() -> None:
    values = yaml.safe_load((DEMO_DIR / "assignments" / "run-twice.yaml").read_text())
    good = _judge(DEMO_DIR / "repos" / "run-twice-good", values)
    assert good["replay.offline_pass"].status == "pass", good["replay.offline_pass"].evidence
    assert good["replay.byte_identical"].status == "pass"
    assert good["replay.missing_fixture_fails_loudly"].status == "pass"
    flawed = _judge(DEMO_DIR / "repos" / "run-twice-flawed", values)
    kinds = flawed["replay.byte_identical"].evidence[0]["kind"]
    assert flawed["replay.byte_identical"].status == "fail"
    assert "timestamp" in kinds and "uuid" in kinds
    probe = flawed["replay.missing_fixture_fails_loudly"]
    assert probe.status == "fail" and probe.evidence[0]["outcome"] == "passes_silently"


@pytest.mark.django_db
def test_a_suite_needing_npm_packages_is_not_run_and_says_why(settings) -> None:
    """Not judged as if Python (issue 25): no run, every replay check and the dependencies
    check skip with what the suite needs; a tooling package.json beside a Python suite
    changes nothing."""
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"  # nothing may reach the sandbox
    files = {
        "package.json": json.dumps({"devDependencies": {"vitest": "^4.1.12"}}),
        "test/a.test.ts": "import { it } from 'vitest';\n",
        "fixtures/a.json": json.dumps({"text": "alpha"}),
    }
    values = {**RUN_TWICE, "slug": "ts-test", "replay_command": "npx vitest run"}
    s, checks = ingest_inline(files, assignment_values(values), candidate="TypeScript")
    reason = (
        "not run: the suite needs npm dependencies (package.json) "
        "and this sandbox installs Python dependencies only"
    )
    for cid in REPLAY_CHECKS:
        assert (checks[cid].status, checks[cid].summary) == ("skip", reason)
    env = checks[DEPENDENCIES_INSTALLED]
    assert env.status == "skip"
    assert env.summary == (
        "declares npm dependencies (package.json); this sandbox installs Python dependencies only"
    )
    assert s.jobs.get(kind=Job.Kind.REPLAY).state == Job.State.PASSED
    tooling = {
        **_repo("result = {}"),
        "package.json": json.dumps({"devDependencies": {"prettier": "^3"}}),
    }
    _, checks = ingest_inline(tooling, assignment_values(RUN_TWICE), candidate="Prettier")
    offline = checks["replay.offline_pass"]  # it went on to the sandbox: runs as before
    assert offline.status == "error" and "bwrap" in offline.summary


@pytest.mark.django_db
def test_an_entrypoint_the_replay_ran_is_proven_present(tmp_path, assignment, candidate) -> None:
    """docs.entrypoints read `./run.sh replay` as unsure (run.sh hands its arguments to a
    program it cannot read); the replay ran that command and saw exit 0, so it is found."""
    import dataclasses

    from cassettes_app.checks.docs.entrypoints import docs_entrypoints
    from submissions.checks.replay import entrypoints_after_replay
    from submissions.checks.store import checks_store
    from submissions.models import Submission

    root = tmp_path / "tree"
    root.mkdir()
    (root / "run.sh").write_text('#!/bin/sh\nexec node cli.mjs "$@"\n')
    (root / "run.sh").chmod(0o755)
    static = docs_entrypoints(root, "run-twice", "./run.sh replay")
    assert static.status == "warn"
    submission = Submission.objects.create(
        candidate=candidate, assignment=assignment, archive="x.zip", archive_sha256="0" * 64
    )
    checks_store(submission, None, [static])
    ran = _run("run 1", [])
    proven = entrypoints_after_replay(submission, "./run.sh replay", ran)
    assert proven is not None and "the replay ran `./run.sh replay`" in str(proven.evidence)
    failed = dataclasses.replace(ran, result=dataclasses.replace(ran.result, exit_code=1))
    assert entrypoints_after_replay(submission, "./run.sh replay", failed) is None


@pytest.mark.parametrize(
    ("exit_code", "attempt", "said"),
    [
        (1, False, "fails without naming what is missing"),
        (0, False, "passes silently"),
        (0, True, "falls back to the network"),
    ],
)
def test_the_missing_recording_summary_is_a_sentence(exit_code, attempt, said) -> None:
    """It once read 'with a recording removed the run network fallback'."""
    hop = {"event": "socket.connect", "address": "('api.openai.com', 443)", "caller": "a.py:1"}
    probe = _run("probe", [hop] if attempt else [])
    probe.result.exit_code = exit_code
    outcome = replay_missing_fixture_fails_loudly(
        [("cassettes/a.json", None, probe)], _run("r", [])
    )
    assert outcome.summary == f"with a recording removed the run {said}"


# ------------------------------------------------------------------ run 2 and the probes at once


def _fake_runs(
    monkeypatch, exits: dict[str, int], delays: dict[str, float], idle_core: bool = True
) -> list[str]:
    """Replace the sandboxed run with one that exits as `exits` says for the recording it
    removes (run 2 exits 0) after `delays` seconds, or at once when cancelled; the host has
    an idle core or not, as `idle_core` says. Return the log of what started and how each
    ended."""
    import os
    import select
    import threading

    from submissions.runs import replay

    seen: list[str] = []
    lock = threading.Lock()

    def fake(label, tree, command, *, env, slot, outputs, watch, subdir="", remove=None,
             cancel_fd=None):  # fmt: skip
        name = remove or label
        with lock:
            seen.append(f"start {name} slot {slot}")
        ready, _, _ = select.select([cancel_fd], [], [], delays.get(name, 0.0))
        killed = "cancelled" if ready else None
        if ready:
            os.read(cancel_fd, 1)
        code = None if killed else exits.get(name, 0)
        with lock:
            seen.append(f"end {name} {killed or code}")
        result = RunResult(code, False, b"", b"", False, False, 0.1, [], True, killed, {}, {})
        return Run(label, result)

    monkeypatch.setattr(replay, "_run", fake)
    monkeypatch.setattr(replay, "spare_core", lambda: idle_core)
    return seen


@pytest.mark.parametrize("idle_core", [True, False])
@pytest.mark.parametrize(
    ("exits", "delays", "slots", "kept"),
    [
        # the first probe fails loudly: only it counts, whatever else ran beside it
        ({"a": 1, "b": 1, "c": 1}, {}, 1, ["a"]),
        ({"a": 1, "b": 1, "c": 1}, {"a": 0.3}, 3, ["a"]),
        # silent passes: the next one is tried, up to the first conclusive one
        ({"a": 0, "b": 0, "c": 1}, {}, 1, ["a", "b", "c"]),
        ({"a": 0, "b": 0, "c": 1}, {"a": 0.2}, 3, ["a", "b", "c"]),
        ({"a": 0, "b": 2, "c": 1}, {"b": 0.2}, 2, ["a", "b"]),
        ({"a": 0, "b": 0, "c": 0}, {}, 2, ["a", "b", "c"]),
    ],
)
def test_probes_beside_run_2_keep_the_sequential_choice(
    monkeypatch, settings, exits, delays, slots, kept, idle_core
) -> None:
    """However many run at once and whichever ends first, the probes judged are those the
    one-after-another order runs: in order, up to the first conclusive one."""
    from submissions.runs.replay import _run2_and_probes

    settings.REPLAY_MISSING_PROBES = 1
    _fake_runs(monkeypatch, exits, delays, idle_core)
    common = {"outputs": [], "watch": []}
    run2, probes = _run2_and_probes(
        mock.sentinel.tree, "cmd", common, list(range(slots)), ["a", "b", "c"]
    )
    assert run2.label == "run 2"
    assert [p.result.exit_code for p in probes] == [exits[k] for k in kept]


def test_a_probe_known_unneeded_is_cancelled_not_waited_for(monkeypatch, settings) -> None:
    """A later probe started on a spare slot is killed once an earlier one proves
    conclusive: the replay does not wait out a run whose result it drops."""
    import time

    from submissions.runs.replay import _run2_and_probes

    settings.REPLAY_MISSING_PROBES = 1
    seen = _fake_runs(monkeypatch, {"a": 1, "b": 0, "c": 0}, {"a": 0.1, "b": 30, "c": 30})
    began = time.monotonic()
    _, probes = _run2_and_probes(
        mock.sentinel.tree, "cmd", {"outputs": [], "watch": []}, [0, 1, 2], ["a", "b", "c"]
    )
    assert time.monotonic() - began < 10
    assert [p.result.exit_code for p in probes] == [1]
    assert "end b cancelled" in seen
    assert "end run 2 0" in seen  # run 2 is never cancelled


def test_with_one_slot_nothing_runs_beside_run_2(monkeypatch, settings) -> None:
    """One slot: run 2, then each probe in turn, and none past the first conclusive one."""
    from submissions.runs.replay import _run2_and_probes

    settings.REPLAY_MISSING_PROBES = 1
    seen = _fake_runs(monkeypatch, {"a": 0, "b": 1, "c": 1}, {})
    _run2_and_probes(mock.sentinel.tree, "cmd", {"outputs": [], "watch": []}, [7], ["a", "b", "c"])
    assert seen == [
        "start run 2 slot 7", "end run 2 0", "start a slot 7", "end a 0", "start b slot 7",
        "end b 1",
    ]  # fmt: skip


def test_on_a_busy_host_no_probe_starts_ahead_of_need(monkeypatch, settings) -> None:
    """No idle core: a probe starts only once every earlier one has ended inconclusive,
    though a slot is free (a run that may be dropped would slow those that count)."""
    from submissions.runs.replay import _run2_and_probes

    settings.REPLAY_MISSING_PROBES = 1
    seen = _fake_runs(monkeypatch, {"a": 1, "b": 0}, {"a": 0.2}, idle_core=False)
    _run2_and_probes(mock.sentinel.tree, "cmd", {"outputs": [], "watch": []}, [0, 1, 2], ["a", "b"])
    assert [line for line in seen if line.startswith("start")] == [
        "start run 2 slot 0", "start a slot 1",
    ]  # fmt: skip


def test_run_1s_copy_goes_on_its_slot_while_run_2_starts_on_another(monkeypatch, settings) -> None:
    """Run 1's workspace (its slot's uid) is removed before that slot runs anything else;
    run 2 does not wait for it when another slot is free, and waits when none is."""
    import threading
    import time

    from submissions import sandbox
    from submissions.runs.replay import _run2_and_probes

    settings.REPLAY_MISSING_PROBES = 1
    seen = _fake_runs(monkeypatch, {"a": 1}, {"run 2": 0.1})
    lock = threading.Lock()

    def remove(path) -> None:
        with lock:
            seen.append(f"remove {path}")
        time.sleep(0.2)
        with lock:
            seen.append(f"removed {path}")

    monkeypatch.setattr(sandbox, "remove_workspace", remove)
    common = {"outputs": [], "watch": []}
    _run2_and_probes(mock.sentinel.tree, "cmd", common, [0, 1], ["a"], leftover="ws1")
    assert seen[:2] == ["remove ws1", "start run 2 slot 1"]
    on_slot_0 = [i for i, line in enumerate(seen) if line.endswith("slot 0")]
    assert all(i > seen.index("removed ws1") for i in on_slot_0)
    seen.clear()
    _run2_and_probes(mock.sentinel.tree, "cmd", common, [0], ["a"], leftover="ws1")
    assert seen[:3] == ["remove ws1", "removed ws1", "start run 2 slot 0"]
