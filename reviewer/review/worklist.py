"""The reviewer's queue within one assignment: unscored first, then by upload time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reviewer.models import Review
from submissions.models import Submission


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
