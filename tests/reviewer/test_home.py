"""The home page: a reviewer's queue per assignment, the hiring lead's cohorts, the demo's
tour; each count as the database holds it."""

from __future__ import annotations

import io
import re
from unittest import mock

from django.core.management import call_command
from django.urls import reverse

from reviewer.models import Review
from reviewer.review.rubrics import rubric_for
from reviewer.review.worklist import assignment_queues
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, Submission
from tests.conftest import make_zip


def _handins(assignment, uploader, names: list[str]) -> list[Submission]:
    out = []
    for i, name in enumerate(names):
        out.append(
            submission_create(
                upload=io.BytesIO(make_zip({"README.md": f"{name} {i}"})),
                filename="r.zip",
                candidate=Candidate.objects.get_or_create(name=name)[0],
                assignment=assignment,
                uploaded_by=uploader,
            ).submission
        )
    return out


def _review(submission, who, state: str) -> Review:
    return Review.objects.create(
        submission=submission, reviewer=who, rubric=rubric_for(submission.assignment), state=state
    )


def _cells(html: str, slug: str) -> dict[str, str]:
    """The labelled cells of the home table's line of one assignment."""
    line = next(r for r in html.split("<tr") if f"/assignments/{slug}/" in r)
    return dict(re.findall(r'<td data-label="([^"]+)">(.*?)</td>', line, re.S))


def test_a_reviewers_queue_counts_equal_the_database(
    client, reviewer, reviewer2, assignment
) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        done, draft, first, _second, _extra = _handins(
            assignment, reviewer, ["Ada", "Bo", "Cy", "Di", "Ada"]
        )
    _review(done, reviewer, Review.State.SUBMITTED)
    _review(draft, reviewer, Review.State.DRAFT)
    _review(first, reviewer2, Review.State.SUBMITTED)  # another's review: still theirs to do
    (line,) = [q for q in assignment_queues(reviewer) if q.assignment == assignment]
    visible = Submission.objects.visible_to(reviewer).filter(assignment=assignment)
    mine = Review.objects.filter(reviewer=reviewer, submission__in=visible)
    assert line.total == visible.count() == 5
    assert line.submitted == mine.filter(state="submitted").count() == 1
    assert line.drafts == mine.filter(state="draft").count() == 1
    assert line.left == visible.exclude(reviews__reviewer=reviewer).count() == 3
    assert line.reviewed == visible.filter(reviews__state="submitted").distinct().count() == 2
    # The next unscored is the queue's first hand-in they have not started.
    assert line.next_unscored == first.pk and line.next_draft == draft.pk

    client.force_login(reviewer)
    html = client.get(reverse("home")).content.decode()
    assert "My queue" in html
    cells = _cells(html, assignment.slug)
    assert (cells["Left to score"], cells["Drafts"], cells["Submitted"]) == ("3", "1", "1 of 5")
    assert f'href="/submissions/{first.pk}/">Start the next unscored' in cells["Next"]
    assert "broker" in html  # the queue's health, for those who run it


def test_a_reviewer_with_every_review_submitted_is_told_so(client, reviewer, assignment) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        (only,) = _handins(assignment, reviewer, ["Ada"])
    _review(only, reviewer, Review.State.SUBMITTED)
    client.force_login(reviewer)
    cells = _cells(client.get(reverse("home")).content.decode(), assignment.slug)
    assert cells["Left to score"] == "0" and "all submitted" in cells["Next"]


def test_the_leads_home_shows_each_cohort_and_how_far_its_reviews_are(
    client, reviewer, lead, assignment
) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        a, b, c = _handins(assignment, reviewer, ["Ada", "Bo", "Cy"])
    _review(a, reviewer, Review.State.SUBMITTED)
    _review(b, reviewer, Review.State.DRAFT)
    client.force_login(lead)
    html = client.get(reverse("home")).content.decode()
    assert "<h1>Cohorts</h1>" in html and "My queue" not in html
    cells = _cells(html, assignment.slug)
    assert cells["Hand-ins"] == "3"
    # Ada's review is in (ready), Bo's is a draft and Cy has none (in review).
    assert (cells["Flagged"], cells["Ready to decide"], cells["In review"]) == ("0", "1", "2")
    assert reverse("comparison", args=[assignment.slug]) in cells["Decide"]
    assert reverse("similarity", args=[assignment.slug]) in cells["Decide"]
    # Every hand-in reviewed: the cohort needs a decision.
    Review.objects.filter(submission=b).update(state=Review.State.SUBMITTED)
    _review(c, reviewer, Review.State.SUBMITTED)
    cells = _cells(client.get(reverse("home")).content.decode(), assignment.slug)
    assert (cells["Ready to decide"], cells["In review"]) == ("3", "0")


def test_the_demo_home_is_a_tour_without_queue_counts_or_ops_badges(client, db, settings) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    html = client.get(reverse("home")).content.decode()
    start = html[html.index('class="card start-here"') : html.index("</section>")]
    flawed = Submission.objects.get(candidate__name="Tomasz Wielgosz")
    assert f'href="{flawed.get_absolute_url()}"' in start
    assert 'href="/assignments/cassette-triage/compare/"' in start
    assert 'href="/assignments/cassette-triage/report.html" download' in start
    for ops_or_queue in ("broker", "worker seen", "Left to score", "Waiting for checks"):
        assert ops_or_queue not in html
