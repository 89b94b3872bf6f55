"""The audit trail's one writer: every score, row note, pinned note and submit is recorded
(who, when, old -> new, the reason) in the caller's transaction, and never rewritten."""

from __future__ import annotations

from typing import Any

from reviewer.models import Review, RubricRow, ScoreEvent


def audit_record(
    *,
    submission_id: int,
    actor_id: int,
    kind: str,
    old: Any,
    new: Any,
    review: Review | None = None,
    row: RubricRow | None = None,
    reason: str = "",
) -> ScoreEvent:
    """Record one change; call it inside the transaction that makes the change, so a
    rolled-back change leaves no event and a kept one always has its event."""
    return ScoreEvent.objects.create(
        submission_id=submission_id,
        review=review,
        row=row,
        actor_id=actor_id,
        kind=kind,
        old=old,
        new=new,
        reason=reason,
    )
