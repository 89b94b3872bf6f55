"""The evidence on the submission page: long lists folded, sections by shape, the probe
transcript of a ticket service."""

from __future__ import annotations

import io
import json
import re
from unittest import mock

import pytest

from submissions.assignments import assignment_apply, assignment_values
from submissions.checks.probe_exchanges import (
    PROBE_LINES,
    Exchange,
    ProbeConfig,
    ProbeReport,
    build_requests,
)
from submissions.checks.service import service_checks
from submissions.checks.store import checks_store
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Assignment, Candidate, CheckResult, Job, Submission
from tests.conftest import make_zip


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _assignment(shape: str) -> Assignment:
    values = assignment_values({"slug": f"a-{shape}", "title": shape, "shape": shape})
    return assignment_apply(values=values)[0]


def _submission(user, assignment: Assignment, name: str = "Ada") -> Submission:
    s = submission_create(
        upload=io.BytesIO(make_zip({"README.md": name})),
        filename="r.zip",
        candidate=Candidate.objects.create(name=name),
        assignment=assignment,
        uploaded_by=user,
    ).submission
    s.jobs.update(state=Job.State.PASSED)  # the jobs ended: the page shows what they wrote
    return s


def _page(client, user, submission: Submission) -> str:
    client.force_login(user)
    return client.get(submission.get_absolute_url()).content.decode()


def test_a_long_evidence_list_shows_five_items_and_folds_the_rest(client, reviewer) -> None:
    s = _submission(reviewer, _assignment("ticket-service"))
    CheckResult.objects.create(
        submission=s,
        check_id="ledger.consistent",
        status="fail",
        summary="4 retries unbounded",
        evidence=[{"message": f"ledger line {i}: a model call", "path": "ledger.jsonl"}
                  for i in range(1, 34)],
    )  # fmt: skip
    page = _page(client, reviewer, s)
    row = page[page.index('id="check-ledger.consistent"') :]
    row = row[: row.index("</tr>")]
    # A failing check opens its evidence, but only the first five items show.
    shown, folded = row.split('<details class="evidence-more">')
    assert '<details class="evidence-list" open><summary>33 evidence items</summary>' in shown
    assert shown.count("<li>") == 5 and "ledger line 5:" in shown and "ledger line 6:" not in shown
    assert folded.startswith("<summary>5 of 33 · show all</summary>")
    assert folded.count("<li>") == 28 and "ledger line 33:" in folded


def test_a_short_evidence_list_has_nothing_to_fold(client, reviewer, assignment) -> None:
    s = _submission(reviewer, assignment)
    CheckResult.objects.create(
        submission=s, check_id="cassettes.fresh", status="pass", summary="fresh",
        evidence=[{"message": f"fresh {i}"} for i in range(5)],
    )  # fmt: skip
    page = _page(client, reviewer, s)
    assert "5 evidence items" in page and "show all" not in page and "fresh 4" in page


def test_sections_show_only_for_the_shapes_that_use_them(client, reviewer) -> None:
    cassette = _page(client, reviewer, _submission(reviewer, _assignment("cassette"), "Cy"))
    assert 'id="checks"' in cassette and 'id="recordings"' in cassette
    for section in ("Idempotency probe", "Trace hops", "What the service answered"):
        assert section not in cassette, section
    trace = _page(client, reviewer, _submission(reviewer, _assignment("trace"), "Tia"))
    assert "Idempotency probe" in trace and "Trace hops" in trace
    assert "What the service answered" not in trace
    service = _page(client, reviewer, _submission(reviewer, _assignment("ticket-service"), "Sam"))
    assert "What the service answered" in service and "The service probe has not run" in service
    assert "Idempotency probe" not in service and "Trace hops" not in service


def test_a_section_with_content_shows_whatever_the_shape(client, reviewer) -> None:
    from submissions.models import Recording, TraceRow

    s = _submission(reviewer, _assignment("cassette"))
    rec = Recording.objects.create(submission=s, path="replay.jsonl", format="trace")
    TraceRow.objects.create(submission=s, recording=rec, line=1, url="http://stub/orders")
    page = _page(client, reviewer, s)
    assert "Trace hops <small>1</small>" in page and "http://stub/orders" in page


def _answers(config: ProbeConfig) -> list[Exchange]:
    """What a service answers with the model unavailable: a fallback ticket for every
    line, a 400 with a JSON error for the empty one; the repeat claims the cache."""
    lines = {line.label: line for line in config.lines}
    out = []
    for req in build_requests(config):
        line = lines[req["label"]]
        ex = Exchange(
            index=req["index"],
            line=line,
            repeat=req["repeat"],
            request=f"{req['method']} /extract {req['body']}",
        )
        if not line.text:
            ex.status, ex.body = 400, json.dumps({"error": "empty <line>"})
        else:
            ticket = {
                "service": "unknown",
                "severity": "medium",
                "first_seen": line.timestamp,
                "evidence": line.text[:40],
                "confidence": 0.1,
                "needs_human": True,
                "cached": req["repeat"] == 2,
            }
            ex.status, ex.body = 200, json.dumps(ticket)
        out.append(ex)
    return out


def test_a_ticket_service_page_shows_what_the_service_answered(client, reviewer) -> None:
    s = _submission(reviewer, _assignment("ticket-service"))
    config = ProbeConfig(command="python app.py")
    report = ProbeReport(config=config, started=True, start_seconds=0.4)
    report.exchanges = _answers(config)
    checks_store(s, None, service_checks(report))
    page = _page(client, reviewer, s)
    section = page[page.index('id="probe-transcript"') :]
    section = section[: section.index("</section>")]
    assert "16 requests" in section
    # In the order sent: each line, then its repeat.
    order = [section.index(f"<strong>{line.label}</strong>") for line in PROBE_LINES]
    assert order == sorted(order)
    assert section.count("· repeat") == len(PROBE_LINES)
    # request line and body → status → body, escaped.
    assert '<code class="request-line">POST /extract</code>' in section
    assert "{&quot;line&quot;: &quot;panic: runtime error" in section
    assert '<span class="status status-warn">400</span>' in section
    assert "{&quot;error&quot;: &quot;empty &lt;line&gt;&quot;}" in section
    assert "<line>" not in section
    assert "&quot;needs_human&quot;: true" in section
    # The probe's word on each request, without naming the line again.
    assert '<p class="hint verdict-line">degrades gracefully</p>' in section
    # The 100 KB line's body is bounded as stored, never the whole line.
    assert len(section) < 60_000 and "more characters]" in section


def test_an_unanswered_probe_request_says_why(client, reviewer) -> None:
    s = _submission(reviewer, _assignment("ticket-service"))
    config = ProbeConfig(command="python app.py")
    report = ProbeReport(config=config, started=True)
    report.exchanges = _answers(config)
    report.exchanges[0].status = None
    report.exchanges[0].error = "timed out after 10.0 s"
    checks_store(s, None, service_checks(report))
    section = _page(client, reviewer, s).split('id="probe-transcript"')[1]
    assert '<span class="status status-error">no answer</span> timed out after 10.0 s' in section


def _poll(client, submission: Submission, seen: str):
    return client.get(
        submission.get_absolute_url(), {"panel": "jobs", "seen": seen}, HTTP_HX_REQUEST="true"
    )


def _seen(html: str) -> str:
    return re.search(r"\?panel=jobs&amp;seen=([0-9a-f]+)", html).group(1)


def test_static_checks_and_recordings_show_while_the_replay_runs(
    client, reviewer, small_zip
) -> None:
    """Analysis ends in a second, the replay in ten: the page does not wait for the last."""
    from submissions.jobs.engine import job_execute

    values = assignment_values({"slug": "live", "title": "Live", "replay_command": "make test"})
    s = submission_create(
        upload=io.BytesIO(small_zip),
        filename="r.zip",
        candidate=Candidate.objects.create(name="Ada"),
        assignment=assignment_apply(values=values)[0],
        uploaded_by=reviewer,
    ).submission
    client.force_login(reviewer)
    before = client.get(s.get_absolute_url()).content.decode()
    assert "No checks have run yet." in before and "Recordings <small>0</small>" in before
    seen = _seen(before)
    assert b"evidence-top" not in _poll(client, s, seen).content  # nothing moved yet

    for kind in (Job.Kind.INTAKE, Job.Kind.ANALYSIS):  # the analysis queues the replay
        job_execute(job_id=s.jobs.get(kind=kind).pk)
    s.jobs.filter(kind=Job.Kind.REPLAY).update(state=Job.State.RUNNING)
    static = set(s.checks.values_list("check_id", flat=True))
    assert static and not static & {"replay.offline_pass", "replay.byte_identical"}

    # The poll after the analysis ended brings the sections out of band, and goes on.
    poll = _poll(client, s, seen)
    assert poll.status_code == 200
    body = poll.content.decode()
    assert re.search(r'id="evidence-top"[^>]*hx-swap-oob="true"', body)
    assert re.search(r'id="submission-header"[^>]*hx-swap-oob="true"', body)
    for cid in static:
        assert f'id="check-{cid}"' in body, cid
    assert "Recordings <small>1</small>" in body and "0123456789abcdef" in body
    assert "Sandboxed replay still running</span>: the checks it writes come" in body
    assert "No checks have run yet." not in body and 'hx-trigger="every 2s"' in body
    # The next poll, sent with the states it now shows, carries the panel alone.
    again = _poll(client, s, _seen(body))
    assert again.status_code == 200 and b"evidence-top" not in again.content

    # A reload shows the same: what the analysis wrote, from the database.
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Recordings <small>1</small>" in page and "Sandboxed replay still running" in page
    assert all(f'id="check-{cid}"' in page for cid in static)

    # The replay ends: its checks arrive and polling stops.
    replay = s.jobs.get(kind=Job.Kind.REPLAY)
    CheckResult.objects.create(
        submission=s, check_id="replay.offline_pass", status="pass", summary="exit 0", job=replay
    )
    s.jobs.filter(pk=replay.pk).update(state=Job.State.PASSED)
    done = _poll(client, s, _seen(body))
    assert done.status_code == 286
    assert 'id="check-replay.offline_pass"' in done.content.decode()
    assert "still running" not in done.content.decode()


def test_checks_of_a_job_that_runs_again_are_marked_as_the_previous_run(
    client, reviewer, assignment
) -> None:
    s = _submission(reviewer, assignment)
    old = s.jobs.get(kind=Job.Kind.INTAKE)
    CheckResult.objects.create(
        submission=s, check_id="cassettes.fresh", status="pass", summary="fresh", job=old
    )
    Job.objects.create(submission=s, kind=Job.Kind.INTAKE)  # queued again
    page = _page(client, reviewer, s)
    row = page[page.index('id="check-cassettes.fresh"') :]
    assert "from the previous run" in row[: row.index("</tr>")]
    assert "Intake queued</span>" in page


@pytest.mark.sandbox
def test_the_demo_flawed_ticket_service_page_shows_its_answers(client, lead) -> None:
    """The real probe, in the sandbox: the page shows what the service answered."""
    from reviewer.ops.demo import DEMO_DIR
    from submissions.assignments import load_assignment_file
    from tests.conftest import ingest_inline

    values = load_assignment_file(DEMO_DIR / "assignments" / "ticket-service.yaml")
    values["replay_command"] = ""
    s, checks = ingest_inline(DEMO_DIR / "repos" / "ticket-service-flawed", values)
    assert checks["service.starts"].status == "pass"
    page = _page(client, lead, s)
    section = page[page.index('id="probe-transcript"') :]
    section = section[: section.index("</section>")]
    sent = 2 * len(PROBE_LINES)
    assert f"{sent} requests" in section
    assert section.count('<code class="request-line">POST /extract</code>') == sent
    assert 'status-fail">500</span>' in section  # it answers 500 without its model
    assert "answered 500 with the model unavailable" in section
    # The ledger's long evidence (a retry storm) is folded after five items.
    n = len(checks["ledger.consistent"].evidence)
    row = page[page.index('id="check-ledger.consistent"') :]
    assert n > 5 and f"5 of {n} · show all" in row[: row.index("</tr>")]


_ITEMS = [
    {"path": "cassettes/a.yaml", "line": 3, "message": "key <b>differs</b>"},
    {"path": "cassettes/b.yaml", "message": "no line"},
    {"message": "no path"},
    {"path": "x.json", "line": 0, "message": ""},
    {"path": "y.json", "recorded_in": {"commit": "abc&1", "short": "abc"}, "message": "m"},
    {"path": "y.json", "changed_in": {"commit": "def", "short": "def"}},
    {"path": "z.json", "other": {"submission": 7, "path": "o.json"}, "message": "copied"},
    {"canonical": "GET /x", "recomputed_key": "k1"},
    {"stored_key": "<k>"},
    {},
    "a plain <string> item",
    "",
]


@pytest.mark.django_db
def test_an_evidence_item_renders_as_the_plain_dict_did():
    """The view hands the template its items as _Item (a lacking key reads as "" without
    the engine's slow failed lookup): every kind of item renders byte for byte as before."""
    from django.template.loader import render_to_string

    from reviewer.views.submission import _Item

    base = {"submission": mock.Mock(pk=5), "file_url": "/submissions/5/file/", "cohort_others": {}}
    for item in _ITEMS:
        plain = render_to_string("reviewer/submission.html#evidence-item", {**base, "e": item})
        wrapped = _Item(item) if isinstance(item, dict) else item
        shown = render_to_string("reviewer/submission.html#evidence-item", {**base, "e": wrapped})
        assert shown == plain, item
    assert "&lt;b&gt;differs" in render_to_string(
        "reviewer/submission.html#evidence-item", {**base, "e": _Item(_ITEMS[0])}
    )
