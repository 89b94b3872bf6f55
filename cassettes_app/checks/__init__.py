"""Check results shared by every check module; one function per catalog id lives beside."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "warn", "skip", "error"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "warn", "skip", "error")

# Evidence lists are capped so one bad submission cannot make a result row huge.
MAX_EVIDENCE = 200


@dataclass(slots=True)
class CheckOutcome:
    """A check's verdict: catalog id, status, one-line summary, and evidence items.

    Evidence items are JSON-able dicts with at least a human-readable "message"; where they
    point into the submission they carry "path" (and "line" when known). Secrets in evidence
    are only ever their redacted form.
    """

    id: str
    status: Status
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    # What made it end so when that is not the hand-in, as a fact pages can read (e.g.
    # "sandbox": it could not run on this server); "" for the hand-in's own outcome.
    cause: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}")
        if len(self.evidence) > MAX_EVIDENCE:
            dropped = len(self.evidence) - MAX_EVIDENCE
            self.evidence = [
                *self.evidence[:MAX_EVIDENCE],
                {"message": f"… and {dropped} more items not shown"},
            ]

    def as_dict(self) -> dict[str, Any]:
        """The report's shape: id, status, summary, evidence (not the cause)."""
        return {
            "id": self.id,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
        }


def skip(check_id: str, reason: str) -> CheckOutcome:
    """A check that does not apply to this submission, with the reason."""
    return CheckOutcome(check_id, "skip", reason)


def counted(count: int, noun: str) -> str:
    """`1 id`, `2 ids`: a count and its noun, plural by an added s."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
