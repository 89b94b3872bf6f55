"""cassettes.live_spot_check: a recording re-asked against a real loopback chat model."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.urls import reverse

from cassettes_app.checks.catalog import LIVE_SPOT_CHECK
from submissions.assignments import assignment_values
from submissions.checks.spot_check import TRIES, cassettes_live_spot_check
from submissions.models import SpotSpend
from submissions.net.endpoints import parse_endpoints
from tests.conftest import ingest_inline
from tests.stubs.chat_model import ChatModel, answer, use_as_team_endpoint

KEY = "sk-spot-test-0123456789abcdefSECRET"
ORDER = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Place the order"}]}
TRIAGE = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "It crashed"}]}


def _cassette(request: dict, response: dict) -> str:
    return json.dumps(
        {
            "key": "0" * 16,
            "request": request,
            "response": response,
            "recorded_at": "2025-01-01T00:00:00Z",
            "model": "gpt-4o-mini",
        }
    )


def _handin(*recordings: tuple[dict, dict]) -> object:
    repo = {f"cassettes/{n}.json": _cassette(*pair) for n, pair in enumerate(recordings)}
    values = assignment_values(
        {"slug": "spot", "title": "Spot", "replay_command": "", "recordings": ["cassettes/*.json"]}
    )
    return ingest_inline(repo, values, candidate="Ada")[0]


@pytest.fixture
def model(settings, monkeypatch):
    served = ChatModel()
    use_as_team_endpoint(settings, monkeypatch, served.url, key_env="SPOT_TEST_KEY", key=KEY,
                         month_calls=5)  # fmt: skip
    yield served
    served.close()


@pytest.mark.django_db
def test_a_faithful_recording_reproduces(model) -> None:
    submission = _handin((ORDER, answer(ORDER)))
    outcome = cassettes_live_spot_check(submission=submission)
    assert outcome.status == "pass", outcome.summary
    assert model.seen == [f"Bearer {KEY}"]  # one call, the key in its header
    spend = SpotSpend.objects.get()
    assert (spend.endpoint, spend.calls, spend.tokens) == ("team", 1, 15)
    assert submission.checks.get(check_id=LIVE_SPOT_CHECK).status == "pass"


@pytest.mark.django_db
def test_a_hand_edited_tool_argument_warns_naming_the_field_with_every_try(model) -> None:
    edited = answer(ORDER, qty=1)
    edited["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"sku": "A-1", "qty": 7}'
    )
    outcome = cassettes_live_spot_check(submission=_handin((ORDER, edited)))
    assert outcome.status == "warn"  # never a fail: the reviewer judges it from the tries
    assert "reproduced by no try (3 tries)" in outcome.summary
    assert "tool_calls[0].arguments.qty" in outcome.summary
    shown = [item["try"] for item in outcome.evidence if item.get("graded")]
    assert shown == [1, 2, 3]  # every try, each naming what departed
    assert len(model.seen) == TRIES
    assert SpotSpend.objects.count() == TRIES


@pytest.mark.django_db
def test_a_text_only_difference_passes_and_names_the_drift(model) -> None:
    submission = _handin((TRIAGE, answer(TRIAGE, text="bug")))
    model.text = "It is a bug."
    outcome = cassettes_live_spot_check(submission=submission)
    assert outcome.status == "pass"  # the graded fields reproduced; text drift is evidence
    assert "text drifts" in outcome.summary and "not graded" in outcome.summary
    assert len(model.seen) == 1  # the graded fields reproduced at the first try


@pytest.mark.django_db
def test_a_spent_month_cap_skips_the_check_naming_the_cap(model) -> None:
    submission = _handin((ORDER, answer(ORDER)))
    for _ in range(5):
        SpotSpend.objects.create(assignment=submission.assignment, endpoint="team", tokens=15)
    out = io.StringIO()
    call_command("spot_check", str(submission.pk), stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("skip: ")
    assert model.seen == []  # refused before any call
    result = submission.checks.get(check_id=LIVE_SPOT_CHECK)
    assert result.status == "skip" and "cap month_calls" in result.summary
    assert SpotSpend.objects.count() == 5


@pytest.mark.django_db
def test_without_an_endpoint_the_check_is_skipped_with_the_reason(settings) -> None:
    settings.SPOT_CHECK_ENDPOINTS = ()
    outcome = cassettes_live_spot_check(submission=_handin((ORDER, answer(ORDER))))
    assert outcome.status == "skip" and "SPOT_CHECK_ENDPOINTS" in outcome.summary


@pytest.mark.django_db
def test_the_key_is_nowhere_it_could_leak(model, client, lead, caplog) -> None:
    model.reject = True  # the endpoint's error body quotes the key
    submission = _handin((ORDER, answer(ORDER)))
    with caplog.at_level(logging.DEBUG):
        outcome = cassettes_live_spot_check(submission=submission)
    assert outcome.status == "error" and "HTTP 401" in outcome.summary
    model.reject = False
    cassettes_live_spot_check(submission=submission)
    dump, report = io.StringIO(), io.StringIO()
    call_command("dumpdata", stdout=dump)
    call_command("report", str(submission.pk), "--format", "json", stdout=report)
    client.force_login(lead)
    page = client.get(reverse("submission", args=[submission.pk])).content.decode()
    assert LIVE_SPOT_CHECK in report.getvalue() and LIVE_SPOT_CHECK in page
    for text in (
        dump.getvalue(),
        caplog.text,
        report.getvalue(),
        page,
        json.dumps(outcome.evidence),
    ):
        assert KEY not in text


def test_bad_endpoint_settings_name_the_field() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"SPOT_CHECK_ENDPOINTS\[0\]\.api"):
        parse_endpoints('[{"name": "a", "base_url": "https://x", "api": "chat", "key_env": "K"}]')
    with pytest.raises(ImproperlyConfigured, match=r"SPOT_CHECK_ENDPOINTS\[0\]\.key_env") as err:
        parse_endpoints(
            f'[{{"name": "a", "base_url": "https://x", "api": "openai-chat", "key_env": "{KEY}"}}]'
        )
    assert KEY not in str(err.value)
    with pytest.raises(ImproperlyConfigured, match=r"caps\.month_calls"):
        parse_endpoints('[{"name": "a", "base_url": "https://x", "api": "openai-chat", '
                        '"key_env": "K", "caps": {"month_calls": -1}}]')  # fmt: skip
    assert parse_endpoints("") == ()
