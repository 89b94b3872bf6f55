"""The hiring lead's "cohorts that need a decision": each hand-in ready, in review or
flagged, per assignment, in queries that do not grow with the hand-ins."""

from __future__ import annotations

import io
from unittest import mock

from django.db import connection
from django.test.utils import CaptureQueriesContext

from reviewer.cohort.decisions import cohorts_needing_decision
from reviewer.models import Review, RubricTemplate, Score
from submissions.assignments import assignment_apply, assignment_values
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, CheckResult, Submission
from submissions.roles import is_hiring_lead
from tests.conftest import make_zip


def _hand_in(assignment, name: str, *, assigned=(), reviews=()) -> Submission:
    """reviews: (user, value for every row, state, recommendation)."""
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(make_zip({"name": name})),
            filename="c.zip",
            candidate=Candidate.objects.create(name=name),
            assignment=assignment,
        ).submission
    s.reviewers.add(*assigned)
    rubric = RubricTemplate.objects.get(slug="cassette")
    for user, value, state, recommendation in reviews:
        review = Review.objects.create(
            submission=s, reviewer=user, rubric=rubric, state=state, recommendation=recommendation
        )
        Score.objects.bulk_create(
            [Score(review=review, row=row, value=value) for row in rubric.rows.all()]
        )
    return s


def test_each_hand_in_is_ready_in_review_or_flagged(lead, reviewer, reviewer2, assignment) -> None:
    both = (reviewer, reviewer2)
    done = "submitted"
    _hand_in(
        assignment,
        "Ready",
        assigned=both,
        reviews=[(reviewer, 2, done, "yes"), (reviewer2, 2, done, "strong_yes")],
    )
    _hand_in(assignment, "Waiting on bob", assigned=both, reviews=[(reviewer, 2, done, "yes")])
    _hand_in(
        assignment,
        "Bob drafting",
        assigned=[reviewer],
        reviews=[(reviewer, 2, done, "yes"), (reviewer2, 2, "draft", "")],
    )
    _hand_in(assignment, "Nobody yet")
    _hand_in(
        assignment,
        "Spread",
        assigned=both,
        reviews=[(reviewer, 3, done, "yes"), (reviewer2, 1, done, "yes")],
    )
    _hand_in(
        assignment,
        "Split",
        assigned=both,
        reviews=[(reviewer, 2, done, "yes"), (reviewer2, 2, done, "strong_no")],
    )
    contradicted = _hand_in(assignment, "Against its checks", assigned=both,
                            reviews=[(reviewer, 0, done, "no")])  # fmt: skip
    row = next(r for r in RubricTemplate.objects.get(slug="cassette").rows.all() if r.check_ids)
    for cid in row.check_ids:
        CheckResult.objects.create(submission=contradicted, check_id=cid, status="pass")
    refused = _hand_in(assignment, "Refused", assigned=both)
    Submission.objects.filter(pk=refused.pk).update(status=Submission.Status.REJECTED)

    (entry,) = cohorts_needing_decision(lead)
    assert entry == {
        "assignment": assignment,
        "hand_ins": 7,
        "ready": 1,
        "in_review": 3,  # waiting on bob, bob drafting, nobody yet
        "flagged": 3,  # spread, split, a 0 beside checks that all passed
        "needs_decision": True,
    }
    # Only the checks that ran: with one of them skipped, nothing contradicts the 0.
    CheckResult.objects.filter(submission=contradicted, check_id=row.check_ids[0]).update(
        status="skip"
    )
    (entry,) = cohorts_needing_decision(lead)
    assert (entry["flagged"], entry["in_review"]) == (2, 4)


def test_only_a_hiring_lead_gets_them(reviewer, assignment) -> None:
    _hand_in(assignment, "Someone", assigned=[reviewer])
    assert cohorts_needing_decision(reviewer) == []


def test_cohorts_needing_a_decision_come_first(lead, reviewer, assignment) -> None:
    quiet = assignment_apply(
        values=assignment_values(
            {"slug": "aaa-quiet", "title": "AAA quiet", "replay_command": "", "rubric": "cassette"}
        )
    )[0]
    _hand_in(quiet, "Just started", assigned=[reviewer])
    assignment_apply(values=assignment_values({"slug": "empty", "title": "Empty"}))
    _hand_in(assignment, "Done", assigned=[reviewer], reviews=[(reviewer, 2, "submitted", "")])
    out = cohorts_needing_decision(lead)
    assert [(d["assignment"].slug, d["needs_decision"]) for d in out] == [
        ("cassette-triage", True),
        ("aaa-quiet", False),
    ]  # an assignment without hand-ins is left out


def test_queries_do_not_grow_with_hand_ins(lead, reviewer, reviewer2, assignment) -> None:
    def add(n: int, start: int) -> None:
        for i in range(start, start + n):
            _hand_in(assignment, f"C{i}", assigned=[reviewer, reviewer2],
                     reviews=[(reviewer, i % 4, "submitted", "yes")])  # fmt: skip

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            cohorts_needing_decision(lead)
        return len(captured.captured_queries)

    assert is_hiring_lead(lead)  # the role, read once and kept on the user
    add(2, 0)
    few = queries()
    add(8, 2)
    assert queries() == few <= 10  # assignments, assigned reviewers, the cohort's own
