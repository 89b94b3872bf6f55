"""The live spot check as a job: asked for on the submission page, run by the job engine
against real loopback model servers (OpenAI-compatible and Anthropic messages), its tries
shown as a per-turn diff with drift tiers; caps held by two concurrent runs."""

from __future__ import annotations

import io
import json
import logging
import threading
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from django.test import Client
from django.urls import reverse

from cassettes_app.checks.catalog import LIVE_SPOT_CHECK
from cassettes_app.checks.drift import drift
from submissions.assignments import assignment_values
from submissions.checks.spot_check import (
    SpotAsk,
    SpotCheckRefused,
    cassettes_live_spot_check,
    spot_check_create,
    spot_check_run,
)
from submissions.jobs import queue
from submissions.jobs.engine import job_execute
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Job, SpotCheck, SpotSpend
from tests.conftest import ingest_inline
from tests.stubs import anthropic_model, chat_model
from tests.stubs.anthropic_model import AnthropicModel
from tests.stubs.chat_model import ChatModel, use_as_team_endpoint

KEY = "sk-ant-spot-test-0123456789abcdefSECRETKEY"
ORDER = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Place the order"}]}
TRIAGE = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "It crashed"}]}
A_ORDER = {
    "model": "claude-3-5-haiku-20241022",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Place the order"}],
}
A_TRIAGE = {**A_ORDER, "messages": [{"role": "user", "content": "The disk is full"}]}


def _cassette(request: dict, response: dict, n: int) -> str:
    return json.dumps(
        {
            "key": f"{n:016x}",
            "request": request,
            "response": response,
            "recorded_at": "2025-01-01T00:00:00Z",
            "model": request["model"],
        }
    )


def _handin(*pairs: tuple[dict, dict], slug: str = "spot", candidate: str = "Ada", **extra):
    repo = {f"cassettes/{n}.json": _cassette(*pair, n) for n, pair in enumerate(pairs)}
    values = assignment_values(
        {"slug": slug, "title": "Spot", "replay_command": "",
         "recordings": ["cassettes/*.json"], **extra}
    )  # fmt: skip
    return ingest_inline(repo, values, candidate=candidate)[0]


def _configure(settings, monkeypatch, url: str, api: str, **caps: int) -> None:
    use_as_team_endpoint(settings, monkeypatch, url, key_env="SPOT_JOB_KEY", key=KEY, api=api,
                         **caps)  # fmt: skip


@pytest.fixture
def openai(settings, monkeypatch):
    served = ChatModel()
    _configure(settings, monkeypatch, served.url, "openai-chat", month_calls=20, check_calls=6)
    yield served
    served.close()


@pytest.fixture
def anthropic(settings, monkeypatch):
    served = AnthropicModel()
    _configure(settings, monkeypatch, served.url, "anthropic-messages", month_calls=20)
    yield served
    served.close()


def _run_queued(submission) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        jobs_run_inline(submission=submission)


# --- drift tiers ------------------------------------------------------------------------


def test_drift_tiers_added_info_removed_and_type_warn_values_listed() -> None:
    recorded = {"id": "a", "a": 1, "b": "x", "c": [1], "content": '{"intent": "bug", "n": 1}'}
    live = {"id": "b", "a": "1", "c": [1, 2], "d": True, "content": '{"intent": "feature", "n": 1}'}
    items, more = drift(recorded, live, graded_names=["intent"])
    found = {d.field: (d.change, d.tier, d.graded) for d in items}
    assert found == {
        "a": ("type", "warn", False),
        "b": ("removed", "warn", False),
        "c[1]": ("added", "info", False),
        "d": ("added", "info", False),
        "content.intent": ("value", "value", True),  # JSON inside a string, a graded key
    }
    assert more == 0  # `id` is issued afresh each call: never drift


def test_drift_calls_out_tool_calls_and_caps_the_list() -> None:
    items, _ = drift({"tool_calls": [{"x": 1}]}, {"tool_calls": [{"x": 2}]})
    assert [(d.field, d.graded) for d in items] == [("tool_calls[0].x", True)]
    items, more = drift({str(n): n for n in range(300)}, {str(n): -n - 1 for n in range(300)})
    assert len(items) == 200 and more == 100


# --- the Anthropic-messages endpoint ----------------------------------------------------


@pytest.mark.django_db
def test_an_anthropic_recording_reproduces_with_the_key_in_x_api_key(anthropic) -> None:
    submission = _handin((A_ORDER, anthropic_model.answer(A_ORDER)))
    outcome = cassettes_live_spot_check(submission=submission)
    assert outcome.status == "pass", outcome.summary
    assert anthropic.seen == [KEY] and anthropic.paths == ["/v1/messages"]
    assert SpotSpend.objects.get().tokens == 20  # 12 in + 8 out, from the answer's usage


@pytest.mark.django_db
def test_a_hand_edited_anthropic_tool_input_is_reproduced_by_no_try(anthropic) -> None:
    edited = anthropic_model.answer(A_ORDER)
    edited["content"][0]["input"]["qty"] = 9  # the candidate "fixed" the recording by hand
    outcome = cassettes_live_spot_check(submission=_handin((A_ORDER, edited)))
    assert outcome.status == "warn" and "reproduced by no try" in outcome.summary
    assert "tool_calls[0].arguments.qty" in outcome.summary
    assert len(anthropic.seen) == 3


@pytest.mark.django_db
def test_the_anthropic_switch_changes_an_answer_and_the_check_sees_it(anthropic) -> None:
    submission = _handin((A_ORDER, anthropic_model.answer(A_ORDER)))
    anthropic.qty = 4  # the live model now answers otherwise
    assert cassettes_live_spot_check(submission=submission).status == "warn"
    anthropic.qty, anthropic.text = 1, "It is a bug."
    text_only = _handin((A_TRIAGE, anthropic_model.answer(A_TRIAGE)), candidate="Bo")
    outcome = cassettes_live_spot_check(submission=text_only)
    assert outcome.status == "pass" and "text drifts" in outcome.summary


# --- the job and its page ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_reviewer_starts_a_spot_check_job_and_reads_its_drift(openai, reviewer) -> None:
    edited = chat_model.answer(ORDER)
    edited["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"sku": "A-1", "qty": 7}'
    )
    submission = _handin((ORDER, edited), (TRIAGE, chat_model.answer(TRIAGE)))
    submission.reviewers.add(reviewer)
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    page = client.get(reverse("submission", args=[submission.pk]))
    assert b"Live spot check" in page.content and b"cassettes/0.json" in page.content
    token = page.cookies["csrftoken"].value
    url = reverse("spot_check_start", args=[submission.pk])
    assert (
        client.post(url, {"endpoint": "team", "recordings": ["cassettes/0.json"]}).status_code
        == 403
    )
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        response = client.post(
            url,
            {"endpoint": "team", "recordings": ["cassettes/0.json"], "csrfmiddlewaretoken": token},
        )
    spot = SpotCheck.objects.get()
    assert response.status_code == 302 and response["Location"] == spot.get_absolute_url()
    assert spot.job.kind == Job.Kind.SPOT_CHECK and spot.status == "queued"
    assert openai.seen == []  # nothing is spent by the request itself
    running = client.get(spot.get_absolute_url())
    assert b'hx-get="' in running.content and b"panel=spot" in running.content
    _run_queued(submission)
    spot.refresh_from_db()
    assert spot.check_status == "warn" and spot.calls == 3 and len(openai.seen) == 3
    done = client.get(spot.get_absolute_url()).content.decode()
    assert "tool_calls[0].function.arguments.qty" in done  # the drift row, marked graded
    assert 'class="graded"' in done and "value changed" in done
    assert "first divergence" in done  # the per-turn diff of recorded against live
    assert submission.checks.get(check_id=LIVE_SPOT_CHECK).status == "warn"
    poll = client.get(spot.get_absolute_url() + "?panel=spot", HTTP_HX_REQUEST="true")
    assert poll.headers.get("HX-Refresh") == "true"  # ended: the page reloads once, then stops


@pytest.mark.django_db
def test_gets_never_write_and_outsiders_cannot_start_one(openai, reviewer, reviewer2) -> None:
    submission = _handin((ORDER, chat_model.answer(ORDER)))
    submission.reviewers.add(reviewer)
    client = Client()
    url = reverse("spot_check_start", args=[submission.pk])
    client.force_login(reviewer)
    assert client.get(url).status_code == 405
    client.force_login(reviewer2)  # a reviewer not assigned to this hand-in
    assert client.post(url, {"endpoint": "team", "sample": 1}).status_code == 404
    nobody = User.objects.create_user("dave", password="pw-dave-123")
    submission.reviewers.add(nobody)  # assigned, but in no role that may spend
    client.force_login(nobody)
    assert client.post(url, {"endpoint": "team", "sample": 1}).status_code == 404
    assert b"Run spot check" not in client.get(reverse("submission", args=[submission.pk])).content
    assert SpotCheck.objects.count() == 0 and Job.objects.filter(kind="spot_check").count() == 0


@pytest.mark.django_db
def test_sample_three_is_seeded_shown_and_reproducible(openai) -> None:
    pairs = [
        ({**TRIAGE, "messages": [{"role": "user", "content": f"case {n}"}]}, None) for n in range(6)
    ]
    submission = _handin(*[(req, chat_model.answer(req)) for req, _ in pairs])
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        first = spot_check_create(
            submission=submission, requested_by=None, endpoint="team", sample=3, seed=42
        )
        _run_queued(submission)
        second = spot_check_create(
            submission=submission, requested_by=None, endpoint="team", sample=3, seed=42
        )
        _run_queued(submission)
    first.refresh_from_db()
    second.refresh_from_db()
    paths = [r["path"] for r in first.results]
    assert len(paths) == 3 and paths == [r["path"] for r in second.results]
    assert first.seed == 42 and first.check_status == "pass"


@pytest.mark.django_db
def test_k_repeats_make_every_try_and_keep_each(openai) -> None:
    submission = _handin((ORDER, chat_model.answer(ORDER)))
    spot = SpotCheck.objects.create(submission=submission, endpoint="team", paths=[], sample=1)
    ask = SpotAsk(endpoint="team", sample=1, repeats=4)
    outcome = spot_check_run(submission=submission, ask=ask, spot=spot)
    spot.refresh_from_db()
    assert outcome.status == "pass" and len(openai.seen) == 4
    assert [t["try"] for t in spot.results[0]["tries"]] == [1, 2, 3, 4]
    assert all(t["reproduced"] for t in spot.results[0]["tries"])


@pytest.mark.django_db
def test_a_second_spot_check_waits_for_the_first_and_bad_asks_are_refused(openai) -> None:
    submission = _handin((ORDER, chat_model.answer(ORDER)))
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        spot_check_create(submission=submission, requested_by=None, endpoint="team", sample=1)
        with pytest.raises(SpotCheckRefused, match="already queued"):
            spot_check_create(submission=submission, requested_by=None, endpoint="team", sample=1)
    for bad, match in (
        ({"endpoint": "nope", "sample": 1}, "no endpoint named"),
        ({"endpoint": "team", "paths": ["../x.json"]}, "not a recording"),
        ({"endpoint": "team", "sample": 1, "repeats": 7}, "repeats must be 1 to 6"),
    ):
        with pytest.raises(SpotCheckRefused, match=match):
            spot_check_create(submission=submission, requested_by=None, **bad)


@pytest.mark.django_db
def test_the_key_is_on_no_spot_page_row_log_or_report(anthropic, lead, caplog) -> None:
    anthropic.reject = True  # its error body quotes the key
    submission = _handin((A_ORDER, anthropic_model.answer(A_ORDER)))
    with caplog.at_level(logging.DEBUG), mock.patch.object(queue, "job_enqueue", return_value=True):
        spot = spot_check_create(
            submission=submission, requested_by=lead, endpoint="team", sample=1
        )
        _run_queued(submission)
    spot.refresh_from_db()
    assert spot.check_status == "error" and "HTTP 401" in spot.summary
    assert "[key removed]" in json.dumps(spot.results)
    client = Client()
    client.force_login(lead)
    pages = [
        client.get(spot.get_absolute_url()).content.decode(),
        client.get(reverse("submission", args=[submission.pk])).content.decode(),
    ]
    dump, report = io.StringIO(), io.StringIO()
    call_command("dumpdata", stdout=dump)
    call_command("report", str(submission.pk), "--format", "json", stdout=report)
    for text in (*pages, dump.getvalue(), report.getvalue(), caplog.text):
        assert KEY not in text


# --- caps under concurrency -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_spot_checks_never_pass_the_month_cap(settings, monkeypatch) -> None:
    served = ChatModel()
    try:
        # Each run wants 4 calls (K=4); the assignment's month allows 5 in all.
        _configure(settings, monkeypatch, served.url, "openai-chat", month_calls=5, check_calls=4)
        one = _handin((ORDER, chat_model.answer(ORDER)), slug="race", candidate="One")
        two = _handin((ORDER, chat_model.answer(ORDER)), slug="race", candidate="Two")
        with mock.patch.object(queue, "job_enqueue", return_value=True):
            spots = [
                spot_check_create(
                    submission=s, requested_by=None, endpoint="team", sample=1, repeats=4
                )
                for s in (one, two)
            ]
        start = threading.Barrier(2)
        states: list[str | None] = []

        def worker(job_id: int) -> None:
            try:
                start.wait()
                states.append(job_execute(job_id=job_id))
            finally:
                connections.close_all()

        threads = [threading.Thread(target=worker, args=(s.job_id,)) for s in spots]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(states) == 2
        calls = sum(SpotSpend.objects.values_list("calls", flat=True))
        assert calls == 5 and len(served.seen) == 5  # exactly the cap, never past it
        made = sorted(len(s.results[0]["tries"]) for s in SpotCheck.objects.all())
        assert made == [1, 4] or made == [2, 3]  # whoever queued second got what was left
        assert any("cap month_calls" in s.summary for s in SpotCheck.objects.all())
    finally:
        served.close()


@pytest.mark.django_db
def test_the_record_pass_button_queues_one_job_for_who_may_spend(openai, reviewer) -> None:
    submission = _handin((ORDER, chat_model.answer(ORDER)), record_command="make record")
    submission.reviewers.add(reviewer)
    client = Client()
    client.force_login(reviewer)
    diff = client.get(reverse("turn_diff", args=[submission.pk])).content.decode()
    assert "Run the record pass" in diff
    url = reverse("record_pass_start", args=[submission.pk])
    assert client.get(url).status_code == 405
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        client.post(url)
        client.post(url)  # a second click while the first is queued
    jobs = Job.objects.filter(submission=submission, kind=Job.Kind.RECORD)
    assert [j.params for j in jobs] == [{"endpoint": "team"}]
    nobody = User.objects.create_user("erin", password="pw-erin-123")
    submission.reviewers.add(nobody)
    client.force_login(nobody)
    assert client.post(url).status_code == 404
    assert (
        "Run the record pass"
        not in client.get(reverse("turn_diff", args=[submission.pk])).content.decode()
    )


@pytest.mark.django_db
def test_candidate_text_on_the_spot_check_page_is_escaped(openai, lead) -> None:
    hostile = chat_model.answer(TRIAGE, text='<script>alert(1)</script><img src=x onerror="x()">')
    submission = _handin((TRIAGE, hostile))
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        spot = spot_check_create(
            submission=submission, requested_by=lead, endpoint="team", sample=1
        )
        _run_queued(submission)
    client = Client()
    client.force_login(lead)
    page = client.get(spot.get_absolute_url()).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "value changed" in page
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "hx-disable" in page


@pytest.mark.django_db
def test_a_recording_the_check_cap_left_untried_is_skipped_not_held_against(
    settings, monkeypatch
) -> None:
    served = ChatModel()
    try:
        _configure(settings, monkeypatch, served.url, "openai-chat", check_calls=1)
        submission = _handin((ORDER, chat_model.answer(ORDER)), (TRIAGE, chat_model.answer(TRIAGE)))
        ask = SpotAsk(endpoint="team", sample=2)
        outcome = spot_check_run(submission=submission, ask=ask)
        assert len(served.seen) == 1
        assert outcome.status == "pass"  # what was asked reproduced; the other was not asked
        assert "1 pass, 1 skip" in outcome.summary and "cap check_calls" in str(outcome.evidence)
    finally:
        served.close()


def test_a_null_field_the_live_answer_omits_is_no_drift() -> None:
    recorded = {"logprobs": None, "refusal": None, "kept": 1, "gone": "x"}
    items, _ = drift(recorded, {"kept": 1, "new": None})
    assert [(d.field, d.change) for d in items] == [("gone", "removed")]


def test_the_assignment_page_shows_the_months_spend_against_the_caps(openai, lead) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from submissions.models import SpotSpend

    submission = _handin((ORDER, chat_model.answer(ORDER)), (TRIAGE, chat_model.answer(TRIAGE)))
    client = Client()
    client.force_login(lead)
    url = reverse("assignment", args=[submission.assignment.slug])
    before = client.get(url).content.decode()
    assert "this month&#x27;s spend" in before or "this month's spend" in before
    assert "<td>0 of 20</td>" in before  # configured, nothing spent yet
    SpotSpend.objects.create(assignment=submission.assignment, submission=submission,
                             endpoint="team", calls=3, tokens=45)  # fmt: skip
    SpotSpend.objects.create(assignment=submission.assignment, endpoint="team", calls=17,
                             tokens=5, at=timezone.now() - timedelta(days=40))  # fmt: skip
    SpotSpend.objects.create(assignment=submission.assignment, endpoint="gone", calls=1)
    page = client.get(url).content.decode()
    section = page[
        page.index('id="spot-spend"') : page.index("</section>", page.index('id="spot-spend"'))
    ]
    assert "<td>3 of 20</td>" in section  # last month's 17 calls are not this month's
    assert "no longer configured" in section and "<code>gone</code>" in section
    assert f'href="/submissions/{submission.pk}/"' in section
    assert KEY not in page
    SpotSpend.objects.create(assignment=submission.assignment, endpoint="team", calls=17)
    assert "cap spent" in client.get(url).content.decode()


def test_the_admin_lists_the_ledger_read_only(admin_client, openai) -> None:
    from submissions.models import SpotSpend

    submission = _handin((ORDER, chat_model.answer(ORDER)))
    row = SpotSpend.objects.create(assignment=submission.assignment, endpoint="team", calls=2)
    listing = admin_client.get(reverse("admin:submissions_spotspend_changelist"))
    assert listing.status_code == 200 and b"team" in listing.content
    assert admin_client.get(reverse("admin:submissions_spotspend_add")).status_code == 403
    change = reverse("admin:submissions_spotspend_change", args=[row.pk])
    assert admin_client.post(change, {"calls": 0}).status_code == 403
    row.refresh_from_db()
    assert row.calls == 2
