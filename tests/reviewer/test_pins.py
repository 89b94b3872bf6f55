"""Notes pinned to evidence: a check, a turn, a trace hop; shown there and in the rubric,
blind to other reviewers until they submit, refused for places the submission lacks."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviewer.models import Note, Review
from reviewer.review.rubrics import rubric_for
from submissions.models import CheckResult, Turn
from tests.conftest import stored_unqueued


@pytest.fixture
def submission(reviewer, reviewer2, assignment, candidate):
    s = stored_unqueued(
        {"README.md": "x"}, candidate=candidate, assignment=assignment, uploaded_by=reviewer
    )
    s.reviewers.add(reviewer2)
    CheckResult.objects.create(
        submission=s, check_id="cassettes.keys_match", status="fail", summary="2 keys differ"
    )
    Turn.objects.create(
        submission=s, thread=0, index=1,
        new_messages=[{"role": "user", "text": "refund please"}], response=None,
    )  # fmt: skip
    return s


def _pin(client, submission, anchor: str, body: str):
    return client.post(reverse("note_pin", args=[submission.pk]), {"anchor": anchor, "body": body})


def test_a_note_pinned_to_a_check_and_a_turn_shows_there_and_in_the_rubric(
    client, reviewer, submission
) -> None:
    client.force_login(reviewer)
    response = _pin(client, submission, "check:cassettes.keys_match", "key **drift** <script>")
    assert response.status_code == 302
    assert response.url.endswith("#check-cassettes.keys_match")
    _pin(client, submission, "turn:0.1", "refund handled by hand")
    page = client.get(submission.get_absolute_url()).content.decode()
    check_row = page[page.index('<tr id="check-cassettes.keys_match">') :]
    check_row = check_row[: check_row.index("</tr>")]
    assert "<strong>drift</strong>" in check_row and "<script>" not in page
    turn = page[page.index('id="turn-0.1"') :]
    assert "refund handled by hand" in turn[: turn.index("</li>")]
    rubric = page[page.index('id="rubric"') :]
    assert '<a href="#check-cassettes.keys_match">cassettes.keys_match</a>' in rubric
    assert '<a href="#turn-0.1">thread 0, turn 1</a>' in rubric


def test_the_pin_link_preselects_its_place_without_writing(client, reviewer, submission) -> None:
    client.force_login(reviewer)
    page = client.get(submission.get_absolute_url()).content.decode()
    assert 'href="?pin=check%3Acassettes.keys_match#pin-form"' in page
    chosen = client.get(submission.get_absolute_url(), {"pin": "turn:0.1"}).content.decode()
    assert '<option value="turn:0.1" selected>' in chosen
    assert not Note.objects.exists()


@pytest.mark.parametrize(
    ("anchor", "body"),
    [("check:replay.offline_pass", "x"), ("turn:9.9", "x"), ("hop:3", "x"),
     ("check:../../x", "x"), ("check:cassettes.keys_match", "   "),
     ("check:cassettes.keys_match", "y" * 5001),
     ("check:cassettes.keys_match", "a NUL \x00 no database keeps as text")],
)  # fmt: skip
def test_a_pin_to_nothing_or_without_text_is_refused(
    client, reviewer, submission, anchor, body
) -> None:
    client.force_login(reviewer)
    response = _pin(client, submission, anchor, body)
    assert response.status_code == 302
    assert not Note.objects.exists()
    page = client.get(response.url).content.decode()
    assert "Note not pinned:" in page


def test_pins_are_blind_until_the_other_reviewer_submits(
    client, reviewer, reviewer2, lead, submission
) -> None:
    client.force_login(reviewer)
    _pin(client, submission, "check:cassettes.keys_match", "alice thinks keys drift")
    client.force_login(reviewer2)
    assert "alice thinks" not in client.get(submission.get_absolute_url()).content.decode()
    client.force_login(lead)
    assert "alice thinks" in client.get(submission.get_absolute_url()).content.decode()
    Review.objects.create(
        submission=submission, reviewer=reviewer2, rubric=rubric_for(submission.assignment),
        state="submitted",
    )  # fmt: skip
    client.force_login(reviewer2)
    assert "alice thinks" in client.get(submission.get_absolute_url()).content.decode()


def test_a_finding_links_to_its_file_and_the_turn_it_became(client, reviewer, submission) -> None:
    from submissions.models import Finding, Recording

    rec = Recording.objects.create(submission=submission, path="cassettes/a.json", format="vcr")
    Turn.objects.filter(submission=submission).update(recording=rec)
    Finding.objects.create(
        submission=submission, kind="body_problem", severity="warn", path="cassettes/a.json",
        line=7, message="interaction 0 response: invalid JSON body",
    )  # fmt: skip
    client.force_login(reviewer)
    page = client.get(submission.get_absolute_url()).content.decode()
    findings = page[page.index('id="findings"') :]
    assert "?path=cassettes/a.json&amp;line=7#L7" in findings
    assert '<a href="#turn-0.1">its turn</a>' in findings


def test_the_pin_link_reuses_the_cached_evidence(client, reviewer, submission) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    submission.jobs.update(state="passed", finished_at=timezone.now())  # cached once ended
    client.force_login(reviewer)
    client.get(submission.get_absolute_url())  # warms the evidence cache
    with CaptureQueriesContext(connection) as plain:
        client.get(submission.get_absolute_url())
    with CaptureQueriesContext(connection) as pinning:
        client.get(submission.get_absolute_url(), {"pin": "check:cassettes.keys_match"})
    # ?pin= only preselects the form: the evidence comes from the cache, the same queries.
    assert len(pinning.captured_queries) == len(plain.captured_queries)
