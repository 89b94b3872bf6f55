"""Hand-ins written the way candidates write them (tests/fixtures/handins/), judged end to end.

Each is a small repository whose recordings were made by its libraries' own record modes
against a local fake endpoint (see each README). Each one tripped a false verdict of
issue 25; the sandbox runs them for real.
"""

from __future__ import annotations

import pytest

from cassettes_app.checks.catalog import (
    DEPENDENCIES_INSTALLED,
    MODEL_METADATA,
    NO_SECRETS,
    PRUNED,
    REPLAY_CHECKS,
)
from submissions.assignments import assignment_values
from submissions.models import CheckResult, Recording
from tests.conftest import ingest_inline
from tests.paths import ROOT

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db]

HANDINS = ROOT / "tests" / "fixtures" / "handins"

CASSETTE = {
    "slug": "handin-cassette",
    "title": "Cassette task (hand-in tests)",
    "shape": "cassette",
    "replay_command": "make test && make demo",
    "graded_outputs": ["out/answers.json"],
    "recordings": ["cassettes/*.yaml"],
    "expected_model": "gpt-4o-mini-2024-07-18",
}


def handin(name: str) -> dict[str, bytes]:
    """The hand-in's files as committed (`out/` included: a golden file is part of it)."""
    root = HANDINS / name
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and "node_modules" not in p.parts
    }


def judge(name: str, assignment: dict) -> dict[str, CheckResult]:
    """Ingest the hand-in `name` under `assignment` and run its jobs here."""
    _, checks = ingest_inline(handin(name), assignment_values(assignment), candidate=name)
    return checks


def replay_verdicts(checks: dict[str, CheckResult]) -> dict[str, str]:
    return {cid: checks[cid].status for cid in REPLAY_CHECKS if cid in checks}


def test_a_golden_file_test_keeps_its_committed_answers() -> None:
    """The suite compares its answers with the committed out/answers.json: that copy stays,
    and byte_identical judges the copies `make demo` wrote in each run."""
    checks = judge("golden-file", CASSETTE)
    offline = checks["replay.offline_pass"]
    assert offline.status == "pass", offline.evidence[0]["output"][-1500:]
    identical = checks["replay.byte_identical"]
    assert identical.status == "pass", identical.summary
    assert "fail" not in replay_verdicts(checks).values(), replay_verdicts(checks)


def test_a_replay_miss_that_goes_live_fails_no_network_attempts() -> None:
    """vcrpy's default record mode records a missing cassette live: the probe run (part of
    replay) resolves api.openai.com, so no_network_attempts fails beside the summary that
    reports it, and missing_fixture_fails_loudly names the fallback."""
    checks = judge("vcr-record-once", CASSETTE)
    assert checks["replay.offline_pass"].status == "pass"
    missing = checks["replay.missing_fixture_fails_loudly"]
    assert missing.status == "fail" and missing.evidence[0]["outcome"] == "network_fallback"
    net = checks["replay.no_network_attempts"]
    assert net.status == "fail", net.summary
    assert "with a recording removed" in net.summary and "api.openai.com:443" in net.summary


def test_the_redrive_masks_the_assignments_order_ids() -> None:
    """The stub re-driven in the sandbox issues new ORD-nnnnn ids; masked by the
    assignment's pattern they match the trace (issue 25, case 4)."""
    assignment = {
        "slug": "handin-trace",
        "title": "Trace task (hand-in tests)",
        "shape": "trace",
        "replay_command": "",
        "recordings": ["recordings/*.yaml"],
        "traces": ["replay.jsonl"],
        "id_pattern": "ORD-[0-9]+",
        "stub_start_command": "python shop_stub.py",
    }
    checks = judge("ord-ids", assignment)
    live = checks["trace.live_match"]
    assert live.status == "pass", (live.summary, live.evidence[:3])
    assert live.evidence[0]["mode"] == "redrive"


def test_a_retry_storm_that_outlasts_the_probe_is_not_blamed_on_caching(settings) -> None:
    """Each new line waits out the SDK's retries (~14 s) past the request timeout; the probe
    runs out of time. Caching is not judged; the slow answers fail degrades_gracefully and
    the unbounded attempts ledger.consistent (issue 25, case 3)."""
    settings.SERVICE_PROBE_SECONDS = 25.0
    assignment = {
        "slug": "handin-service",
        "title": "Ticket service (hand-in tests)",
        "shape": "ticket-service",
        "replay_command": "",
        "recordings": [],
        "ledgers": ["ledger.jsonl"],
        "service_start_command": "python app.py",
    }
    checks = judge("retry-storm", assignment)
    caches = checks["service.caches"]
    assert caches.status == "skip", caches.summary
    assert caches.summary.startswith("not judged: the probe ran out of time after")
    degrade = checks["service.degrades_gracefully"]
    assert degrade.status == "fail" and "no answer after" in degrade.summary


def test_a_typescript_suite_is_not_judged_as_if_python() -> None:
    """vitest and nock are npm dependencies the sandbox never installs: the replay is not
    run, each replay check and env.dependencies_installed says why, and the recordings
    are still read and checked statically (issue 25)."""
    assignment = {
        "slug": "handin-ts",
        "title": "Cassette task in TypeScript (hand-in tests)",
        "shape": "cassette",
        "replay_command": "npm test",
        "graded_outputs": [],
        "recordings": ["recordings/*.json"],
        "expected_model": "gpt-4o-mini-2024-07-18",
    }
    checks = judge("ts-nock-vitest", assignment)
    needs = "npm dependencies (package.json, package-lock.json)"
    for cid in REPLAY_CHECKS:
        assert checks[cid].status == "skip", (cid, checks[cid].summary)
        assert checks[cid].summary == (
            f"not run: the suite needs {needs} and this sandbox installs Python dependencies only"
        )
    env = checks[DEPENDENCIES_INSTALLED]
    assert env.status == "skip"
    assert env.summary == f"declares {needs}; this sandbox installs Python dependencies only"
    # The recordings were still parsed and checked statically: nock's format, both turns.
    recording = Recording.objects.get(submission=checks[NO_SECRETS].submission)
    assert (recording.path, recording.format) == ("recordings/triage.json", "nock")
    assert recording.interactions.count() == 2
    assert checks[NO_SECRETS].status == "pass", checks[NO_SECRETS].summary
    for cid in (MODEL_METADATA, PRUNED):
        assert checks[cid].status not in ("skip", "error"), (cid, checks[cid].summary)
