"""The reviewer's queue within one assignment (unscored first, then by upload time), and
every assignment's queue counted for the home page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reviewer.models import Review
from submissions.models import Assignment, Submission

# A hand-in whose checks have not finished yet.
_CHECKS_PENDING = frozenset({Submission.Status.RECEIVED, Submission.Status.PROCESSING})


@dataclass(frozen=True, slots=True)
class Queue:
    """Where a submission sits in its reviewer's queue."""

    previous: int | None
    next: int | None
    left: int  # submissions this user may see here and has not submitted a review of
    total: int
    position: int  # 1-based
    next_unscored: int | None = None  # the next one this user has not submitted, not this
    here_done: bool = False  # this user has submitted their review of this submission

    @property
    def done(self) -> bool:
        """Every hand-in of the queue is scored: the end state, not a dead "next"."""
        return self.left == 0


def queue_for(user: Any, submission: Submission) -> Queue:
    """Previous and next in the queue (two queries, whatever the cohort's size).

    The order is fixed (upload time), so submitting a review never moves a hand-in and
    never leaves a dead "next": next is the first hand-in after this one (wrapping round)
    still to score, else simply the one after (wrapping too); previous is the one before.
    """
    visible = list(
        Submission.objects.visible_to(user)
        .filter(assignment_id=submission.assignment_id)
        .order_by("created", "pk")
        .values_list("pk", flat=True)
    )
    done = set(
        Review.objects.filter(
            reviewer_id=getattr(user, "pk", None),
            submission_id__in=visible,
            state=Review.State.SUBMITTED,
        ).values_list("submission_id", flat=True)
    ) if getattr(user, "is_authenticated", False) else set()  # fmt: skip
    at = visible.index(submission.pk) if submission.pk in visible else -1
    after = visible[at + 1 :] + visible[: max(at, 0)] if at >= 0 else visible
    next_unscored = next((pk for pk in after if pk not in done), None)
    # Nothing else to score: the next hand-in all the same (wrapping), to read again.
    following = visible[(at + 1) % len(visible)] if at >= 0 and len(visible) > 1 else None
    return Queue(
        previous=visible[at - 1] if at > 0 else None,
        next=next_unscored if next_unscored is not None else following,
        left=len(visible) - len(done),
        total=len(visible),
        position=at + 1,
        next_unscored=next_unscored,
        here_done=submission.pk in done,
    )


@dataclass(frozen=True, slots=True)
class AssignmentQueue:
    """One assignment's hand-ins as one user's work: what is left, what is under way."""

    assignment: Assignment
    total: int  # hand-ins this user may see here
    left: int  # no review of theirs yet
    drafts: int  # their review started, not submitted
    submitted: int  # their review submitted
    reviewed: int  # hand-ins with at least one submitted review, anyone's
    waiting: int  # hand-ins whose checks have not finished
    next_unscored: int | None  # the first hand-in, in queue order, they have not started
    next_draft: int | None  # the first of their drafts, in queue order

    @property
    def unreviewed(self) -> int:
        """Hand-ins nobody has submitted a review of yet."""
        return self.total - self.reviewed


def assignment_queues(user: Any) -> list[AssignmentQueue]:
    """Every assignment with the hand-ins this user may see in it (none: zeros), counted
    as `queue_for` orders them (upload time, then id); four queries, whatever the number
    of hand-ins."""
    visible = list(
        Submission.objects.visible_to(user)
        .order_by("created", "pk")
        .values_list("pk", "assignment_id", "status")
    )
    ids = [pk for pk, _, _ in visible]
    mine = dict(
        Review.objects.filter(
            reviewer_id=getattr(user, "pk", None), submission_id__in=ids
        ).values_list("submission_id", "state")
    ) if getattr(user, "is_authenticated", False) else {}  # fmt: skip
    reviewed = set(
        Review.objects.filter(submission_id__in=ids, state=Review.State.SUBMITTED).values_list(
            "submission_id", flat=True
        )
    )
    by_assignment: dict[int, list[tuple[int, str]]] = {}
    for pk, assignment_id, status in visible:
        by_assignment.setdefault(assignment_id, []).append((pk, status))
    out = []
    for assignment in Assignment.objects.order_by("title", "pk"):
        rows = by_assignment.get(assignment.pk, [])
        states = [mine.get(pk) for pk, _ in rows]
        out.append(
            AssignmentQueue(
                assignment=assignment,
                total=len(rows),
                left=states.count(None),
                drafts=states.count(Review.State.DRAFT),
                submitted=states.count(Review.State.SUBMITTED),
                reviewed=sum(1 for pk, _ in rows if pk in reviewed),
                waiting=sum(1 for _, status in rows if status in _CHECKS_PENDING),
                next_unscored=next((pk for pk, _ in rows if pk not in mine), None),
                next_draft=next((pk for pk, _ in rows if mine.get(pk) == Review.State.DRAFT), None),
            )
        )
    return out
