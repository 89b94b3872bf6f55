"""The service probe: pure judgements, and real services started in the sandbox."""

from __future__ import annotations

import io
import json
from unittest import mock

import pytest

from cassettes_app.parsed import LedgerEntry
from reviewer.ops.demo import DEMO_DIR
from submissions.assignments import assignment_apply, assignment_values, load_assignment_file
from submissions.checks.probe_exchanges import (
    PROBE_LINES,
    Exchange,
    ProbeConfig,
    ProbeLine,
    ProbeReport,
    build_requests,
    parse_driver_output,
)
from submissions.checks.service import (
    degrade_problems,
    same_time,
    service_caches,
    service_checks,
    service_degrades_gracefully,
    service_ledger_consistent,
    service_schema_valid,
    ticket_problems,
)
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Assignment, Candidate, CheckResult, Job
from tests.conftest import ingest_inline, make_zip

SCHEMA = json.loads((DEMO_DIR / "assignments" / "schemas" / "ticket.json").read_text())
LINE = ProbeLine("no timestamp", "worker-3 ERROR could not connect to redis")
TS_LINE = ProbeLine("error", "2024-03-09T14:02:11Z payments ERROR failed", "2024-03-09T14:02:11Z")
EMPTY = ProbeLine("empty", "", may_reject=True)


def _ticket(**over) -> dict:
    ticket = {
        "service": "worker-3",
        "severity": "high",
        "first_seen": None,
        "evidence": "could not connect to redis",
        "confidence": 0.2,
        "needs_human": True,
    }
    ticket.update(over)
    return ticket


def _ex(line=LINE, repeat=1, status=200, body=None, ledger=(), index=0, error=None) -> Exchange:
    text = body if isinstance(body, str) else json.dumps(_ticket() if body is None else body)
    return Exchange(
        index=index,
        line=line,
        repeat=repeat,
        request=f"POST /extract {json.dumps({'line': line.text})}",
        status=None if error else status,
        body="" if error else text,
        error=error,
        ledger=[LedgerEntry(line=i + 1, event=e, data=d) for i, (e, d) in enumerate(ledger)],
        ledger_path="ledger.jsonl",
    )


def _entry(event: str, **data) -> tuple[str, dict]:
    return event, {"event": event, "line_sha": "s1", **data}


# ------------------------------------------------------------------ pure judgements


def test_probe_lines_cover_the_cases_the_brief_names() -> None:
    labels = {line.label for line in PROBE_LINES}
    assert {"panic", "error", "warning", "ISO timestamp", "no timestamp", "non-ASCII"} <= labels
    assert any(line.text == "" for line in PROBE_LINES)
    big = next(line for line in PROBE_LINES if line.label == "100 KB")
    assert len(big.text) == 100 * 1024 and big.may_reject
    assert any(not line.text.isascii() for line in PROBE_LINES)
    for line in PROBE_LINES:
        assert line.timestamp is None or line.timestamp in line.text


def test_requests_send_each_line_twice_in_the_assignments_shape() -> None:
    config = ProbeConfig(command="python app.py", port=9001, field="text")
    requests = build_requests(config)
    assert len(requests) == 2 * len(PROBE_LINES)
    assert [r["repeat"] for r in requests[:4]] == [1, 2, 1, 2]
    assert requests[0]["url"] == "http://127.0.0.1:9001/extract"
    assert json.loads(requests[0]["body"]) == {"text": PROBE_LINES[0].text}
    get = build_requests(ProbeConfig(command="x", method="GET", path="/t"))
    assert get[0]["body"] is None and get[0]["url"].startswith("http://127.0.0.1:8000/t?line=")


@pytest.mark.django_db
def test_config_defaults_follow_the_ticket_service_shape() -> None:
    assignment = Assignment(slug="x", title="x", service_start_command=" python app.py ")
    config = ProbeConfig.from_assignment(assignment)
    assert (config.command, config.port, config.endpoint, config.field) == (
        "python app.py",
        8000,
        "POST /extract",
        "line",
    )
    assert config.start_timeout == 20


def test_builtin_ticket_shape() -> None:
    assert ticket_problems(_ticket()) == []
    assert ticket_problems(_ticket(extra="fine without a schema")) == []
    assert ticket_problems([1]) == ["not a JSON object"]
    problems = ticket_problems(_ticket(severity="urgent", confidence=1.5, needs_human="yes"))
    assert len(problems) == 3
    assert "missing evidence" in ticket_problems(
        {k: v for k, v in _ticket().items() if k != "evidence"}
    )
    assert ticket_problems(_ticket(confidence=True))  # a bool is not a number here


def test_schema_validation_uses_the_assignments_schema_as_given() -> None:
    assert ticket_problems(_ticket(cached=True), SCHEMA) == []
    problems = ticket_problems(_ticket(note="x"), SCHEMA)
    assert problems and "note" in problems[0]
    assert any("severity" in p for p in ticket_problems(_ticket(severity="urgent"), SCHEMA))


@pytest.mark.parametrize(
    ("value", "timestamp", "same"),
    [
        ("2024-03-09T14:02:11Z", "2024-03-09T14:02:11Z", True),
        ("2024-03-09T14:05:42", "2024-03-09 14:05:42", True),
        ("2024-03-09T13:07:30Z", "2024-03-09T14:07:30.125+01:00", True),  # same instant
        ("2024-03-09T14:07:30+01:00", "2024-03-09T14:07:30.125+01:00", True),
        ("2026-01-01T00:00:00Z", "2024-03-09T14:02:11Z", False),
        (None, "2024-03-09T14:02:11Z", False),
    ],
)
def test_first_seen_must_name_the_lines_timestamp(value, timestamp, same) -> None:
    assert same_time(value, timestamp) is same


def test_degrading_well_and_badly() -> None:
    assert degrade_problems(_ex()) == ([], [])
    fails, _ = degrade_problems(_ex(body=_ticket(first_seen="2026-11-29T10:00:00Z")))
    assert fails == ["invented first_seen '2026-11-29T10:00:00Z': the line has no timestamp"]
    assert degrade_problems(_ex(body=_ticket(first_seen="unknown"))) == ([], [])
    fails, _ = degrade_problems(_ex(body=_ticket(confidence=0.9, needs_human=False)))
    assert len(fails) == 2
    fails, _ = degrade_problems(_ex(body=_ticket(evidence="redis is down")))
    assert "not a quote" in fails[0]
    assert degrade_problems(_ex(status=500, body={"error": "boom"}))[0][0].startswith(
        "answered 500"
    )
    # A line with a timestamp: first_seen should name it; unknown is only a warning.
    ts = _ticket(first_seen="2024-03-09T14:02:11Z", evidence="payments ERROR failed")
    assert degrade_problems(_ex(line=TS_LINE, body=ts)) == ([], [])
    _, warns = degrade_problems(_ex(line=TS_LINE, body={**ts, "first_seen": None}))
    assert warns
    # The empty line may be refused; it must not crash the service.
    assert degrade_problems(_ex(line=EMPTY, status=400, body={"error": "empty"})) == ([], [])
    assert degrade_problems(_ex(line=EMPTY, status=500, body={"error": "x"}))[0]


def test_degrades_names_the_line_and_shows_the_exchange() -> None:
    outcome = service_degrades_gracefully(
        [_ex(body=_ticket(first_seen="2026-11-29T10:00:00Z")), _ex(repeat=2)]
    )
    assert outcome.status == "fail"
    assert "no timestamp log line 'worker-3 ERROR" in outcome.summary
    first = outcome.evidence[0]
    assert first["status"] == 200 and "2026-11-29" in first["response"]
    assert first["request"].startswith("POST /extract")


def test_schema_check_accepts_a_json_refusal_of_the_empty_line_only() -> None:
    fine = service_schema_valid([_ex(), _ex(line=EMPTY, status=400, body={"error": "empty"})])
    assert fine.status == "pass" and "empty line was refused with 400" in fine.summary
    html = service_schema_valid([_ex(line=EMPTY, status=400, body="<html>bad</html>")])
    assert html.status == "fail"
    refused = service_schema_valid([_ex(status=422, body={"error": "no"})])
    assert refused.status == "fail" and "answered 422" in refused.summary
    assert service_schema_valid([_ex(error="ConnectionResetError: reset")]).status == "fail"


def test_schema_evidence_is_capped_and_redacted() -> None:
    key = "sk-proj-" + "A1b2C3d4" * 6
    outcome = service_schema_valid([_ex(status=500, body="x" * 10_000 + key)])
    response = outcome.evidence[0]["response"]
    assert len(response) < 2200 and "more characters" in response
    outcome = service_schema_valid([_ex(status=500, body=f"error: bad key {key}")])
    assert key not in json.dumps(outcome.evidence)


def test_caching_is_judged_by_flag_or_ledger_and_no_second_attempt() -> None:
    first = _ex(ledger=[_entry("fallback", needs_human=True, reason="down")])
    flagged = _ex(repeat=2, body=_ticket(cached=True))
    assert service_caches([first, flagged], ledger_tracked=True).status == "pass"
    hit = _ex(repeat=2, ledger=[_entry("cache_hit")])
    assert service_caches([first, hit], ledger_tracked=True).status == "pass"
    again = _ex(repeat=2, ledger=[_entry("fallback", needs_human=True, reason="down")])
    outcome = service_caches([first, again], ledger_tracked=True)
    assert outcome.status == "fail" and "not served from the cache" in outcome.summary
    lying = _ex(repeat=2, body=_ticket(cached=True), ledger=[_entry("model_call", attempt=1)])
    outcome = service_caches([first, lying], ledger_tracked=True)
    assert outcome.status == "fail" and "1 more model attempt" in outcome.summary
    # Nothing to cache (the first answer failed) and no new attempt: no verdict.
    crashed = _ex(status=500, body={"error": "x"})
    assert (
        service_caches([crashed, _ex(repeat=2, status=500, body={})], ledger_tracked=True).status
        == "skip"
    )


def test_a_repeat_sent_while_the_first_was_still_retrying_is_not_judged() -> None:
    """Issue 25, case 3: the first request timed out mid retry storm; the ledger lines
    after the repeat are the first's. Not a caching verdict; the storm is the degrade
    check's finding."""
    storm = [_entry("model_call", attempt=i, reason="down") for i in range(1, 4)]
    first = _ex(error="TimeoutError: timed out")
    first.seconds = 10.0
    repeat = _ex(repeat=2, index=1, body=_ticket(cached=True), ledger=storm)
    outcome = service_caches([first, repeat], ledger_tracked=True)
    assert outcome.status == "skip"
    assert outcome.summary.startswith("not judged: the first request of 1 line got no answer")
    degrade = service_degrades_gracefully([first, repeat])
    assert degrade.status == "fail"
    assert "no answer after 10.0 s: TimeoutError" in degrade.summary


def test_what_the_probe_budget_left_unobserved_is_skipped() -> None:
    first = _ex(error="TimeoutError: timed out")
    rest = [
        _ex(line=TS_LINE, repeat=r, index=i, error="not sent: the probe's time budget ran out")
        for i, r in ((1, 2), (2, 1), (3, 2))
    ]
    repeat = _ex(repeat=2, index=1, ledger=[_entry("model_call", attempt=1)])
    outcomes = {o.id: o for o in service_checks(_report([first, repeat, *rest]))}
    caches = outcomes["service.caches"]
    assert caches.status == "skip"
    assert caches.summary == "not judged: the probe ran out of time after 2 of 5 requests"


def _report(exchanges, *, globs=("ledger.jsonl",), started=True) -> ProbeReport:
    entries = [e for ex in exchanges for e in ex.ledger]
    return ProbeReport(
        config=ProbeConfig(command="python app.py", ledger_globs=globs),
        started=started,
        start_seconds=0.2,
        start_error="" if started else "exited with code 1 before answering on port 8000",
        log="SyntaxError: invalid syntax",
        exchanges=list(exchanges),
        ledger_entries={"ledger.jsonl": entries} if entries else {},
    )


def test_ledger_written_during_the_probe_bounds_retries_per_request() -> None:
    storm = [_entry("model_call", attempt=i, reason="down") for i in range(1, 6)]
    storm.append(_entry("fallback", attempt=5, reason="down", needs_human=True))
    outcome = service_ledger_consistent(_report([_ex(ledger=storm)]))
    assert outcome is not None and outcome.status == "fail"
    assert outcome.summary.startswith("written during the probe")
    assert "5 model attempts" in outcome.summary
    # A fallback answered with needs_human false is the ticket's fault, judged by
    # service.degrades_gracefully: the ledger that recorded the fallback is not failed for it.
    fallback = [_entry("fallback", attempt=0, reason="down", needs_human=True)]
    outcome = service_ledger_consistent(
        _report([_ex(body=_ticket(needs_human=False), ledger=fallback)])
    )
    assert outcome.status == "pass", outcome.summary
    assert any(
        "needs_human False (judged by service.degrades_gracefully)" in e["message"]
        for e in outcome.evidence
    )
    assert service_ledger_consistent(_report([_ex(ledger=fallback)])).status == "pass"
    # Nothing appended while answering: a warning; no ledger named: not judged here.
    assert service_ledger_consistent(_report([_ex()])).status == "warn"
    assert service_ledger_consistent(_report([_ex()], globs=())) is None


def test_a_service_that_never_starts_skips_the_other_checks() -> None:
    outcomes = {o.id: o for o in service_checks(_report([], started=False))}
    assert outcomes["service.starts"].status == "fail"
    assert "SyntaxError" in outcomes["service.starts"].evidence[0]["output"]
    for cid in ("service.schema_valid", "service.degrades_gracefully", "service.caches"):
        assert outcomes[cid].status == "skip"
        assert outcomes[cid].summary == "the service did not start"
    assert "ledger.consistent" not in outcomes


def test_driver_output_needs_the_nonce_and_keeps_ledger_line_numbers() -> None:
    config = ProbeConfig(command="x", ledger_globs=("ledger.jsonl",))
    requests = build_requests(config)
    nonce = "CR-abc:"
    events = [
        {"type": "ledger_start", "files": {"ledger.jsonl": 120}},
        {"type": "started", "seconds": 0.3},
        {"type": "answer", "index": 0, "status": 200, "body": json.dumps(_ticket())},
        {
            "type": "ledger",
            "path": "ledger.jsonl",
            "after": 0,
            "line_base": 9,
            "text": '{"event": "fallback", "reason": "x", "needs_human": true}\n',
        },
        {"type": "answer", "index": 1, "error": "ConnectionRefusedError: refused"},
    ]
    lines = [nonce + json.dumps(e) for e in events]
    # What the service prints cannot pose as the driver without the nonce.
    lines.insert(2, json.dumps({"type": "answer", "index": 0, "status": 500}))
    report = parse_driver_output("\n".join(lines).encode(), nonce, config, requests)
    assert report is not None and report.started and not report.complete
    assert report.exchanges[0].status == 200
    assert [e.line for e in report.exchanges[0].ledger] == [10]
    assert report.exchanges[1].error.startswith("ConnectionRefused")
    assert "cut short" in report.exchanges[2].error
    assert parse_driver_output(b"nothing", nonce, config, requests) is None


# ------------------------------------------------------------------ the job

SERVICE = r"""
import datetime, hashlib, json, os, re, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

MODE = "__MODE__"
ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")
CACHE = {}


def ledger(**entry):
    with open("ledger.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


def ask_model(line):  # there is no network in the sandbox: this always fails
    urllib.request.urlopen("http://127.0.0.1:9/v1/chat/completions", data=b"{}", timeout=2)


def extract(line):
    sha = hashlib.sha256(line.encode()).hexdigest()
    if MODE != "nocache" and sha in CACHE:
        ledger(event="cache_hit", line_sha=sha, needs_human=True)
        return dict(CACHE[sha], cached=True)
    tries = 5 if MODE == "storm" else 2
    for attempt in range(1, tries + 1):
        try:
            ask_model(line)
        except OSError as err:
            ledger(event="model_call", line_sha=sha, attempt=attempt, reason=str(err))
            if MODE == "crash":
                raise
    m = ISO.search(line)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    first_seen = m.group(0) if m else (now if MODE == "invent" else None)
    ticket = {"service": "svc", "severity": "high" if "ERROR" in line else "low",
              "first_seen": first_seen, "evidence": line.strip()[:200], "confidence": 0.2,
              "needs_human": True}
    ledger(event="fallback", line_sha=sha, attempt=tries, reason="model unavailable",
           needs_human=True)
    CACHE[sha] = ticket
    return dict(ticket, cached=False)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        line = body.get("line") or ""
        if not line.strip():
            return self.answer(400, {"error": "empty line"})
        try:
            self.answer(200, extract(line))
        except Exception as err:
            self.answer(500, {"error": str(err)})

    def answer(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Handler).serve_forever()
"""

# The committed ledger holds a retry storm from development: only what the service appends
# during the probe is judged.
COMMITTED_LEDGER = "".join(
    json.dumps({"event": "model_call", "line_sha": "old", "attempt": i, "reason": "dev"}) + "\n"
    for i in range(1, 8)
)

VALUES = {
    "slug": "svc-probe",
    "title": "Service probe (test)",
    "shape": "ticket-service",
    "replay_command": "",  # analysis and the probe only
    "recordings": ["recordings/*.json"],
    "ledgers": ["ledger.jsonl"],
    "service_start_command": "python3 app.py",
    "service_port": 8000,
}


def _service(mode: str) -> dict[str, str]:
    return {
        "app.py": SERVICE.replace("__MODE__", mode),
        "ledger.jsonl": COMMITTED_LEDGER,
        "README.md": "# ticket service\n",
    }


def _ingest(files_or_dir, values: dict) -> tuple[Job, dict[str, CheckResult]]:
    s, checks = ingest_inline(files_or_dir, values, candidate="Probed")
    probes = list(s.jobs.filter(kind=Job.Kind.PROBE))
    assert len(probes) == 1
    return probes[0], checks


def _probe(mode: str) -> dict[str, CheckResult]:
    job, checks = _ingest(_service(mode), assignment_values(VALUES))
    assert job.state == Job.State.PASSED, job.error
    assert checks["service.starts"].status == "pass", checks["service.starts"].evidence
    return checks


def _demo_values() -> dict:
    values = load_assignment_file(DEMO_DIR / "assignments" / "ticket-service.yaml")
    values["replay_command"] = ""
    return values


@pytest.mark.sandbox
@pytest.mark.django_db
def test_demo_good_ticket_service_passes_every_service_check() -> None:
    job, checks = _ingest(DEMO_DIR / "repos" / "ticket-service-good", _demo_values())
    assert job.state == Job.State.PASSED, job.error
    for cid in (
        "service.starts",
        "service.schema_valid",
        "service.degrades_gracefully",
        "service.caches",
        "ledger.consistent",
    ):
        assert checks[cid].status == "pass", (cid, checks[cid].summary)
        assert checks[cid].job_id == job.pk  # the probe's result replaced the static one
    assert "written during the probe" in checks["ledger.consistent"].summary
    exchanges = [e for e in checks["service.degrades_gracefully"].evidence if "request" in e]
    assert len(exchanges) == 2 * len(PROBE_LINES)
    assert all(len(e["request"]) < 2200 for e in exchanges)


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_service_that_answers_500_when_the_model_is_down_does_not_degrade() -> None:
    checks = _probe("crash")
    degrades = checks["service.degrades_gracefully"]
    assert degrades.status == "fail"
    assert "answered 500 with the model unavailable" in degrades.summary
    assert checks["service.schema_valid"].status == "fail"


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_service_that_invents_first_seen_fails_naming_the_line() -> None:
    checks = _probe("invent")
    degrades = checks["service.degrades_gracefully"]
    assert degrades.status == "fail"
    assert "invented first_seen" in degrades.summary
    assert "the line has no timestamp" in degrades.summary
    assert any("no timestamp log line 'worker-3" in e["message"] for e in degrades.evidence)
    assert checks["service.schema_valid"].status == "pass"
    assert checks["service.caches"].status == "pass"
    # The committed storm is not judged: only the lines written during the probe are.
    ledger = checks["ledger.consistent"]
    assert ledger.status == "pass", ledger.summary
    assert "written during the probe" in ledger.summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_service_that_retries_five_times_fails_ledger_consistent() -> None:
    checks = _probe("storm")
    ledger = checks["ledger.consistent"]
    assert ledger.status == "fail"
    assert "5 model attempts" in ledger.summary
    assert checks["service.degrades_gracefully"].status == "pass"
    assert checks["service.caches"].status == "pass"


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_service_that_never_caches_fails_caches() -> None:
    checks = _probe("nocache")
    caches = checks["service.caches"]
    assert caches.status == "fail"
    assert "not served from the cache" in caches.summary
    assert checks["service.degrades_gracefully"].status == "pass"


@pytest.mark.sandbox
@pytest.mark.django_db
def test_demo_flawed_ticket_service_shows_several_flaws_at_once() -> None:
    job, checks = _ingest(DEMO_DIR / "repos" / "ticket-service-flawed", _demo_values())
    assert job.state == Job.State.PASSED, job.error
    assert checks["service.starts"].status == "pass"
    for cid in (
        "service.schema_valid",
        "service.degrades_gracefully",
        "service.caches",
        "ledger.consistent",
    ):
        assert checks[cid].status == "fail", (cid, checks[cid].summary)
    assert "retry storm" in checks["ledger.consistent"].summary


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_service_that_never_starts_shows_why_and_skips_the_rest() -> None:
    files = _service("good")
    files["app.py"] = "def extract(line:\n    return line\n"
    job, checks = _ingest(files, assignment_values(VALUES))
    assert job.state == Job.State.PASSED
    starts = checks["service.starts"]
    assert starts.status == "fail"
    assert "exited with code 1" in starts.summary
    assert "SyntaxError" in starts.evidence[0]["output"]
    for cid in ("service.schema_valid", "service.degrades_gracefully", "service.caches"):
        assert checks[cid].status == "skip"
        assert checks[cid].summary == "the service did not start"


@pytest.mark.django_db
def test_without_the_sandbox_the_probe_ends_in_error_with_the_cause(settings) -> None:
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    job, checks = _ingest(_service("good"), assignment_values(VALUES))
    assert job.state == Job.State.ERROR
    assert "bwrap" in job.error
    for cid in ("service.starts", "service.schema_valid", "service.caches"):
        assert checks[cid].status == "error" and "bwrap" in checks[cid].summary
        assert checks[cid].cause == "sandbox"  # a fact the pages read, not the words
    # The static ledger result stays: the probe never ran.
    assert checks["ledger.consistent"].job.kind == Job.Kind.ANALYSIS


@pytest.mark.django_db
def test_no_probe_is_queued_without_a_service_start_command() -> None:
    values = assignment_values({**VALUES, "slug": "svc-none", "service_start_command": ""})
    assignment = assignment_apply(values=values)[0]
    candidate = Candidate.objects.create(name="No service")
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(make_zip(_service("good"))),
            filename="s.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission
        jobs_run_inline(submission=s)
    assert not s.jobs.filter(kind=Job.Kind.PROBE).exists()


@pytest.mark.django_db
def test_a_service_in_node_with_npm_dependencies_is_not_started(settings) -> None:
    """The sandbox never installs npm packages: the probe skips, saying so (issue 25)."""
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"  # nothing may reach the sandbox
    files = {
        "server.js": "import express from 'express';\n",
        "package.json": json.dumps({"type": "module", "dependencies": {"express": "^5.1.0"}}),
        "ledger.jsonl": COMMITTED_LEDGER,
    }
    values = {**VALUES, "slug": "svc-node", "service_start_command": "node server.js"}
    job, checks = _ingest(files, assignment_values(values))
    assert job.state == Job.State.PASSED, job.error
    reason = (
        "not run: the service needs npm dependencies (package.json) "
        "and this sandbox installs Python dependencies only"
    )
    for cid in ("service.starts", "service.schema_valid", "service.degrades_gracefully"):
        assert (checks[cid].status, checks[cid].summary) == ("skip", reason)
    env = checks["env.dependencies_installed"]
    assert env.status == "skip" and env.summary.startswith("declares npm dependencies")
