"""Scheduled spot checks of an assignment's reference hand-in, and the drift page shows."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from unittest import mock

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from submissions import tasks
from submissions.assignments import assignment_values
from submissions.checks.spot_schedule import reference_drift, spot_checks_schedule
from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import SpotCheck
from tests.conftest import ingest_inline
from tests.stubs import chat_model
from tests.stubs.chat_model import ChatModel, use_as_team_endpoint

KEY = "sk-schedule-test-0123456789abcdefSECRET"


def _ask(n: int) -> dict:
    content = "Place the order" if n == 0 else f"case {n}"
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}


@pytest.fixture
def model(settings, monkeypatch):
    served = ChatModel()
    use_as_team_endpoint(settings, monkeypatch, served.url, key_env="SCHEDULE_KEY", key=KEY,
                         check_calls=9)  # fmt: skip
    yield served
    served.close()


def _cassette(n: int) -> str:
    return json.dumps(
        {"key": f"{n:016x}", "request": _ask(n), "response": chat_model.answer(_ask(n)),
         "recorded_at": "2025-01-01T00:00:00Z", "model": "gpt-4o-mini"}
    )  # fmt: skip


def _reference():
    repo = {f"cassettes/{n}.json": _cassette(n) for n in range(3)}
    values = assignment_values(
        {"slug": "ref", "title": "Ref", "replay_command": "", "recordings": ["cassettes/*.json"]}
    )
    return ingest_inline(repo, values, candidate="Sample solution")[0]


def _run(submission) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        jobs_run_inline(submission=submission)


def test_the_beat_runs_the_reference_task_hourly() -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["spot-check-references"]
    assert entry["task"] == tasks.spot_check_references.name and entry["schedule"] == 3600.0


@pytest.mark.django_db
def test_a_due_reference_is_checked_once_per_period_and_its_drift_shown(model, client, lead):
    reference = _reference()
    out = io.StringIO()
    call_command("assignment_reference", "ref", str(reference.pk), "--every-days", "7", stdout=out)
    assignment = reference.assignment
    assignment.refresh_from_db()
    assert assignment.reference_submission_id == reference.pk
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        first = spot_checks_schedule()
        assert len(first) == 1 and first[0].scheduled and first[0].seed == reference.pk
        assert spot_checks_schedule() == []  # one is queued: not again
        _run(reference)
        assert spot_checks_schedule() == []  # done, but not due for 7 days
    assert reference_drift(assignment).previous is None
    model.qty = 3  # the live model now orders another quantity
    later = timezone.now() + timedelta(days=7, minutes=1)
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        second = spot_checks_schedule(now=later)
        _run(reference)
    assert len(second) == 1
    first_paths = [r["path"] for r in SpotCheck.objects.get(pk=first[0].pk).results]
    second_paths = [r["path"] for r in SpotCheck.objects.get(pk=second[0].pk).results]
    assert first_paths == second_paths and len(first_paths) == 3  # the same sample each time
    drift = reference_drift(assignment)
    assert drift.changed
    row = next(r for r in drift.rows if r["path"] == "cassettes/0.json")
    assert (row["was"], row["now"]) == ("pass", "warn")
    assert row["new"] == ["choices[0].message.tool_calls[0].function.arguments.qty (value)"]
    client.force_login(lead)
    page = client.get(reverse("assignment", args=["ref"])).content.decode()
    assert "New drift since the last check" in page and "arguments.qty (value)" in page
    assert KEY not in page


@pytest.mark.django_db
def test_without_an_endpoint_or_a_period_nothing_is_scheduled(settings) -> None:
    reference = _reference()
    call_command("assignment_reference", "ref", str(reference.pk), "--every-days", "0",
                 stdout=io.StringIO())  # fmt: skip
    settings.SPOT_CHECK_ENDPOINTS = ()
    assert spot_checks_schedule() == []
    assert SpotCheck.objects.count() == 0


# --- the reference named in the assignment file ----------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Sample solution", "reference"),
        ({"candidate": ""}, "reference.candidate"),
        ({"candidate": "x" * 201}, "reference.candidate"),
        ({"candidate": "S", "every_days": 400}, "reference.every_days"),
        ({"candidate": "S", "every_days": True}, "reference.every_days"),
        ({"candidate": "S", "submission": 3}, "reference"),
    ],
)
def test_a_bad_reference_in_the_assignment_file_names_its_key(raw, key) -> None:
    from submissions.assignments import AssignmentError

    base = {"slug": "ref", "title": "Ref", "replay_command": "", "reference": raw}
    with pytest.raises(AssignmentError, match=rf"^{key}:"):
        assignment_values(base)


@pytest.mark.django_db
def test_the_file_names_the_reference_by_candidate_and_the_page_shows_it(model, client, lead):
    from submissions.assignments import assignment_apply

    fields = {"slug": "ref", "title": "Ref", "replay_command": "",
              "recordings": ["cassettes/*.json"]}  # fmt: skip
    named = {**fields, "reference": {"candidate": "Sample solution", "every_days": 3}}
    assignment = assignment_apply(values=assignment_values(named))[0]
    client.force_login(lead)
    page = client.get(reverse("assignment", args=["ref"])).content.decode()
    assert "none yet: the assignment file names Sample solution" in page
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        assert spot_checks_schedule() == []  # nothing to check yet
    reference = _reference()  # the named candidate hands in
    assignment.refresh_from_db()
    assert (assignment.reference_candidate, assignment.spot_check_every_days) == (
        "Sample solution", 3,
    )  # fmt: skip
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        queued = spot_checks_schedule()
        _run(reference)
    assert [s.submission_id for s in queued] == [reference.pk]
    page = client.get(reverse("assignment", args=["ref"])).content.decode()
    assert (
        f"#{reference.pk} · Sample solution" in page and "as the assignment file names it" in page
    )
    assert "Last check" in page
    # Applying the file again without `reference:` keeps it; `reference: null` clears it.
    assignment_apply(values=assignment_values(fields))
    assignment.refresh_from_db()
    assert assignment.reference_candidate == "Sample solution"
    assignment_apply(values=assignment_values({**fields, "reference": None}))
    assignment.refresh_from_db()
    assert (assignment.reference_candidate, assignment.spot_check_every_days) == ("", 0)
    assert reference_drift(assignment) is None
