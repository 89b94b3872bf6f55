"""The reviewer's scoring desk: one-hand scoring, live counts, one note form, the queue's
end, and the hiring lead who is not anchored."""

from __future__ import annotations

import io
import re
from unittest import mock

import pytest
from django.urls import reverse

from reviewer.models import Note, Review, Score
from reviewer.review.rubrics import rubric_for
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, CheckResult, Job
from tests.conftest import make_zip


def _hand_in(assignment, uploader, name: str):
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(make_zip({"README.md": name})),
            filename=f"{name}.zip",
            candidate=Candidate.objects.create(name=name),
            assignment=assignment,
            uploaded_by=uploader,
        ).submission


@pytest.fixture
def subs(reviewer, reviewer2, assignment):
    out = [_hand_in(assignment, reviewer, name) for name in ("Ada", "Bea")]
    for s in out:
        s.reviewers.add(reviewer2)
    # Analysis done (no replay command here): the verdict speaks of the rubric.
    Job.objects.filter(submission__in=out).update(state=Job.State.PASSED)
    return out


def _rows(submission):
    return list(rubric_for(submission.assignment).rows.all())


def _score(client, submission, row, value, *, version=0, override=""):
    prefix = f"row{row.pk}"
    data = {
        f"{prefix}-value": str(value),
        f"{prefix}-evidence": "",
        f"{prefix}-override_reason": override,
        f"{prefix}-version": str(version),
    }
    return client.post(
        reverse("score_update", args=[submission.pk, row.pk]), data, HTTP_HX_REQUEST="true"
    )


def _recommend(client, submission, value="yes"):
    return client.post(
        reverse("review_recommend", args=[submission.pk]),
        {"recommendation": value},
        HTTP_HX_REQUEST="true",
    )


def _oob(html: str, element_id: str) -> str:
    """The out-of-band element with this id in an htmx answer (its text, tags stripped)."""
    opening = re.search(
        rf'<(\w+)[^>]*\bid="{re.escape(element_id)}"[^>]*hx-swap-oob="true"[^>]*>', html
    )
    assert opening, f"no out-of-band #{element_id} in the answer"
    tag, depth, end = opening.group(1), 1, opening.end()
    for found in re.finditer(rf"<(/?){tag}\b[^>]*>", html[end:]):
        depth += -1 if found.group(1) else 1
        if depth == 0:
            inner = html[end : end + found.start()]
            return " ".join(re.sub(r"<[^>]+>", " ", inner).split())
    raise AssertionError(f"#{element_id} is not closed")


def _left_in_db(reviewer, submission) -> int:
    review = Review.objects.filter(submission=submission, reviewer=reviewer).first()
    scored = review.scores.exclude(value=None).count() if review else 0
    return len(_rows(submission)) - scored


def test_after_every_save_the_desk_counts_equal_the_database(client, reviewer, subs) -> None:
    """The verdict's rows left, the queue's hand-ins left, the phone bar and the submit
    hint, as sent with each save, are what the database holds (they used to stay at the
    page load's counts: "4 rows of 5 left" after every row was saved)."""
    client.force_login(reviewer)
    submission = subs[0]
    rows = _rows(submission)
    total = len(rows)
    client.get(submission.get_absolute_url())
    for row in rows:
        html = _score(client, submission, row, 1).content.decode()
        left = _left_in_db(reviewer, submission)
        verdict = _oob(html, "verdict")
        if left:
            assert f"{left} row{'s' if left > 1 else ''} of {total} left" in verdict
            assert f"Rubric · {left} to score" in _oob(html, "to-rubric")
            assert f"{left} of {total} rows still to score" in _oob(html, "review-submit")
        else:
            assert "Every row is scored: choose your overall recommendation" in verdict
            assert "recommendation to choose" in _oob(html, "to-rubric")
        assert "2 left to score" in _oob(html, "queue-nav")
    html = _recommend(client, submission).content.decode()
    assert Review.objects.get(reviewer=reviewer, submission=submission).recommendation == "yes"
    assert "Every row is scored: submit your review." in _oob(html, "verdict")
    assert "ready to submit" in _oob(html, "to-rubric")
    # A note saved through the one note form brings the same counts.
    html = client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{rows[0].pk}", "body": "looked at the replay log"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "Every row is scored: submit your review." in _oob(html, "verdict")
    # Submitted: the queue counts one fewer, on the page one lands on.
    page = client.post(reverse("review_submit", args=[submission.pk]))
    landed = client.get(page.url).content.decode()
    assert "1 left to score" in landed


def test_after_a_job_ends_the_rubric_chips_and_counts_follow_the_database(
    client, reviewer, subs
) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    rows = _rows(submission)
    _score(client, submission, rows[1], 2)
    page = client.get(submission.get_absolute_url()).content.decode()
    first_check = rows[0].check_ids[0]
    chips = re.search(rf'id="chips-{rows[0].pk}".*?</span>\s*</div>', page, re.S).group(0)
    assert f"{first_check}" in chips and "flaw found" not in chips  # not run yet
    # The jobs end: the check fails, the poll's last answer carries the chips.
    CheckResult.objects.create(
        submission=submission, check_id=first_check, status="fail", summary="exit 2"
    )
    Job.objects.filter(submission=submission).update(state=Job.State.PASSED)
    answer = client.get(
        submission.get_absolute_url(), {"panel": "jobs"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"{first_check}: flaw found" in _oob(answer, f"chips-{rows[0].pk}")
    for row in rows:
        _oob(answer, f"chips-{row.pk}")  # every row's chips, not only the changed one
    left = _left_in_db(reviewer, submission)
    assert f"Rubric · {left} to score" in _oob(answer, "to-rubric")
    assert f"{left} of {len(rows)} rows still to score" in _oob(answer, "review-submit")
    assert f"{left} rows of {len(rows)} left" in _oob(answer, "verdict")


def test_each_row_is_a_zero_to_three_control_with_its_anchors(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    rows = _rows(submission)
    _score(client, submission, rows[0], 2)
    page = client.get(submission.get_absolute_url()).content.decode()
    form = page[page.index(f'<form id="row-{rows[0].pk}"') :]
    form = form[: form.index("</form>")]
    radios = re.findall(r'<input type="radio" name="row\d+-value" value="(\d)"', form)
    assert radios == ["0", "1", "2", "3"]
    assert re.search(r'value="2" data-anchor="[^"]+" checked', form)
    assert rows[0].anchors[2] in form  # the chosen level's meaning, shown
    assert "<select" not in form  # no small native select any more
    assert '<noscript><button type="submit">Save</button></noscript>' in form
    # Folded: nothing typed on this row, so its details are closed.
    assert '<details class="row-more">' in form


def test_the_override_field_is_there_only_where_a_three_needs_it(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    rows = _rows(submission)
    for cid in rows[1].check_ids:
        CheckResult.objects.create(submission=submission, check_id=cid, status="pass", summary="")
    page = client.get(submission.get_absolute_url()).content.decode()

    def form(row) -> str:
        part = page[page.index(f'<form id="row-{row.pk}"') :]
        return part[: part.index("</form>")]

    assert 'data-checks-ok="0"' in form(rows[0]) and 'class="override"' in form(rows[0])
    assert 'data-checks-ok="1"' in form(rows[1]) and 'class="override"' not in form(rows[1])
    # The server still refuses the unearned 3, and says why inline, the field open.
    refused = _score(client, submission, rows[0], 3).content.decode()
    assert "a 3 needs every linked check to pass" in refused
    assert '<details class="row-more" open>' in refused


def test_submitting_needs_a_recommendation(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    for row in _rows(submission):
        _score(client, submission, row, 1)
    response = client.post(reverse("review_submit", args=[submission.pk]))
    assert response.url.endswith("?submit=refused#rubric")
    page = client.get(response.url.split("#")[0]).content.decode()
    assert "Not submitted: choose your overall recommendation first" in page
    assert Review.objects.get(submission=submission, reviewer=reviewer).state == "draft"
    assert _recommend(client, submission, "maybe").status_code == 400


def test_submit_opens_the_next_to_score_and_the_queue_ends_in_a_done_state(
    client, reviewer, subs
) -> None:
    client.force_login(reviewer)
    a, b = subs
    for s in (a, b):
        for row in _rows(s):
            _score(client, s, row, 1)
        _recommend(client, s, "no")
    response = client.post(reverse("review_submit", args=[a.pk]))
    assert response.status_code == 302 and response.url == b.get_absolute_url()
    # With htmx, the same, as a client redirect.
    response = client.post(reverse("review_submit", args=[b.pk]), HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == f"{b.get_absolute_url()}#queue-done"
    page = client.get(b.get_absolute_url()).content.decode()
    done = page[page.index('id="queue-done"') :]
    assert "all 2 hand-ins of this assignment are scored" in done
    assert f'href="{b.assignment.get_absolute_url()}"' in done
    assert 'rel="next"' not in page  # no dead "next →" at the end


def test_a_leads_first_view_renders_no_scoring_form(client, reviewer, lead, subs) -> None:
    submission = subs[0]
    client.force_login(reviewer)
    for row in _rows(submission):
        _score(client, submission, row, 2)
    client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{_rows(submission)[0].pk}", "body": "alice-note-xyz"},
    )
    client.force_login(lead)
    page = client.get(submission.get_absolute_url()).content.decode()
    rubric = page[page.index('id="rubric"') :]
    assert 'type="radio"' not in rubric and 'name="row' not in rubric
    assert "/scores/" not in rubric and "review/recommendation" not in rubric
    assert "Score this hand-in yourself" in rubric
    assert "You are not scoring this hand-in" in page  # the verdict's next step too
    assert "alice-note-xyz" in page  # a lead who does not score reads the others
    assert not Review.objects.filter(submission=submission, reviewer=lead).exists()
    # The lead chooses to score: a draft, the form, and the others hidden until submitted.
    response = client.post(reverse("review_start", args=[submission.pk]))
    assert response.status_code == 302
    assert Review.objects.get(submission=submission, reviewer=lead).state == "draft"
    page = client.get(submission.get_absolute_url()).content.decode()
    assert "/scores/" in page and 'type="radio"' in page
    assert "alice-note-xyz" not in page and ">alice<" not in page
    for row in _rows(submission):
        _score(client, submission, row, 1)
    _recommend(client, submission, "strong_no")
    client.post(reverse("review_submit", args=[submission.pk]))
    page = client.get(submission.get_absolute_url()).content.decode()
    assert "alice-note-xyz" in page and ">alice<" in page


def test_one_note_form_for_rows_and_evidence_without_a_reload(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    rows = _rows(submission)
    CheckResult.objects.create(
        submission=submission, check_id="cassettes.keys_match", status="fail", summary="x"
    )
    page = client.get(submission.get_absolute_url()).content.decode()
    form = page[page.index('id="pin-form"') :]
    form = form[: form.index("</form>")]
    # The rows are places a note can go, beside the evidence, in the one form.
    assert f'<option value="row:{rows[0].pk}">row: {rows[0].title}</option>' in form
    assert '<option value="check:cassettes.keys_match">' in form
    assert 'hx-post="/submissions/' in page[page.index('id="pin-form"') - 200 :]
    answer = client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{rows[0].pk}", "body": "**flaky** <script>x</script>"},
        HTTP_HX_REQUEST="true",
    )
    html = answer.content.decode()
    assert answer.status_code == 200 and "<html" not in html
    note = _oob(html, f"row-note-{rows[0].pk}")
    assert "flaky" in note and "<script>x" not in html
    assert Note.objects.get(row=rows[0], author=reviewer).body == "**flaky** <script>x</script>"
    # Again on the same row: its one note is replaced, not a second one added.
    client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{rows[0].pk}", "body": "steady"},
        HTTP_HX_REQUEST="true",
    )
    assert list(Note.objects.filter(row=rows[0]).values_list("body", flat=True)) == ["steady"]
    # Opened on a row without JS (?pin=row:<id>), the form holds that row's note to edit.
    page = client.get(submission.get_absolute_url(), {"pin": f"row:{rows[0].pk}"}).content
    assert b">steady</textarea>" in page
    # Pinned to evidence: a note there, the evidence sections refreshed out of band.
    html = client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": "check:cassettes.keys_match", "body": "hand-edited key"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert Note.objects.get(anchor="check:cassettes.keys_match").body == "hand-edited key"
    assert "hand-edited key" in _oob(html, "evidence-top")
    assert "hand-edited key" in _oob(html, "pin-list")
    # Empty text on a row removes its note; on the evidence it is refused.
    client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{rows[0].pk}", "body": ""},
        HTTP_HX_REQUEST="true",
    )
    assert not Note.objects.filter(row=rows[0]).exists()
    refused = client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": "check:cassettes.keys_match", "body": " "},
        HTTP_HX_REQUEST="true",
    )
    assert refused.status_code == 400 and b"Note not pinned" in refused.content


def test_a_score_save_no_longer_drops_a_row_note(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    row = _rows(submission)[0]
    client.post(
        reverse("note_pin", args=[submission.pk]),
        {"anchor": f"row:{row.pk}", "body": "keep me"},
        HTTP_HX_REQUEST="true",
    )
    _score(client, submission, row, 1)
    assert Note.objects.get(row=row).body == "keep me"
    assert Score.objects.get(row=row).value == 1


def test_without_javascript_the_recommendation_saves_and_comes_back(client, reviewer, subs) -> None:
    client.force_login(reviewer)
    submission = subs[0]
    response = client.post(
        reverse("review_recommend", args=[submission.pk]), {"recommendation": "strong_yes"}
    )
    assert response.status_code == 302 and response.url.endswith("#recommendation")
    page = client.get(response.url).content.decode()
    assert "Saved: the overall recommendation" in page
    assert re.search(r'name="recommendation" value="strong_yes" checked', page)
    review = Review.objects.get(submission=submission, reviewer=reviewer)
    assert review.recommendation == "strong_yes"
    # Audited like a score: who, when, old -> new.
    event = review.scoreevent_set.get(kind="recommend")
    assert (event.old, event.new) == ({"recommendation": ""}, {"recommendation": "strong_yes"})
