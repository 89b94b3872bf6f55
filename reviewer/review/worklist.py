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


def queue_for(user: Any, submission: Submission) -> Queue:
    """Previous and next in the queue (two queries, whatever the cohort's size)."""
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
    ordered = [pk for pk in visible if pk not in done] + [pk for pk in visible if pk in done]
    at = ordered.index(submission.pk) if submission.pk in ordered else -1
    return Queue(
        previous=ordered[at - 1] if at > 0 else None,
        next=ordered[at + 1] if 0 <= at < len(ordered) - 1 else None,
        left=len(visible) - len(done),
        total=len(visible),
        position=at + 1,
    )
