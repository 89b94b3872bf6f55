"""Rubric scoring: autosave, the rule for a 3, conflicts, blind reviews, submission."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from reviewer.models import Review, Score
from reviewer.review.scoring import review_get_or_create
from submissions.models import CheckResult
from tests.conftest import stored_unqueued


@pytest.fixture
def submission(reviewer, reviewer2, assignment, candidate):
    s = stored_unqueued(
        {"README.md": "x"}, candidate=candidate, assignment=assignment, uploaded_by=reviewer
    )
    s.reviewers.add(reviewer2)
    return s


def _rows(client, submission):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=client.user_name)
    client.get(submission.get_absolute_url())  # shows the rubric; writes nothing
    assert not Review.objects.filter(submission=submission, reviewer=user).exists()
    # The review the first save would start (what a POST does).
    review = review_get_or_create(submission=submission, reviewer=user)
    return review, list(review.rubric.rows.all())


def _post(
    client, submission, row, *, value, version, evidence="", override="", htmx=True, tab="",
    seq=None,
):  # fmt: skip
    prefix = f"row{row.pk}"
    data = {
        f"{prefix}-value": "" if value is None else str(value),
        f"{prefix}-evidence": evidence,
        f"{prefix}-override_reason": override,
        f"{prefix}-version": str(version),
        f"{prefix}-tab": tab,
        f"{prefix}-seq": "" if seq is None else str(seq),
    }
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(reverse("score_update", args=[submission.pk, row.pk]), data, **extra)


def _recommend(client, submission, value="yes", htmx=True):
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(
        reverse("review_recommend", args=[submission.pk]), {"recommendation": value}, **extra
    )


@pytest.fixture
def alice(client, reviewer):
    client.force_login(reviewer)
    client.user_name = "alice"
    return client


def test_autosave_returns_the_row_fragment_and_keeps_the_score(alice, submission) -> None:
    review, rows = _rows(alice, submission)
    response = _post(alice, submission, rows[1], value=2, version=0, evidence="keys recomputed")
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert f'id="row-{rows[1].pk}"'.encode() in response.content
    assert b"saved at" in response.content
    score = Score.objects.get(review=review, row=rows[1])
    assert (score.value, score.evidence, score.version) == (2, "keys recomputed", 1)
    page = alice.get(submission.get_absolute_url())
    assert b"keys recomputed" in page.content


def test_a_three_needs_passing_checks_or_an_override(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    row = rows[0]  # "Replays offline": replay.offline_pass, replay.no_network_attempts
    refused = _post(alice, submission, row, value=3, version=0)
    assert refused.status_code == 400
    assert b"a 3 needs every linked check to pass" in refused.content
    assert b"replay.offline_pass: not run" in refused.content
    assert not Score.objects.filter(row=row, value=3).exists()
    ok = _post(alice, submission, row, value=3, version=0, override="ran it by hand: exit 0")
    assert ok.status_code == 200
    assert Score.objects.get(row=row).override_reason == "ran it by hand: exit 0"


def test_a_three_is_allowed_when_linked_checks_passed(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    row = rows[0]
    for cid in row.check_ids:
        CheckResult.objects.create(submission=submission, check_id=cid, status="pass", summary="ok")
    assert _post(alice, submission, row, value=3, version=0).status_code == 200


def test_a_stale_save_is_a_conflict_showing_both_values(alice, submission) -> None:
    review, rows = _rows(alice, submission)
    row = rows[2]
    assert (
        _post(alice, submission, row, value=1, version=0, evidence="first tab").status_code == 200
    )
    stale = _post(alice, submission, row, value=2, version=0, evidence="second tab")
    assert stale.status_code == 409
    assert b"first tab" in stale.content and b"second tab" in stale.content
    score = Score.objects.get(review=review, row=row)
    assert (score.value, score.evidence) == (1, "first tab")  # never silently overwritten


def test_without_javascript_a_save_redirects_back_with_a_message(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    response = _post(alice, submission, rows[1], value=1, version=0, htmx=False)
    assert response.status_code == 302
    page = alice.get(response.url)
    assert b"Saved: " in page.content


def test_blind_scoring_until_one_submits_and_leads_see_all(
    client, reviewer, reviewer2, lead, submission
) -> None:
    client.force_login(reviewer)
    client.user_name = "alice"
    _, rows = _rows(client, submission)
    for row in rows:
        _post(client, submission, row, value=2, version=0, evidence=f"alice-{row.pk}")
    client.force_login(reviewer2)
    page = client.get(submission.get_absolute_url())
    assert f"alice-{rows[0].pk}".encode() not in page.content
    assert b"once you submit your own review" in page.content
    client.force_login(lead)
    assert b">alice<" in client.get(submission.get_absolute_url()).content
    # Bob scores and submits: now he sees Alice's review.
    client.force_login(reviewer2)
    client.user_name = "bob"
    bob_review, bob_rows = _rows(client, submission)
    for row in bob_rows:
        _post(client, submission, row, value=1, version=0)
    _recommend(client, submission, "no")
    client.post(reverse("review_submit", args=[submission.pk]))
    bob_review.refresh_from_db()
    assert bob_review.state == "submitted"
    page = client.get(submission.get_absolute_url())
    assert b">alice<" in page.content


def test_submitting_needs_every_row_scored(alice, submission) -> None:
    review, rows = _rows(alice, submission)
    _post(alice, submission, rows[0], value=1, version=0)
    response = alice.post(reverse("review_submit", args=[submission.pk]))
    review.refresh_from_db()
    assert review.state == "draft"
    assert b"score every row" in alice.get(response.url).content


def test_another_reviewers_submission_cannot_be_scored(client, reviewer, lead, assignment) -> None:
    from submissions.models import Candidate

    other = Candidate.objects.create(name="Other")
    s = stored_unqueued({"a": "b"}, candidate=other, assignment=assignment, uploaded_by=lead)
    client.force_login(reviewer)
    from reviewer.models import RubricRow

    row = RubricRow.objects.filter(template__slug="cassette").first()
    response = client.post(reverse("score_update", args=[s.pk, row.pk]), {})
    assert response.status_code == 404


def test_report_includes_scores_and_weighted_total(alice, submission, capsys) -> None:
    _, rows = _rows(alice, submission)
    for row in rows:
        _post(alice, submission, row, value=3, version=0, override="checked by hand")
    call_command("report", str(submission.pk))
    report = json.loads(capsys.readouterr().out)
    review = report["scores"]["reviews"][0]
    assert review["reviewer"] == "alice"
    assert review["total"] == 100.0
    assert set(review["rows"]) == {row.title for row in rows}


def test_notes_are_markdown_rendered_sanitised_and_blind(
    client, reviewer, reviewer2, lead, submission
) -> None:
    client.force_login(reviewer)
    client.user_name = "alice"
    _, rows = _rows(client, submission)
    prefix = f"row{rows[0].pk}"
    client.post(
        reverse("score_update", args=[submission.pk, rows[0].pk]),
        {
            f"{prefix}-value": "1",
            f"{prefix}-evidence": "",
            f"{prefix}-override_reason": "",
            f"{prefix}-version": "0",
            f"{prefix}-notes": "**flaky** [x](javascript:alert(1)) <script>alert(2)</script>",
        },
        HTTP_HX_REQUEST="true",
    )
    client.force_login(lead)
    page = client.get(submission.get_absolute_url()).content.decode()
    assert "<strong>flaky</strong>" in page
    assert 'javascript:alert(1)"' not in page and "<script>alert(2)" not in page
    client.force_login(reviewer2)
    assert (
        "<strong>flaky</strong>" not in client.get(submission.get_absolute_url()).content.decode()
    )


def test_evidence_can_be_picked_from_linked_checks(alice, submission) -> None:
    CheckResult.objects.create(
        submission=submission, check_id="replay.offline_pass", status="fail", summary="exit 2"
    )
    page = alice.get(submission.get_absolute_url()).content.decode()
    assert '<option value="replay.offline_pass (fail): exit 2">' in page


def test_opening_a_submission_writes_nothing(client, reviewer, lead, submission) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for user in (reviewer, lead):
        client.force_login(user)
        with CaptureQueriesContext(connection) as queries:
            page = client.get(submission.get_absolute_url())
            client.get(submission.get_absolute_url(), {"panel": "jobs"}, HTTP_HX_REQUEST="true")
        assert page.status_code == 200
        writes = [
            q["sql"]
            for q in queries.captured_queries
            if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
            and "django_session" not in q["sql"]
            and "cassette_review_cache" not in q["sql"]  # the health line's cache
        ]
        assert writes == []
    assert not Review.objects.filter(submission=submission).exists()


def test_an_override_reason_typed_before_the_three_is_kept(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    row = rows[0]
    typed = _post(alice, submission, row, value=None, version=0, override="ran it by hand")
    assert typed.status_code == 200
    assert Score.objects.get(row=row).override_reason == "ran it by hand"
    three = _post(alice, submission, row, value=3, version=1, override="ran it by hand")
    assert three.status_code == 200 and Score.objects.get(row=row).value == 3


def test_a_refused_submit_says_why_in_the_rubric_and_writes_nothing(alice, submission) -> None:
    review, rows = _rows(alice, submission)
    _post(alice, submission, rows[0], value=1, version=0)
    response = alice.post(reverse("review_submit", args=[submission.pk]))
    assert response.status_code == 302 and response.url.endswith("?submit=refused#rubric")
    page = alice.get(response.url.split("#")[0]).content.decode()
    rubric = page[page.index('id="rubric"') :]
    assert "Not submitted: score every row first. Still to score:" in rubric
    assert rows[1].title in rubric[rubric.index("Still to score") :]
    assert "Not submitted" not in page[: page.index('id="rubric"')]  # not at the top
    review.refresh_from_db()
    assert review.state == "draft"


def test_a_submitted_review_is_read_only_and_says_so(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    for row in rows:
        _post(alice, submission, row, value=2, version=0, evidence=f"e{row.pk}")
    _recommend(alice, submission)
    alice.post(reverse("review_submit", args=[submission.pk]))
    page = alice.get(submission.get_absolute_url()).content.decode()
    rubric = page[page.index('id="rubric"') :]
    assert "it is read-only now" in rubric
    # No score control is left to change (a note can still be pinned to the evidence).
    assert "/scores/" not in rubric and '<form id="row-' not in rubric
    assert 'name="row' not in rubric
    assert "once you submit your own review" not in rubric
    assert "No other reviewer has scored this submission yet." in rubric
    refused = _post(alice, submission, rows[0], value=1, version=1)
    assert refused.status_code == 400 and b"can no longer change" in refused.content


def test_two_quick_changes_in_one_page_keep_the_later_one(alice, submission) -> None:
    _, rows = _rows(alice, submission)
    row = rows[1]
    # Both sent from the same page before the first answer came back: same version.
    first = _post(alice, submission, row, value=0, version=0, tab="t1", seq=100)
    second = _post(alice, submission, row, value=1, version=0, tab="t1", seq=200)
    assert first.status_code == second.status_code == 200
    assert Score.objects.get(row=row).value == 1
    # The earlier change answered late never overwrites the later one.
    late = _post(alice, submission, row, value=0, version=1, tab="t1", seq=150)
    assert late.status_code == 200 and Score.objects.get(row=row).value == 1
    # Another page (tab) with an old version is still a conflict, nothing overwritten.
    other = _post(alice, submission, row, value=2, version=0, tab="t2", seq=300)
    assert other.status_code == 409 and Score.objects.get(row=row).value == 1


def test_every_change_is_kept_with_who_when_old_new_and_reason(alice, submission) -> None:
    from reviewer.models import ScoreEvent

    _, rows = _rows(alice, submission)
    for cid in rows[0].check_ids:
        CheckResult.objects.update_or_create(
            submission=submission, check_id=cid, defaults={"status": "fail", "summary": "x"}
        )
    row = rows[0]
    _post(alice, submission, row, value=1, version=0, evidence="first look")
    _post(alice, submission, row, value=3, version=1, evidence="first look",
          override="ran it by hand: exit 0")  # fmt: skip
    _post(
        alice,
        submission,
        row,
        value=3,
        version=2,
        evidence="first look",
        override="ran it by hand: exit 0",
    )  # fmt: skip
    # (the same values again: no change, no event)
    events = list(ScoreEvent.objects.filter(submission=submission, kind="score"))
    assert [(e.old["value"], e.new["value"]) for e in events] == [(None, 1), (1, 3)]
    assert events[1].reason == "ran it by hand: exit 0"
    assert {e.actor.username for e in events} == {"alice"} and all(e.at for e in events)
    page = alice.get(submission.get_absolute_url()).content.decode()
    history = page[page.index('id="history"') :]
    assert (
        "History: 2 changes" in history
        and "1 → 3" in history
        and "reason: ran it by hand" in history
    )
    out = io.StringIO()
    call_command("report", str(submission.pk), "--format", "json", stdout=out)
    audit = json.loads(out.getvalue())["scores"]["audit"]
    assert [(a["kind"], a["old"]["value"], a["new"]["value"]) for a in audit] == [
        ("score", None, 1), ("score", 1, 3)]  # fmt: skip
    assert audit[1]["who"] == "alice" and audit[1]["row"] == row.title


def test_others_history_is_blind_until_one_submits(client, reviewer, reviewer2, submission) -> None:
    client.force_login(reviewer)
    client.user_name = "alice"
    _, rows = _rows(client, submission)
    _post(client, submission, rows[0], value=2, version=0, evidence="alice saw it")
    client.force_login(reviewer2)
    page = client.get(submission.get_absolute_url()).content.decode()
    assert "alice saw it" not in page and 'id="history"' not in page


def test_a_draft_has_one_total_in_the_report_and_on_the_desk(reviewer, submission) -> None:
    """The report used to weigh only the rows a review had touched: a draft with one row at 2
    read 66.7 in the JSON while the desk, the comparison and the cohort read it over the whole
    rubric."""
    from reviewer.review.scoring import reviews_visible_to, score_save
    from reviewer.review.submission_report import report_build

    review = review_get_or_create(submission=submission, reviewer=reviewer)
    rows = list(review.rubric.rows.all())
    assert len(rows) > 1
    score_save(
        review=review, row=rows[0], value=2, evidence="", override_reason="", expected_version=0
    )
    desk = reviews_visible_to(reviewer, submission)[0].total
    weights = sum(r.weight for r in rows)
    assert desk == round(rows[0].weight * 2 / 3 * 100 / weights, 1)
    assert report_build(submission)["scores"]["reviews"][0]["total"] == desk


def test_a_skip_whose_precondition_did_not_hold_earns_no_three(alice, submission) -> None:
    """A skipped check observed nothing: a 3 on it needs an override reason, like an error."""
    _, rows = _rows(alice, submission)
    row = rows[0]
    first, *rest = row.check_ids
    CheckResult.objects.create(
        submission=submission, check_id=first, status="skip", summary="the suite did not run"
    )
    for cid in rest:
        CheckResult.objects.create(submission=submission, check_id=cid, status="pass", summary="")
    refused = _post(alice, submission, row, value=3, version=0)
    assert refused.status_code == 400
    assert f"{first}: skipped, so nothing was observed".encode() in refused.content
    assert not Score.objects.filter(row=row, value=3).exists()


def test_a_skip_of_a_check_the_assignment_turned_off_does_not_block_a_three(
    alice, submission
) -> None:
    _, rows = _rows(alice, submission)
    row = rows[0]
    first, *rest = row.check_ids
    assignment = submission.assignment
    assignment.check_rules = {first: {"applies": False, "reason": "we run it by hand"}}
    assignment.save()
    CheckResult.objects.create(
        submission=submission, check_id=first, status="skip", summary="does not apply"
    )
    for cid in rest:
        CheckResult.objects.create(submission=submission, check_id=cid, status="pass", summary="")
    assert _post(alice, submission, row, value=3, version=0).status_code == 200


def test_a_refused_score_reverts_in_the_control_and_keeps_the_typing(alice, submission) -> None:
    """Pressing 3 on a row whose checks did not pass explains the refusal and shows the
    stored score again (what a reload shows), with the typed evidence kept."""
    import re

    _, rows = _rows(alice, submission)
    row = rows[0]
    assert _post(alice, submission, row, value=1, version=0).status_code == 200
    refused = _post(alice, submission, row, value=3, version=1, evidence="ran make test")
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "Not saved, the row keeps 1" in html
    selected = re.findall(
        r'<input type="radio" name="row\d+-value" value="(\d)"[^>]*checked>', html
    )
    assert selected == ["1"]
    assert 'value="ran make test"' in html
    assert Score.objects.get(row=row).value == 1


@pytest.mark.django_db(transaction=True)
def test_quick_successive_saves_of_one_review_all_land_then_submit(reviewer, submission) -> None:
    # The desk sends each digit's save at once: five rows and the recommendation in
    # flight together. On PostgreSQL two saves that each inserted a score and then touched
    # the review deadlocked and one was lost (500); every writer now takes the review first.
    import threading

    from django.db import connection

    from reviewer.review.scoring import recommendation_save, review_submit, score_save

    review = review_get_or_create(submission=submission, reviewer=reviewer)
    rows = list(review.rubric.rows.all())
    errors: list[BaseException] = []

    def save(start, work) -> None:
        try:
            start.wait()
            work()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    calls = ["strong_no", "no", "yes", "strong_yes", "no"] * 2
    for version, call in enumerate(calls):  # rounds: a deadlock is a matter of timing
        works = [
            lambda row=row, v=version: score_save(
                review=review,
                row=row,
                value=v % 3,  # a 3 would need passing checks
                evidence="",
                override_reason="",
                expected_version=v,
            )
            for row in rows
        ]
        works.append(lambda c=call: recommendation_save(review=review, value=c))
        start = threading.Barrier(len(works))
        threads = [threading.Thread(target=save, args=(start, w)) for w in works]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
    last = (len(calls) - 1) % 3
    values = Score.objects.filter(review=review).values_list("value", flat=True)
    assert sorted(values) == [last] * len(rows)
    review.refresh_from_db()
    assert review.recommendation == "no"
    review_submit(review=review)
    assert Review.objects.get(pk=review.pk).state == "submitted"
