"""What the hiring lead reads of each review on a submission: the overall recommendation and
the scores that contradict their linked checks, on the page and in `manage.py report`."""

from __future__ import annotations

import html
import io
import json

import pytest
from django.core.management import call_command

from reviewer.models import Review, RubricTemplate, Score
from submissions.models import CheckResult
from tests.conftest import stored_unqueued


@pytest.fixture
def scored(reviewer, reviewer2, assignment, candidate):
    s = stored_unqueued({"README.md": "x"}, candidate=candidate, assignment=assignment)
    rubric = RubricTemplate.objects.get(slug="cassette")
    rows = list(rubric.rows.all())
    linked = next(r for r in rows if len(r.check_ids) >= 1)
    for who, value, recommendation in ((reviewer, 3, "strong_yes"), (reviewer2, 0, "")):
        review = Review.objects.create(
            submission=s,
            reviewer=who,
            rubric=rubric,
            state="submitted",
            recommendation=recommendation,
        )
        Score.objects.bulk_create([Score(review=review, row=row, value=value) for row in rows])
    return s, linked


def _reviews_table(body: str) -> str:
    start = body.index('class="grid reviews-table"')
    return body[start : body.index("</table>", start)]


def test_the_lead_reads_each_recommendation_and_each_contradiction(client, lead, scored) -> None:
    submission, row = scored
    failing = row.check_ids[0]
    CheckResult.objects.create(submission=submission, check_id=failing, status="fail")
    client.force_login(lead)
    table = html.unescape(
        _reviews_table(client.get(submission.get_absolute_url()).content.decode())
    )
    alice, bob = table.split("<tr>")[2:4]
    assert '<td class="rec">Strong yes</td>' in alice
    assert '<td class="rec">—</td>' in bob  # none given
    assert f"⚠ contradicts its checks ({failing})" in alice
    assert "contradicts its checks" not in bob  # a 0 beside a failed check agrees with it


def test_a_low_score_beside_all_passed_checks_is_marked_only_once_they_all_ran(
    client, lead, scored
) -> None:
    submission, row = scored
    client.force_login(lead)
    for cid in row.check_ids[:-1]:
        CheckResult.objects.create(submission=submission, check_id=cid, status="pass")
    if len(row.check_ids) > 1:
        page = client.get(submission.get_absolute_url()).content.decode()
        assert "contradicts its checks" not in _reviews_table(page)  # one has not run
    CheckResult.objects.create(submission=submission, check_id=row.check_ids[-1], status="skip")
    page = client.get(submission.get_absolute_url()).content.decode()
    assert "contradicts its checks" not in _reviews_table(page)  # a skip observed nothing
    CheckResult.objects.filter(check_id=row.check_ids[-1]).update(status="pass")
    table = html.unescape(
        _reviews_table(client.get(submission.get_absolute_url()).content.decode())
    )
    bob = table.split("<tr>")[3]
    assert f"⚠ contradicts its checks ({', '.join(row.check_ids)})" in bob


def test_the_report_json_holds_the_recommendation_and_the_contradictions(scored) -> None:
    submission, row = scored
    failing = row.check_ids[0]
    CheckResult.objects.create(submission=submission, check_id=failing, status="fail")
    out = io.StringIO()
    call_command("report", str(submission.pk), "--format", "json", stdout=out)
    reviews = {r["reviewer"]: r for r in json.loads(out.getvalue())["scores"]["reviews"]}
    assert reviews["alice"]["recommendation"] == "strong_yes"
    assert reviews["bob"]["recommendation"] is None
    assert reviews["alice"]["contradicts_checks"] == {
        row.title: {"value": 3, "checks": [failing], "failed": True}
    }
    assert reviews["bob"]["contradicts_checks"] == {}


@pytest.mark.django_db
def test_a_lead_scoring_a_hand_in_sees_only_their_own_score_on_the_assignment_page(
    reviewer, lead, assignment, candidate
) -> None:
    from reviewer.cohort.comparison import assignment_rows
    from reviewer.review.rubrics import rubric_for
    from submissions.models import Submission

    submission = Submission.objects.create(
        candidate=candidate, assignment=assignment, archive="a.zip", archive_sha256="1" * 64
    )
    rubric = rubric_for(assignment)
    rows = list(rubric.rows.all())
    for who, state, value in ((reviewer, "submitted", 3), (lead, "draft", 0)):
        review = Review.objects.create(
            submission=submission, reviewer=who, rubric=rubric, state=state
        )
        Score.objects.bulk_create(Score(review=review, row=r, value=value) for r in rows)
    [row] = assignment_rows(lead, assignment, [submission])
    assert row["score"] == 0.0  # the lead's own draft alone: the reviewer's 3s stay hidden
    Review.objects.filter(reviewer=lead).delete()
    [row] = assignment_rows(lead, assignment, [submission])
    assert row["score"] == 100.0  # a lead who is not scoring sees the reviews
