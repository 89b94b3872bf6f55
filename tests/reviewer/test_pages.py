"""Pages: login, access by role, upload with errors, and the polling job panel."""

from __future__ import annotations

import io
import re
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.jobs.engine import job_execute
from submissions.models import Submission
from tests.conftest import make_zip


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _submission_for(user, assignment, candidate, data: bytes | None = None) -> Submission:
    return submission_create(
        upload=io.BytesIO(data or make_zip({"README.md": f"{candidate.name}"})),
        filename="r.zip",
        candidate=candidate,
        assignment=assignment,
        uploaded_by=user,
    ).submission


@pytest.mark.parametrize("name", ["home", "assignment_new"])
def test_pages_require_login(client, db, name: str) -> None:
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_submission_page_requires_login(client, reviewer, assignment, candidate) -> None:
    s = _submission_for(reviewer, assignment, candidate)
    response = client.get(s.get_absolute_url())
    assert response.status_code == 302


def test_login_then_home_lists_assignments(client, reviewer, assignment) -> None:
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})
    assert response.status_code == 302
    page = client.get(reverse("home"))
    assert b"Cassette triage" in page.content


def test_reviewer_cannot_open_another_reviewers_submission(
    client, reviewer, reviewer2, assignment, candidate
) -> None:
    s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer2)
    assert client.get(s.get_absolute_url()).status_code == 404
    listing = client.get(assignment.get_absolute_url())
    assert candidate.name.encode() not in listing.content


def test_reviewer_sees_own_and_lead_sees_all(client, reviewer, lead, assignment, candidate) -> None:
    s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer)
    assert client.get(s.get_absolute_url()).status_code == 200
    client.force_login(lead)
    page = client.get(s.get_absolute_url())
    assert page.status_code == 200
    assert s.archive_sha256.encode() in page.content


def test_upload_creates_submission_and_redirects(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    archive = SimpleUploadedFile("sub.zip", make_zip({"README.md": "x"}), "application/zip")
    response = client.post(
        assignment.get_absolute_url(), {"candidate": "  Lin   Candidate ", "archive": archive}
    )
    s = Submission.objects.get()
    assert response.status_code == 302 and response.url == s.get_absolute_url()
    assert s.candidate.name == "Lin Candidate"
    assert s.uploaded_by == reviewer
    assert reviewer in s.reviewers.all()


def _refusal(html: str) -> str:
    """The refusal said at the top of the upload form."""
    form = html[html.index('id="upload-form"') :]
    assert form.index('role="alert"') < form.index('name="archive"')  # before the file field
    return form[form.index('role="alert"') : form.index("</div>")]


def test_upload_form_shows_the_rejection_reason(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    archive = SimpleUploadedFile("evil.zip", make_zip({"../x": "y"}, root=None))
    url = assignment.get_absolute_url()
    response = client.post(url, {"candidate": "Eve", "archive": archive})
    # Post/redirect/get: a reload of the page the refusal lands on sends no file again.
    assert response.status_code == 302 and response.url == f"{url}#upload-form"
    page = client.get(url).content.decode()
    said = _refusal(page)
    assert "Not accepted" in said and "The archive was rejected" in said and "../x" in said
    assert "<strong>Archive or git bundle:</strong>" in said
    assert 'value="Eve"' in page  # what was typed is kept; the file cannot be
    # Said once: the next view of the page is a clean form.
    assert "Not accepted" not in client.get(url).content.decode()


def test_upload_form_shows_field_errors(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    response = client.post(
        assignment.get_absolute_url(),
        {"candidate": "", "stub_url": "not a url"},
        follow=True,
    )
    assert response.redirect_chain and response.request["REQUEST_METHOD"] == "GET"
    said = _refusal(response.content.decode())
    assert "<strong>Candidate:</strong> This field is required" in said
    assert "<strong>Stub URL:</strong> Enter a valid URL" in said
    assert not Submission.objects.exists()


def test_upload_refuses_empty_file(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    archive = SimpleUploadedFile("empty.zip", b"")
    response = client.post(
        assignment.get_absolute_url(), {"candidate": "E", "archive": archive}, follow=True
    )
    assert "empty" in _refusal(response.content.decode())


def test_forms_name_their_fields_properly_not_as_django_derives_them(
    client, reviewer, assignment
) -> None:
    client.force_login(reviewer)
    upload = client.get(assignment.get_absolute_url()).content.decode()
    new = client.get(reverse("assignment_new")).content.decode()
    client.logout()
    login = client.get(reverse("login")).content.decode()
    assert ">Stub URL <span" in upload and ">Replay command <span" in new
    assert '<label for="id_username">Username</label>' in login
    for html in (upload, new, login):
        assert "Stub url" not in html and ":</label>" not in html


def test_job_panel_polls_while_running_then_stops(client, reviewer, assignment, candidate) -> None:
    s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer)
    fragment = client.get(s.get_absolute_url() + "?panel=jobs", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content
    assert b'id="job-panel"' in fragment.content
    assert b"hx-trigger" in fragment.content
    while job := s.jobs.filter(state="queued").first():  # intake, then the analysis it queues
        job_execute(job_id=job.pk)
    done = client.get(s.get_absolute_url() + "?panel=jobs", HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert b"hx-trigger" not in done.content
    assert b"Finished" in done.content and b"Passed" not in done.content


def test_candidate_strings_are_escaped(client, reviewer, assignment) -> None:
    from submissions.models import Candidate

    evil = Candidate.objects.create(name="<script>alert(1)</script>")
    s = _submission_for(reviewer, assignment, evil)
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url())
    assert b"<script>alert(1)</script>" not in page.content
    assert b"&lt;script&gt;" in page.content


def test_assignment_form_creates_from_preset(client, reviewer) -> None:
    client.force_login(reviewer)
    response = client.post(
        reverse("assignment_new"),
        {
            "slug": "rt-2026",
            "title": "Run twice 2026",
            "shape": "run-twice",
            "stale_after_days": 30,
        },
    )
    assert response.status_code == 302
    from submissions.models import Assignment

    a = Assignment.objects.get(slug="rt-2026")
    assert a.replay_command == "./run.sh replay" and a.stale_after_days == 30


def test_logout_is_post_only(client, reviewer) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("logout")).status_code == 405


def test_stale_banner_and_recording_badges(client, reviewer, assignment, candidate) -> None:
    import datetime as dt

    from submissions.models import CheckResult, Recording

    s = _submission_for(reviewer, assignment, candidate)
    assignment.expected_model = "gpt-4o-mini-2024-07-18"
    assignment.save()
    old = s.created - dt.timedelta(days=100)
    Recording.objects.create(
        submission=s,
        path="cassettes/old.json",
        format="cassette_json",
        recorded_at=old,
        model="gpt-4o-mini-2024-07-18",
        used=True,
    )
    Recording.objects.create(
        submission=s,
        path="cassettes/undated.yaml",
        format="vcr",
        model="gpt-4o-2024-05-13",
        used=False,
    )
    CheckResult.objects.create(
        submission=s,
        check_id="cassettes.no_secrets",
        status="fail",
        summary="1 credential",
        evidence=[{"path": "cassettes/undated.yaml", "message": "sk-p…(51 chars, #abcd1234)"}],
    )
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Recording warnings:" in page
    assert "1 recording older than 42 days" in page
    assert "1 recording of unknown age" in page
    assert "of another model than gpt-4o-mini-2024-07-18" in page
    assert "1 recording never read by the suite" in page
    assert 'status-fail">secret' in page and 'status-warn">stale' in page


def test_no_banner_for_fresh_recordings(client, reviewer, assignment, candidate) -> None:
    from submissions.models import Recording

    s = _submission_for(reviewer, assignment, candidate)
    Recording.objects.create(
        submission=s,
        path="c/new.json",
        format="cassette_json",
        recorded_at=s.created,
        model="m",
        used=True,
    )
    client.force_login(reviewer)
    assert b"Recording warnings" not in client.get(s.get_absolute_url()).content


def test_candidate_content_in_recordings_is_escaped(
    client, reviewer, assignment, candidate
) -> None:
    from submissions.models import Recording, Turn

    s = _submission_for(reviewer, assignment, candidate)
    rec = Recording.objects.create(
        submission=s,
        path='<img src=x onerror="alert(1)">.json',
        format="cassette_json",
        model="<script>alert(2)</script>",
    )
    Turn.objects.create(
        submission=s,
        thread=0,
        index=0,
        recording=rec,
        new_messages=[
            {
                "role": "user",
                "text": '<a href="javascript:alert(3)">click</a>',
                "tool_calls": [],
                "tool_results": [],
            }
        ],
    )
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "<script>alert(2)" not in page
    assert 'onerror="alert(1)"' not in page
    assert 'href="javascript:alert(3)"' not in page
    assert "&lt;script&gt;alert(2)" in page


def test_idempotency_probe_card_shows_requests_and_curl(
    client, reviewer, assignment, candidate
) -> None:
    from submissions.models import CheckResult

    s = _submission_for(reviewer, assignment, candidate)
    CheckResult.objects.create(
        submission=s,
        check_id="trace.idempotency_enforced",
        status="fail",
        summary="1 of 5 probes failed",
        evidence=[
            {
                "probe": "same key, different body",
                "expected": 409,
                "ok": False,
                "message": "same key, different body: expected 409, got 200",
                "request": {
                    "method": "POST",
                    "url": "http://stub/orders",
                    "headers": {"Idempotency-Key": "k1"},
                    "body": '{"sku": "<b>x</b>"}',
                },
                "response": {"status": 200, "body": '{"id": "ord_1"}'},
                "curl": "curl -sS -i -X POST http://stub/orders -H 'Idempotency-Key: k1'",
            }
        ],
    )
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "same key, different body" in page and "expected 409, got 200" in page
    assert "curl -sS -i -X POST http://stub/orders" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page


def test_long_lists_show_their_first_rows_with_a_count(reviewer, assignment, candidate) -> None:
    from submissions.models import Recording
    from submissions.selectors import _LIST_CAP, submission_context

    s = _submission_for(reviewer, assignment, candidate)
    Recording.objects.bulk_create(
        [Recording(submission=s, path=f"c/{i:04d}.json", format="vcr") for i in range(205)]
    )
    context = submission_context(s)
    assert len(context["recordings"]) == _LIST_CAP
    assert context["recording_count"] == 205
    assert not context["paged"]


def test_long_lists_paginate_each_by_its_own_parameter(rf, reviewer, assignment, candidate) -> None:
    from django.template.loader import render_to_string

    from reviewer.views.submission import evidence_html
    from submissions.models import Finding, Recording, TraceRow, Turn
    from submissions.selectors import PAGE_SIZE, submission_context

    s = _submission_for(reviewer, assignment, candidate)
    recs = Recording.objects.bulk_create(
        [Recording(submission=s, path=f"c/{i:04d}.json", format="vcr") for i in range(120)]
    )
    Turn.objects.bulk_create([Turn(submission=s, thread=0, index=i) for i in range(60)])
    TraceRow.objects.bulk_create(
        [TraceRow(submission=s, recording=recs[0], line=i) for i in range(10)]
    )
    Finding.objects.bulk_create(
        [Finding(submission=s, kind="k", path=f"f{i:02d}", message="m") for i in range(55)]
    )
    params = {"recordings": "3", "turns": "2", "findings": "2"}
    context = submission_context(s, params)
    assert [f.path for f in context["findings"]] == [f"f{i:02d}" for i in range(50, 55)]
    assert [r.path for r in context["recordings"]] == [f"c/{i:04d}.json" for i in range(100, 120)]
    assert [t.index for t in context["turns"]] == list(range(PAGE_SIZE, 60))
    assert len(context["trace_rows"]) == 10  # one page: no pager
    assert submission_context(s, {"recordings": "99"})["recordings_page"].number == 3
    request = rf.get(s.get_absolute_url(), params)
    request.user = reviewer
    context["evidence"] = evidence_html(request, context)
    page = render_to_string("reviewer/submission.html", context, request=request)
    # Page links keep the other lists' pages.
    assert "?recordings=2&amp;turns=2&amp;findings=2#recordings" in page and "page 3 of 3" in page
    assert "?recordings=3&amp;turns=1&amp;findings=2#conversations" in page
    assert "?recordings=3&amp;turns=2&amp;findings=1#findings" in page
    assert '<ol class="turns" start="51">' in page
    assert "Showing the first" not in page


def test_evidence_is_cached_once_jobs_end_and_rebuilt_when_a_job_runs(
    client, reviewer, assignment, candidate
) -> None:
    """What the jobs found is built once while none runs (queued or ended); a running job
    is never cached, and each change of a job's state builds anew."""
    from unittest import mock

    from reviewer.views import submission as views
    from submissions.models import Finding, Job

    with mock.patch("submissions.jobs.queue.job_enqueue", return_value=True):
        s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer)
    Finding.objects.create(submission=s, kind="first", path="a.json", message="one")
    real = views.evidence_context
    with mock.patch.object(views, "evidence_context", side_effect=real) as built:
        client.get(s.get_absolute_url())
        client.get(s.get_absolute_url())
        assert built.call_count == 1  # the intake job is only queued: it wrote nothing

        s.jobs.update(state=Job.State.RUNNING, attempts=1)
        Finding.objects.create(submission=s, kind="midway", path="m.json", message="mid")
        assert "midway" in client.get(s.get_absolute_url()).content.decode()
        client.get(s.get_absolute_url())
        assert built.call_count == 3  # running: built on every view

        s.jobs.update(state=Job.State.PASSED)
        first = client.get(s.get_absolute_url()).content.decode()
        again = client.get(s.get_absolute_url()).content.decode()
        assert built.call_count == 4  # built once, then read from the cache
        assert again.split("<main")[1].split('name="csrfmiddlewaretoken"')[0] in first
        assert "first" in again and "one" in again

        # A job that ran again wrote something new: the cache key moved with its state.
        Finding.objects.create(submission=s, kind="second", path="b.json", message="two")
        job = s.jobs.first()
        job.attempts += 1
        job.save()
        assert "second" in client.get(s.get_absolute_url()).content.decode()
        assert built.call_count == 5
        client.get(s.get_absolute_url(), {"findings": "1"})  # another page: its own entry
        assert built.call_count == 6


def test_the_assignment_page_says_what_it_checks_and_why_not(client, reviewer) -> None:
    from submissions.assignments import assignment_apply, assignment_values

    assignment, _ = assignment_apply(
        values=assignment_values(
            {
                "slug": "rt-rules",
                "title": "RT <rules>",
                "shape": "run-twice",
                "checks": {"cassettes.fresh": {"applies": False, "reason": "<b>hand-made</b>"}},
            }
        )
    )
    client.force_login(reviewer)
    page = client.get(f"/assignments/{assignment.slug}/").content.decode()
    rules = page[page.index('id="rules"') :]
    assert "What this assignment checks" in rules
    assert "run-twice fixtures hold one response text each" in rules
    assert "the run log (out/run.log) names the model" in rules
    assert "&lt;b&gt;hand-made&lt;/b&gt;" in rules and "<b>hand-made</b>" not in rules
    assert "(set by this assignment)" in rules


def test_when_the_jobs_end_the_poll_brings_the_sections_they_changed(
    client, reviewer, assignment, candidate
) -> None:
    s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "No checks have run yet." in page and 'hx-trigger="every 2s"' in page
    assert f'<a href="{s.get_absolute_url()}">refresh</a>' in page  # without JS, a link
    while job := s.jobs.filter(state="queued").first():
        job_execute(job_id=job.pk)
    done = client.get(s.get_absolute_url(), {"panel": "jobs"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    body = done.content.decode()
    # The panel, then every section a job writes, each swapped into place by its id.
    for section in ("submission-header", "verdict", "evidence-top", "evidence-bottom"):
        assert re.search(rf'id="{section}"[^>]*hx-swap-oob="true"', body), section
    assert "No checks have run yet." not in body and 'id="check-' in body
    assert "Received" not in body[body.index('id="submission-header"') :][:600]
    assert body.count('id="verdict"') == 1 and "<html" not in body


def test_code_locations_in_a_summary_link_to_the_line(client, reviewer, assignment) -> None:
    """'from triager/llm.py:24' opens the hand-in's file at line 24; a location the hand-in
    does not hold stays text, and the rest of the summary stays escaped."""
    from submissions.jobs.inline import jobs_run_inline
    from submissions.models import Candidate, CheckResult

    files = {"triager/llm.py": "\n".join(f"line {i}" for i in range(1, 30)), "README.md": "x"}
    s = _submission_for(reviewer, assignment, Candidate.objects.create(name="Lo"), make_zip(files))
    jobs_run_inline(submission=s)
    CheckResult.objects.create(
        submission=s,
        check_id="replay.no_network_attempts",
        status="fail",
        summary="1 resolve attempt from triager/llm.py:24 and gone.py:3 <script>x</script>",
    )
    client.force_login(reviewer)
    page = client.get(s.get_absolute_url()).content.decode()
    url = reverse("submission_file", args=[s.pk])
    assert f'<a href="{url}?path=triager/llm.py&amp;line=24#L24">triager/llm.py:24</a>' in page
    assert "gone.py:3 &lt;script&gt;" in page and "<script>x" not in page
    assert client.get(f"{url}?path=triager/llm.py&line=24").status_code == 200


def test_the_verdict_comes_before_the_folded_metadata_card(
    client, reviewer, assignment, candidate
) -> None:
    """What the checks found is read first; the archive's sha256, source and stub URL are
    one click away, folded on every screen."""
    s = _submission_for(reviewer, assignment, candidate)
    client.force_login(reviewer)
    html = client.get(s.get_absolute_url()).content.decode()
    verdict, header = html.index('id="verdict"'), html.index('id="submission-header"')
    assert verdict < header
    card = html[header : html.index("</details>", header)]
    assert '<details class="card meta">' in card  # closed: no `open`
    assert s.archive_sha256 in card and "Stub URL" in card
