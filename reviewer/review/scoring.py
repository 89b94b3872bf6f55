"""Scoring: reviews, rubric rows scored 0–3, conflicts, blind visibility."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from cassettes_app.checks.rules import shape_rules
from reviewer.models import Note, Review, RubricRow, Score, ScoreEvent
from reviewer.review.audit import audit_record
from reviewer.review.contradiction import Contradiction, contradiction
from reviewer.review.rubrics import rubric_for, weighted_total
from submissions.models import Assignment, CheckResult, Submission
from submissions.roles import is_hiring_lead


class ScoreConflict(Exception):
    """The score changed since the form was loaded; nothing was overwritten."""

    def __init__(self, current: Score, attempted: dict[str, Any]) -> None:
        super().__init__("this score was changed by another save since you loaded it")
        self.current = current
        self.attempted = attempted


class ScoreRefused(ValueError):
    """A score the rules do not allow (e.g. a 3 without passing checks or a reason)."""


def reviews_of(submission: Submission) -> list[Review]:
    """Every review of the submission, with its reviewer, rubric, rubric rows and scores
    (three queries); `review_for` and `reviews_visible_to` take them instead of reading."""
    return list(
        Review.objects.filter(submission=submission)
        .select_related("reviewer", "rubric")
        # Scores keyed by their row's id: the rubric's rows, read once, are the rows.
        .prefetch_related("scores", "rubric__rows")
    )


def review_for(
    *, submission: Submission, reviewer: Any, reviews: list[Review] | None = None
) -> Review | None:
    """The reviewer's review as stored, or an unsaved draft to show: a GET never writes,
    so looking at a submission (a hiring lead, the demo's visitor) starts no review. None
    when the assignment has no rubric. `reviews`: `reviews_of(submission)`, when read."""
    rubric = rubric_for(submission.assignment)
    if rubric is None:
        return None
    if getattr(reviewer, "is_authenticated", False):
        if reviews is None:
            stored = Review.objects.filter(submission=submission, reviewer=reviewer).first()
        else:
            stored = next((r for r in reviews if r.reviewer_id == reviewer.pk), None)
        if stored is not None:
            return stored
    # The same rubric as another review's, its rows already read.
    rubric = next((r.rubric for r in reviews or () if r.rubric_id == rubric.pk), rubric)
    return Review(submission=submission, reviewer=None, rubric=rubric)


def scoring_offered(user: Any, review: Review) -> bool:
    """A hiring lead who has not chosen to score this hand-in is offered the choice instead
    of a scoring form: a form at hand anchors them on the rubric, and their scores would
    join the agreement figures."""
    return review.pk is None and is_hiring_lead(user)


def review_get_or_create(*, submission: Submission, reviewer: Any) -> Review | None:
    """The reviewer's own review of a submission (None when the assignment has no rubric)."""
    rubric = rubric_for(submission.assignment)
    if rubric is None:
        return None
    review, _ = Review.objects.get_or_create(
        submission=submission, reviewer=reviewer, defaults={"rubric": rubric}
    )
    return review


def checks_not_applying(assignment: Assignment) -> frozenset[str]:
    """The checks that do not apply to this assignment (its shape, and its overrides)."""
    rules = shape_rules(assignment.shape, assignment.check_rules)
    return frozenset(cid for cid, rule in rules.items() if not rule.applies)


def checks_passed(
    row: RubricRow, statuses: dict[str, str], *, not_applying: frozenset[str] = frozenset()
) -> tuple[bool, list[str]]:
    """Whether every linked check that applies to the assignment passed in this run.

    A 3 means the behaviour was observed. A skip stands in for a pass only when the check
    does not apply to the assignment; a skip whose precondition did not hold (no live stub
    URL, the suite never ran) observed nothing, so it counts as not passed, like an error.
    """
    not_passed = []
    for cid in row.check_ids:
        if cid in not_applying:
            continue
        status = statuses.get(cid, "not run")
        if status == "skip":
            not_passed.append(f"{cid}: skipped, so nothing was observed")
        elif status != "pass":
            not_passed.append(f"{cid}: {status}")
    return not not_passed, not_passed


def review_lock(review: Review) -> Review:
    """Lock the review's row for this transaction and return it as stored now.

    Every writer of a review (a score, a note, the recommendation, the submit) takes it
    first, so one reviewer's quick successive saves queue instead of deadlocking: on
    PostgreSQL two saves that each insert a score (a key-share lock on the review) and then
    touch the review would wait on each other. It also makes "submitted" final: a save
    that reads the state under the lock cannot slip in after the submit."""
    return Review.objects.select_for_update().get(pk=review.pk)


def score_save(
    *,
    review: Review,
    row: RubricRow,
    value: int | None,
    evidence: str,
    override_reason: str,
    expected_version: int,
    notes: str | None = None,
    tab: str = "",
    seq: int = 0,
) -> Score:
    """Save one row's score, refusing a stale version and an unearned 3."""
    if value is not None and not 0 <= value <= 3:
        raise ScoreRefused("a score is 0, 1, 2 or 3")
    if review.state == Review.State.SUBMITTED:
        raise ScoreRefused("this review was submitted; it can no longer change")
    if value == 3:
        statuses = dict(
            CheckResult.objects.filter(submission=review.submission).values_list(
                "check_id", "status"
            )
        )
        ok, missing = checks_passed(
            row, statuses, not_applying=checks_not_applying(review.submission.assignment)
        )
        if not ok and not override_reason.strip():
            raise ScoreRefused(
                "a 3 needs every linked check to pass (" + "; ".join(missing) + ") "
                "or a written override reason"
            )
    with transaction.atomic():
        if review_lock(review).state == Review.State.SUBMITTED:
            raise ScoreRefused("this review was submitted; it can no longer change")
        score, _ = Score.objects.select_for_update().get_or_create(review=review, row=row)
        if score.version != expected_version:
            if not (tab and score.tab == tab):  # another page saved since: a real conflict
                raise ScoreConflict(
                    score,
                    {"value": value, "evidence": evidence, "override_reason": override_reason},
                )
            if seq and seq < score.seq:
                return score  # this page's earlier change, answered late: the later one holds
        old = _score_state(score)
        score.tab = tab[:32]
        score.seq = max(seq, 0)
        score.value = value
        score.evidence = evidence.strip()[:2000]
        # Kept whatever the value: a reason is often typed before the 3 is chosen.
        score.override_reason = override_reason.strip()[:2000]
        score.version += 1
        score.save()
        new = _score_state(score)
        if new != old:
            audit_record(
                submission_id=review.submission_id,
                review=review,
                row=row,
                actor_id=review.reviewer_id,
                kind=ScoreEvent.Kind.SCORE,
                old=old,
                new=new,
                reason=score.override_reason if score.value == 3 else "",
            )
        if notes is not None:
            note_save(review=review, row=row, body=notes)
        Review.objects.filter(pk=review.pk).update(updated=timezone.now())
    return score


def _score_state(score: Score) -> dict[str, Any]:
    return {
        "value": score.value,
        "evidence": score.evidence,
        "override_reason": score.override_reason,
    }


def note_save(*, review: Review, row: RubricRow, body: str) -> None:
    """The reviewer's note on a row (Markdown, stored as typed; rendered sanitised)."""
    body = body.strip()
    notes = Note.objects.filter(submission=review.submission, author=review.reviewer, row=row)
    note = notes.first()
    before = note.body if note is not None else ""
    if before != body:
        audit_record(
            submission_id=review.submission_id,
            review=review,
            row=row,
            actor_id=review.reviewer_id,
            kind=ScoreEvent.Kind.NOTE,
            old={"note": before},
            new={"note": body},
        )
    if not body:
        notes.delete()
        return
    if note is None:
        Note.objects.create(
            submission=review.submission, author=review.reviewer, row=row, body=body
        )
    elif note.body != body:
        note.body = body
        note.save(update_fields=["body", "updated"])


def recommendation_save(*, review: Review, value: str) -> Review:
    """The reviewer's overall call (strong no … strong yes); blank takes it back."""
    if value not in Review.Recommendation.values and value != "":
        raise ScoreRefused("a recommendation is strong no, no, yes or strong yes")
    if review.state == Review.State.SUBMITTED:
        raise ScoreRefused("this review was submitted; it can no longer change")
    with transaction.atomic():
        stored = review_lock(review)
        if stored.state == Review.State.SUBMITTED:
            raise ScoreRefused("this review was submitted; it can no longer change")
        if stored.recommendation == value:
            review.recommendation = value
            return review
        old = stored.recommendation
        review.recommendation = value
        review.save(update_fields=["recommendation", "updated"])
        audit_record(
            submission_id=review.submission_id,
            review=review,
            actor_id=review.reviewer_id,
            kind=ScoreEvent.Kind.RECOMMEND,
            old={"recommendation": old},
            new={"recommendation": value},
        )
    return review


def review_submit(*, review: Review, recommendation: str | None = None) -> Review:
    """Submit a review once every row is scored and an overall recommendation chosen;
    others' scores become visible to its author. `recommendation`, when given, is saved
    first (a command or the demo submits in one call)."""
    if recommendation is not None:
        recommendation_save(review=review, value=recommendation)
    with transaction.atomic():
        # Read under the lock: every save queued before this submit has landed.
        stored = review_lock(review)
        rows = list(review.rubric.rows.all())
        scored = set(review.scores.exclude(value=None).values_list("row_id", flat=True))
        missing = [row.title for row in rows if row.pk not in scored]
        if missing:
            raise ScoreRefused("score every row before submitting: " + ", ".join(missing))
        if not stored.recommendation:
            raise ScoreRefused("choose an overall recommendation before submitting")
        if stored.state == Review.State.SUBMITTED:
            return stored
        review.recommendation = stored.recommendation
        review.state = Review.State.SUBMITTED
        review.submitted_at = timezone.now()
        review.save(update_fields=["state", "submitted_at", "updated"])
        audit_record(
            submission_id=review.submission_id,
            review=review,
            actor_id=review.reviewer_id,
            kind=ScoreEvent.Kind.SUBMIT,
            old={"state": "draft"},
            new={"state": "submitted"},
        )
    return review


def blind_lifted(user: Any, *, own_submitted: bool, own_draft: bool = False) -> bool:
    """The blind rule: others' scores, notes and history show to a reviewer once their own
    review of this submission is submitted, and to a hiring lead who is not scoring it. A
    lead who chose to score it is blind like anyone until they submit: not anchored."""
    return own_submitted or (is_hiring_lead(user) and not own_draft)


def sees_others(user: Any, submission: Submission, reviews: list[Review] | None = None) -> bool:
    """`blind_lifted` for this user and submission: one query at most, none when the
    submission's `reviews` (`reviews_of`) are given."""
    me = getattr(user, "pk", None)
    if reviews is None:
        state = (
            Review.objects.filter(submission=submission, reviewer_id=me)
            .values_list("state", flat=True)
            .first()
        )
    else:
        state = next((r.state for r in reviews if r.reviewer_id == me), None)
    return blind_lifted(
        user,
        own_submitted=state == Review.State.SUBMITTED,
        own_draft=state == Review.State.DRAFT,
    )


def events_visible_to(
    user: Any, submission: Submission, see_all: bool | None = None
) -> list[ScoreEvent]:
    """The history this user may read: their own changes, everyone's when `sees_others`
    (its answer may be given as `see_all`)."""
    me = getattr(user, "pk", None)
    if see_all is None:
        see_all = sees_others(user, submission)
    events = ScoreEvent.objects.filter(submission=submission).select_related("actor", "row")
    if not see_all:
        events = events.filter(actor_id=me)
    return list(events.order_by("-at", "-pk")[:200])


@dataclass
class ReviewView:
    review: Review
    scores: dict[int, Score]
    total: float | None
    notes: dict[int, str]  # row id -> sanitised HTML
    # row id -> the score's contradiction with its linked checks (only rows that have one)
    contradictions: dict[int, Contradiction] = field(default_factory=dict)


def reviews_visible_to(
    user: Any,
    submission: Submission,
    checks: list[CheckResult] | None = None,
    reviews: list[Review] | None = None,
) -> list[ReviewView]:
    """Blind scoring: others' reviews show only to hiring leads or after submitting one's own.
    `checks`, the submission's checks when the caller read them already, saves a query;
    `reviews`, `reviews_of(submission)` when read, three."""
    if reviews is None:
        reviews = reviews_of(submission)
    me = getattr(user, "pk", None)
    see_all = sees_others(user, submission, reviews)
    from reviewer.review.markdown import render_markdown

    notes: dict[tuple[int, int], str] = {
        (n.author_id, n.row_id): render_markdown(n.body)
        for n in Note.objects.filter(submission=submission).exclude(row=None)
        if n.row_id is not None
    }
    shown = [r for r in reviews if see_all or r.reviewer_id == me]
    # One query for the page's checks, read only when a review is shown (none when given).
    if not shown:
        statuses: dict[str, str] = {}
    elif checks is not None:
        statuses = {c.check_id: c.status for c in checks}
    else:
        statuses = dict(
            CheckResult.objects.filter(submission=submission).values_list("check_id", "status")
        )
    not_applying = checks_not_applying(submission.assignment) if shown else frozenset()
    out = []
    for review in shown:
        scores = {s.row_id: s for s in review.scores.all()}
        rows = review.rubric.rows.all()
        total = weighted_total(
            [(r.weight, scores[r.pk].value if r.pk in scores else None) for r in rows]
        )
        mine = {row: html for (author, row), html in notes.items() if author == review.reviewer_id}
        contradicted = {
            row.pk: found
            for row in rows
            if row.pk in scores
            and (
                found := contradiction(
                    scores[row.pk].value, row.check_ids, statuses, not_applying=not_applying
                )
            )
        }
        out.append(ReviewView(review, scores, total, mine, contradicted))
    return out
