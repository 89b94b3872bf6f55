"""Each take-home shape judged by its own brief, end to end through the real sandbox.

Issue 14: a good hand-in of any shape gets no `fail` and no `warn` (except where its brief
says so), every `skip` says why; each flaw a brief names is found by the check meant for it,
with nothing else failing. The good hand-ins are the demo's `*-good` repositories and a
"brief-minimal" variant of each that satisfies the brief but trips the old cassette-centric
rules; each flawed hand-in is a copy of a good repository with one planted flaw (plus, where
the candidate's own self-test would have caught that flaw, that test removed: a candidate
who ships the flaw does not ship a passing test against it).

Every hand-in runs every job inline (`ingest_inline`): analysis, replay in bubblewrap,
trace verification, service probe.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cassettes_app.checks import catalog as c
from cassettes_app.checks.rules import shape_rules
from reviewer.ops.demo import DEMO_DIR
from submissions.assignments import load_assignment_file
from submissions.models import CheckResult
from tests.conftest import ingest_inline

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db]

REPOS = DEMO_DIR / "repos"
TOOLS = DEMO_DIR / "tools"
SLUGS = {
    "cassette": "cassette-triage",
    "run-twice": "run-twice",
    "trace": "shop-trace",
    "ticket-service": "ticket-service",
}

# ------------------------------------------------------------------ helpers


# The demo's recordings are dated November 2026 and its assignments call them stale after 42
# days: judge as if uploaded on this day, so the verdicts do not change with the calendar.
DEMO_UPLOAD_TIME = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)


def judge(repo: Path, shape: str) -> dict[str, CheckResult]:
    """Ingest `repo` under the demo assignment of `shape`: {check_id: CheckResult}."""
    values = load_assignment_file(DEMO_DIR / "assignments" / f"{SLUGS[shape]}.yaml")
    _, checks = ingest_inline(
        repo, values, candidate=f"{shape} {repo.name}", uploaded_at=DEMO_UPLOAD_TIME
    )
    return checks


def report(checks: dict[str, CheckResult]) -> str:
    """Every check that did not pass, with its summary (and first evidence lines)."""
    lines = []
    for cid, check in sorted(checks.items()):
        if check.status == "pass":
            continue
        lines.append(f"  {check.status:5} {cid}: {check.summary}")
        if check.status in ("fail", "warn", "error"):
            for item in (check.evidence or [])[:3]:
                if isinstance(item, dict) and item.get("message"):
                    lines.append(f"          - {str(item['message'])[:300]}")
    return "non-pass checks:\n" + ("\n".join(lines) or "  (none)")


def assert_verdicts(
    checks: dict[str, CheckResult],
    shape: str,
    *,
    expect: dict[str, str] | None = None,
    allow_warn: frozenset[str] = frozenset(),
) -> None:
    """`expect` holds exactly; every other check passes or skips with a reason.

    A check the shape's rules turn off must be a `skip` naming the rule's reason, and every
    check the shape applies must have been judged (present).
    """
    expect = expect or {}
    problems = []
    for cid, status in expect.items():
        got = checks[cid].status if cid in checks else "absent"
        if got != status:
            problems.append(f"{cid}: expected {status}, got {got}")
    rules = shape_rules(shape)
    for cid, check in checks.items():
        if cid in expect:
            continue
        if check.status == "warn" and cid in allow_warn:
            continue
        if check.status not in ("pass", "skip"):
            problems.append(f"{cid}: unexpected {check.status}")
        elif check.status == "skip" and not check.summary.strip():
            problems.append(f"{cid}: skip without a reason")
        rule = rules.get(cid)
        if rule is not None and not rule.applies and check.status != "skip":
            problems.append(f"{cid}: does not apply to {shape} but is {check.status}")
    assert not problems, "\n".join(problems) + "\n" + report(checks)


def copy_repo(name: str, dest: Path) -> Path:
    """A writable copy of a demo repository, without caches or outputs."""
    target = dest / name
    shutil.copytree(
        REPOS / name, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "out")
    )
    return target


def edit(path: Path, old: str, new: str, *, count: int = 1) -> None:
    """Replace `old` by `new` in a file; the demo must still hold `old` exactly `count` times."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == count, f"{path.name}: {old!r} found {text.count(old)}x"
    path.write_text(text.replace(old, new), encoding="utf-8")


def applied(shape: str) -> list[str]:
    return sorted(cid for cid, rule in shape_rules(shape).items() if rule.applies)


def rewrite_json(path: Path, change) -> None:
    """Load a recording, let `change` edit it in place, write it back as the demo writes it."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def fake_key(seed: str) -> str:
    """A made-up, high-entropy OpenAI-style key (never a real one)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return "sk-proj-" + "".join(ch.upper() if i % 3 else ch for i, ch in enumerate(digest))[:48]


# ------------------------------------------------------------------ 1. cassette task

CASSETTE_APPLIES = [
    c.OFFLINE_PASS,
    c.BYTE_IDENTICAL,
    c.MISSING_FIXTURE,
    c.NO_NETWORK,
    c.RECORDINGS_USED,
    c.KEYS_MATCH,
    c.NO_SECRETS,
    c.MODEL_METADATA,
    c.FRESH,
    c.PRUNED,
    c.PER_TURN,
    c.ENTRYPOINTS,
    c.REPLAY_NOTES,
]


def test_cassette_good_hand_in_passes_every_check_its_brief_asks_for() -> None:
    checks = judge(REPOS / "cassette-good", "cassette")
    assert_verdicts(checks, "cassette", expect=dict.fromkeys(CASSETTE_APPLIES, "pass"))


def test_cassette_replay_that_falls_back_to_the_network_on_a_miss(tmp_path: Path) -> None:
    """The flaw: a replay miss "heals itself" from the live endpoint instead of raising.

    Both suite runs have every cassette, so they stay offline: only the probe with a
    cassette removed reaches for api.openai.com. The probe is part of replay, so both the
    missing-fixture check and no_network_attempts report it.
    """
    repo = copy_repo("cassette-good", tmp_path)
    edit(
        repo / "triage" / "cassette.py",
        "        if not path.is_file():\n            raise CassetteMiss(key, path)\n",
        "        if not path.is_file():\n"
        "            from .live import OpenAITransport\n\n"
        "            return (self.live or OpenAITransport()).send(payload)\n",
    )
    # ... with a client that sends whatever key it has (none, offline) ...
    edit(
        repo / "triage" / "live.py",
        '        api_key = os.environ.get("OPENAI_API_KEY")\n'
        "        if not api_key:\n"
        '            raise RuntimeError("OPENAI_API_KEY is not set (only record/passthrough need it)")\n',
        '        api_key = os.environ.get("OPENAI_API_KEY", "")\n',
    )
    # ... and without the candidate's own tests that pin a miss to an error, offline.
    edit(
        repo / "tests" / "test_cassette.py",
        "def test_replay_of_a_missing_key_names_key_and_path(tmp_path):",
        "def _not_shipped_replay_of_a_missing_key(tmp_path):",
    )
    edit(
        repo / "tests" / "conftest.py",
        '    monkeypatch.setattr(socket.socket, "connect", refuse)\n'
        '    monkeypatch.setattr(socket, "getaddrinfo", refuse)\n'
        '    monkeypatch.setattr(socket, "create_connection", refuse)\n',
        "",
    )
    checks = judge(repo, "cassette")
    assert_verdicts(checks, "cassette", expect={c.MISSING_FIXTURE: "fail", c.NO_NETWORK: "fail"})
    assert checks[c.MISSING_FIXTURE].evidence[0]["outcome"] == "network_fallback"


def test_cassette_stale_recording_fails_fresh(tmp_path: Path) -> None:
    repo = copy_repo("cassette-good", tmp_path)
    victim = sorted((repo / "cassettes").glob("*.json"))[0]
    # 90 days before the pinned upload: past the assignment's 42 days.
    from datetime import timedelta

    old = (DEMO_UPLOAD_TIME - timedelta(days=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rewrite_json(victim, lambda d: d.update(recorded_at=old))
    checks = judge(repo, "cassette")
    assert_verdicts(checks, "cassette", expect={c.FRESH: "fail"})
    assert "older than 42 days" in checks[c.FRESH].summary


def test_cassette_with_a_leaked_credential_fails_no_secrets(tmp_path: Path) -> None:
    repo = copy_repo("cassette-good", tmp_path)
    victim = sorted((repo / "cassettes").glob("*.json"))[1]
    secret = fake_key("cassette-leak")
    rewrite_json(
        victim, lambda d: d["response"].update(debug_headers={"Authorization": f"Bearer {secret}"})
    )
    checks = judge(repo, "cassette")
    assert_verdicts(checks, "cassette", expect={c.NO_SECRETS: "fail"})
    assert secret not in json.dumps(checks[c.NO_SECRETS].evidence)  # shown redacted


# ------------------------------------------------------------------ 2. run-twice task

RUN_TWICE_APPLIES = [
    c.OFFLINE_PASS,
    c.BYTE_IDENTICAL,
    c.MISSING_FIXTURE,
    c.NO_NETWORK,
    c.RECORDINGS_USED,
    c.NO_SECRETS,
    c.MODEL_METADATA,  # looked for in out/run.log, as the replay wrote it
    c.FRESH,
    c.PRUNED,
    c.ENTRYPOINTS,
]

MINIMAL_FIXTURES = '''"""Recorded model answers: fixtures/recordings/<key>.json = {"text": <the reply>}.

key = first 16 hex of sha256 of the request that produced it (model, prompt, params, input).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .model import MODEL, PROMPT


class MissingRecording(RuntimeError):
    def __init__(self, index: int, text: str, path: Path) -> None:
        self.path = path
        super().__init__(
            f"input #{index} ({text[:40]!r}) has no recording: {path} is missing. "
            "Replay never calls the model; run ./run.sh record to create it."
        )


class StaleRecording(RuntimeError):
    pass


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def request_key(text: str) -> str:
    request = {"model": MODEL, "prompt": PROMPT, "temperature": 0, "input": text}
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def recording_path(directory: Path, text: str) -> Path:
    return directory / f"{request_key(text)}.json"


def load_recording(directory: Path, index: int, text: str) -> dict:
    path = recording_path(directory, text)
    if not path.is_file():
        raise MissingRecording(index, text, path)
    return {"response": json.loads(path.read_text(encoding="utf-8"))["text"], "model": MODEL}


def save_recording(directory: Path, text: str, response: str, model: str, recorded_at: str) -> Path:
    path = recording_path(directory, text)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"text": response}, ensure_ascii=False) + "\\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
'''

# A sixth message whose recorded reply is word for word the fourth one's: two fixtures with
# identical content under two keys, which the brief does not call duplicates.
SECOND_THANKS = "Thanks again, your support team sorted out our webhooks really fast!"


def run_twice_minimal(dest: Path) -> Path:
    """run-twice-good reduced to what the brief asks for, and nothing the old rules wanted.

    Fixtures hold only `{"text": <reply>}` (no model, no recording time), named by a hash
    of model + prompt + params + input; two of them hold identical text; no test suite,
    no Makefile: only `./run.sh replay|record`; the model id goes to out/run.log.
    """
    repo = copy_repo("run-twice-good", dest)
    recordings = repo / "fixtures" / "recordings"
    old = {
        p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(recordings.glob("*.json"))
    }
    inputs = json.loads((repo / "fixtures" / "inputs.json").read_text(encoding="utf-8"))
    replies = {r["text"]: r["response"] for r in old.values()}
    thanks = next(t for t in replies if "ten minutes" in t)
    inputs.append({"text": SECOND_THANKS})
    replies[SECOND_THANKS] = replies[thanks]
    (repo / "fixtures" / "inputs.json").write_text(
        json.dumps(inputs, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (repo / "answerer" / "fixtures.py").write_text(MINIMAL_FIXTURES, encoding="utf-8")
    for name in old:
        (recordings / name).unlink()
    # The candidate's own code names the files (run on the host: it is the demo's code).
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from answerer.fixtures import save_recording\n"
        "for text, reply in json.load(sys.stdin):\n"
        "    save_recording(Path('fixtures/recordings'), text, reply, '', '')\n"
    )
    pairs = [[item["text"], replies[item["text"]]] for item in inputs]
    subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        input=json.dumps(pairs),
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    # The run log keeps the model id (there is no recording time left to log).
    edit(
        repo / "answerer" / "__main__.py",
        '                "model": recording["model"],\n'
        '                "recorded_at": recording["recorded_at"],\n',
        '                "model": recording["model"],\n',
    )
    shutil.rmtree(repo / "tests")
    (repo / "pytest.ini").unlink()
    (repo / "Makefile").unlink()
    edit(repo / "README.md", "make test         # pytest (offline)\n", "")
    return repo


def test_run_twice_good_hand_in_passes_every_check_its_brief_asks_for() -> None:
    checks = judge(REPOS / "run-twice-good", "run-twice")
    assert_verdicts(checks, "run-twice", expect=dict.fromkeys(RUN_TWICE_APPLIES, "pass"))
    assert checks[c.KEYS_MATCH].status == "skip"  # demo fixtures are named by the input text


def test_run_twice_brief_minimal_hand_in_gets_no_false_verdict(tmp_path: Path) -> None:
    repo = run_twice_minimal(tmp_path)
    files = sorted((repo / "fixtures" / "recordings").glob("*.json"))
    assert len(files) == 6 and len({f.read_bytes() for f in files}) == 5
    checks = judge(repo, "run-twice")
    assert_verdicts(
        checks,
        "run-twice",
        expect={
            c.OFFLINE_PASS: "pass",
            c.BYTE_IDENTICAL: "pass",
            c.MISSING_FIXTURE: "pass",
            c.NO_NETWORK: "pass",
            c.RECORDINGS_USED: "pass",
            c.MODEL_METADATA: "pass",
            c.PRUNED: "pass",
            c.ENTRYPOINTS: "pass",
        },
    )
    assert "gpt-4o-mini-2024-07-18" in checks[c.MODEL_METADATA].summary
    assert "test target: none, not required" in checks[c.ENTRYPOINTS].summary


def test_run_twice_timestamp_in_the_graded_file_fails_byte_identical(tmp_path: Path) -> None:
    repo = copy_repo("run-twice-good", tmp_path)
    edit(
        repo / "answerer" / "__main__.py",
        '    return {"answers": answers, "count": len(answers)}\n',
        '    return {"answers": answers, "count": len(answers), "generated_at": time.time()}\n',
    )
    checks = judge(repo, "run-twice")
    assert_verdicts(checks, "run-twice", expect={c.BYTE_IDENTICAL: "fail"})
    assert "timestamp" in checks[c.BYTE_IDENTICAL].summary


def test_run_twice_record_without_a_bound_on_model_calls_warns_entrypoints(tmp_path: Path) -> None:
    """The brief: record must be capped, by a max-calls bound the reviewer can find."""
    repo = copy_repo("run-twice-good", tmp_path)
    main = repo / "answerer" / "__main__.py"
    edit(
        main,
        "RECORD_CAP = 20  # a record run never makes more model calls than this unless --limit says so\n",
        "",
    )
    edit(main, "    if len(todo) > limit:\n", "    if False:\n")
    edit(
        main,
        '        print(f"recording {limit} of {len(todo)} missing inputs (raise --limit for more)", file=sys.stderr)\n',
        "        pass\n",
    )
    edit(main, "    for index in todo[:limit]:\n", "    for index in todo:\n")
    edit(
        main,
        '    parser.add_argument("--limit", type=int, default=RECORD_CAP, help="record: most model calls in one run")\n',
        "",
    )
    edit(
        main,
        "record(inputs, args.recordings, args.force, args.limit, log)",
        "record(inputs, args.recordings, args.force, 0, log)",
    )
    edit(repo / "run.sh", " [--force] [--limit N]", " [--force]")
    checks = judge(repo, "run-twice")
    assert_verdicts(
        checks, "run-twice", expect={c.ENTRYPOINTS: "warn"}, allow_warn=frozenset({c.ENTRYPOINTS})
    )
    assert "record capped (no max-calls bound found" in checks[c.ENTRYPOINTS].summary


def test_run_twice_silent_default_on_a_missing_fixture_fails_loudly_check(tmp_path: Path) -> None:
    repo = copy_repo("run-twice-good", tmp_path)
    edit(
        repo / "answerer" / "fixtures.py",
        "    if not path.is_file():\n        raise MissingRecording(index, text, path)\n",
        "    if not path.is_file():  # keep going: a default answer beats a crash\n"
        '        return {"text": text, "response": \'{"label": "question", "reply": ""}\','
        ' "model": "unknown", "recorded_at": ""}\n',
    )
    # the candidate's own test of a miss would not pass with that flaw: not shipped
    edit(
        repo / "tests" / "test_run_twice.py",
        "def test_a_missing_recording_fails_loudly_and_offline(",
        "def _not_shipped_missing_recording(",
    )
    checks = judge(repo, "run-twice")
    assert_verdicts(checks, "run-twice", expect={c.MISSING_FIXTURE: "fail"})
    assert checks[c.MISSING_FIXTURE].evidence[0]["outcome"] == "passes_silently"


# ------------------------------------------------------------------ 3. trace task

TRACE_APPLIES = [
    c.OFFLINE_PASS,
    c.MISSING_FIXTURE,
    c.NO_NETWORK,
    c.RECORDINGS_USED,
    c.KEYS_MATCH,
    c.NO_SECRETS,
    c.MODEL_METADATA,
    c.FRESH,
    c.PRUNED,
    c.PER_TURN,
    c.ENTRYPOINTS,
    c.STUB_HOPS_PRESENT,
    c.TOOL_CALLS_REACH_STUB,
    c.NO_INVENTED_IDS,
    c.IDEMPOTENCY_KEYS_LOGGED,
    c.LIVE_MATCH,  # re-driven against a fresh `python shop_stub.py` in the sandbox
]
# Skipped with a reason on the good hand-in: byte_identical (the trace assignment names no
# graded outputs), replay_notes (optional for this shape), idempotency_enforced (probing
# needs a live stub URL; the demo is ingested without one, as an upload is).

# Regenerates recordings/ and replay.jsonl by running the copy's own harness against the
# demo's scripted model (demo/tools/make_recordings.py); the model confirms only the orders
# its tool results name, so a dropped tool call does not also invent an id.
REGENERATE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import make_recordings as mr

def confirm(scenario, results):
    placed = [r["order"]["id"] for r in results if r.get("order")]
    if scenario == "two-items":
        return f"Order {placed[0]} is in for 1 x A-1; the 3 x B-2 order is queued."
    return original(scenario, results)

original, mr.shop_final_text = mr.shop_final_text, confirm
sys.exit(mr.main(["--in-repo", "shop", "good", sys.argv[2]]))
"""


def test_trace_good_hand_in_passes_every_check_its_brief_asks_for() -> None:
    checks = judge(REPOS / "shop-trace-good", "trace")
    assert_verdicts(checks, "trace", expect=dict.fromkeys(TRACE_APPLIES, "pass"))


def test_trace_tool_call_that_never_reaches_the_stub(tmp_path: Path) -> None:
    """The flaw: the harness sends only a turn's first tool call and acknowledges the rest."""
    repo = copy_repo("shop-trace-good", tmp_path)
    edit(
        repo / "harness.py",
        "        for call in calls:\n",
        "        for call in calls[1:]:  # one order per turn; the rest are picked up later\n"
        '            messages.append({"role": "tool", "tool_call_id": call["id"],\n'
        '                             "content": json.dumps({"ok": True, "status": "queued"})})\n'
        "        for call in calls[:1]:\n",
    )
    edit(
        repo / "tests" / "test_harness.py",
        "def test_every_tool_call_reaches_the_stub_with_the_same_arguments():",
        "def _not_shipped_every_tool_call_reaches_the_stub():",
    )
    subprocess.run(
        [sys.executable, "-c", REGENERATE, str(TOOLS), str(repo)],
        cwd=repo,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"},
    )
    assert "is queued" in (repo / "replay.jsonl").read_text()
    checks = judge(repo, "trace")
    assert_verdicts(checks, "trace", expect={c.TOOL_CALLS_REACH_STUB: "fail"})
    assert (
        "1 of 4 model tool calls never reached the stub" in checks[c.TOOL_CALLS_REACH_STUB].summary
    )


def test_trace_model_confirming_an_order_id_the_stub_never_issued(tmp_path: Path) -> None:
    """The flaw: the recorded final answer names an order id no stub response carries."""
    repo = copy_repo("shop-trace-good", tmp_path)
    rows = [json.loads(line) for line in (repo / "replay.jsonl").read_text().splitlines()]
    final = next(
        r["resp"]["choices"][0]["message"]["content"]
        for r in rows
        if "Both orders are in" in json.dumps(r["resp"])
    )
    real = final.split(" and ")[1].split()[0]
    invented = final.replace(real, "ord_deadbeef")
    # the same answer in the recording the harness replays and in the trace it wrote
    recording = next(
        p for p in (repo / "recordings").glob("*.json") if "Both orders are in" in p.read_text()
    )
    edit(recording, json.dumps(final), json.dumps(invented))
    edit(repo / "replay.jsonl", json.dumps(final), json.dumps(invented))
    edit(
        repo / "tests" / "test_harness.py",
        "def test_model_output_only_mentions_ids_the_stub_issued():",
        "def _not_shipped_model_output_only_mentions_issued_ids():",
    )
    checks = judge(repo, "trace")
    assert_verdicts(checks, "trace", expect={c.NO_INVENTED_IDS: "fail"})
    assert "ord_deadbeef" in json.dumps(checks[c.NO_INVENTED_IDS].evidence)


# ------------------------------------------------------------------ 4. ticket-service task

TICKET_APPLIES = [
    c.OFFLINE_PASS,
    c.BYTE_IDENTICAL,
    c.NO_NETWORK,
    c.RECORDINGS_USED,
    c.KEYS_MATCH,
    c.NO_SECRETS,
    c.MODEL_METADATA,
    c.FRESH,
    c.PRUNED,
    c.PER_TURN,
    c.ENTRYPOINTS,
    c.REPLAY_NOTES,
    c.LEDGER_CONSISTENT,
    c.SERVICE_STARTS,
    c.SCHEMA_VALID,
    c.DEGRADES_GRACEFULLY,  # the brief's "missing fixture" rule: degrade honestly
    c.CACHES,
]
# replay.missing_fixture_fails_loudly is a skip for this shape (degrading is right here).


def regenerate_ledger(repo: Path) -> None:
    """`make replay` in the copy, on the host, and its ledger committed as the sample."""
    subprocess.run(
        [sys.executable, "replay.py"],
        cwd=repo,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "QUIET": "1"},
    )
    shutil.copyfile(repo / "out" / "ledger.jsonl", repo / "ledger.jsonl")
    shutil.rmtree(repo / "out")


def test_ticket_service_good_hand_in_passes_every_check_its_brief_asks_for() -> None:
    checks = judge(REPOS / "ticket-service-good", "ticket-service")
    assert_verdicts(checks, "ticket-service", expect=dict.fromkeys(TICKET_APPLIES, "pass"))
    assert checks[c.MISSING_FIXTURE].status == "skip"


def test_ticket_service_ledger_fallback_lines_without_needs_human(tmp_path: Path) -> None:
    """Brief-minimal: `needs_human` is the ticket's; a fallback ledger line need not repeat it."""
    repo = copy_repo("ticket-service-good", tmp_path)
    edit(
        repo / "ticketing.py",
        '        entry = {"event": event, "line_sha": sha, "attempt": attempt, "reason": reason,'
        ' "needs_human": needs_human, **extra}\n',
        '        entry = {"event": event, "line_sha": sha, "attempt": attempt, "reason": reason,'
        ' "needs_human": needs_human, **extra}\n'
        '        if event == "fallback":  # the ticket carries needs_human; the line records why\n'
        '            del entry["needs_human"]\n',
    )
    edit(
        repo / "tests" / "test_service.py",
        ' "reason": "model not configured (MODEL_URL unset)", "needs_human": True}\n',
        ' "reason": "model not configured (MODEL_URL unset)"}\n',
    )
    regenerate_ledger(repo)
    fallbacks = [
        json.loads(line)
        for line in (repo / "ledger.jsonl").read_text().splitlines()
        if '"fallback"' in line
    ]
    assert fallbacks and all("needs_human" not in f for f in fallbacks)
    checks = judge(repo, "ticket-service")
    assert_verdicts(checks, "ticket-service", expect=dict.fromkeys(TICKET_APPLIES, "pass"))


def test_ticket_service_fallback_that_does_not_mark_needs_human(tmp_path: Path) -> None:
    """The flaw: the rule-based fallback ticket is schema-valid but says no human is needed."""
    repo = copy_repo("ticket-service-good", tmp_path)
    edit(repo / "ticketing.py", '        "needs_human": True,\n', '        "needs_human": False,\n')
    # the candidate's own assertions on the fallback's flag would not pass: not shipped
    for name in ("test_fallback.py", "test_service.py"):
        text = (repo / "tests" / name).read_text()
        (repo / "tests" / name).write_text(text.replace('ticket["needs_human"] is True and ', ""))
    regenerate_ledger(repo)
    checks = judge(repo, "ticket-service")
    assert_verdicts(
        checks, "ticket-service", expect={c.DEGRADES_GRACEFULLY: "fail", c.SCHEMA_VALID: "pass"}
    )
    assert "needs_human" in checks[c.DEGRADES_GRACEFULLY].summary + json.dumps(
        checks[c.DEGRADES_GRACEFULLY].evidence
    )
