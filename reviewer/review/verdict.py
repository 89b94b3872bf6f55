"""The verdict at the top of a submission: what the checks found, in plain counts, the flaws
one click from their evidence, and what to do next.

`fail` is a flaw found in the hand-in; `error` means the check could not run (the sandbox,
the package index, a job that died): it says nothing about the candidate, and every page
shows it apart. An error caused by this server's environment (the sandbox not set up)
points at the one banner with the one fix instead of repeating the cause per check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.checks.catalog import CATALOG
from cassettes_app.text import clipped
from submissions.models import CheckResult

LABELS = {
    "fail": "flaw found",
    "error": "could not run",
    "warn": "worth a look",
    "pass": "passed",
    "skip": "skipped",
}


def status_label(status: str) -> str:
    """How a check status reads to a reviewer (`error` is never worded like `fail`)."""
    return LABELS.get(status, status)


# A mark beside the label, so a chip's state is not told by its colour alone.
MARKS = {"fail": "✗", "error": "?", "warn": "!", "pass": "✓", "skip": "–"}


@dataclass(frozen=True, slots=True)
class Chip:
    """A rubric row's linked check as a small chip: its short name, state and mark."""

    check_id: str
    status: str  # a check status, or "not run"
    name: str
    label: str
    mark: str


def chip(check_id: str, status: str | None) -> Chip:
    """The chip of a linked check (`status` None: the check has not run)."""
    name = check_id.split(".", 1)[-1]
    if status is None:
        return Chip(check_id, "not run", name, "not run", "")
    return Chip(check_id, status, name, status_label(status), MARKS.get(status, ""))


def environment_caused(check: Any) -> bool:
    """An error that this server's environment caused, not the hand-in."""
    return check.status == "error" and check.cause == CheckResult.Cause.SANDBOX


@dataclass(frozen=True, slots=True)
class Line:
    """One check in the verdict's lists: its title, one line of evidence, its anchor."""

    check_id: str
    title: str
    summary: str
    anchor: str
    environment: bool = False


@dataclass(slots=True)
class Verdict:
    """Counts by status, the flaws, the checks that could not run, and the next action."""

    counts: dict[str, int] = field(default_factory=dict)
    flaws: list[Line] = field(default_factory=list)
    could_not_run: list[Line] = field(default_factory=list)
    headline: str = ""
    next_action: str = ""
    environment_blocked: bool = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _line(check: Any) -> Line:
    spec = CATALOG.get(check.check_id)
    summary = " ".join((check.summary or "").split())
    summary = clipped(summary, 160)
    return Line(
        check.check_id,
        spec.title if spec else check.check_id,
        summary,
        f"check-{check.check_id}",
        environment_caused(check),
    )


def verdict_for(
    checks: Iterable[Any],
    *,
    submission_status: str,
    status_reason: str = "",
    jobs_active: bool = False,
    rows_total: int | None = None,
    rows_scored: int = 0,
    review_state: str | None = None,
    recommended: bool = True,
    scoring: bool = True,
) -> Verdict:
    """The verdict of one submission's checks and the reviewer's next step."""
    checks = list(checks)
    out = Verdict(counts={status: 0 for status in LABELS})
    for check in checks:
        out.counts[check.status] = out.counts.get(check.status, 0) + 1
        if check.status == "fail":
            out.flaws.append(_line(check))
        elif check.status == "error":
            out.could_not_run.append(_line(check))
    out.environment_blocked = any(line.environment for line in out.could_not_run)
    parts = []
    if out.counts["fail"]:
        parts.append(_count(out.counts["fail"], "flaw found", "flaws found"))
    if out.counts["error"]:
        parts.append(_count(out.counts["error"], "check could not run", "checks could not run"))
    if out.counts["warn"]:
        parts.append(_count(out.counts["warn"], "worth a look", "worth a look"))
    parts.append(f"{out.counts['pass']} passed")
    if out.counts["skip"]:
        parts.append(f"{out.counts['skip']} skipped (not for this shape or precondition unmet)")
    out.headline = ", ".join(parts) if checks else "No checks yet"
    out.next_action = _next_action(
        out,
        submission_status,
        status_reason,
        jobs_active,
        rows_total,
        rows_scored,
        review_state,
        recommended,
        scoring,
    )
    return out


def _next_action(
    out: Verdict,
    status: str,
    reason: str,
    jobs_active: bool,
    rows_total: int | None,
    rows_scored: int,
    review_state: str | None,
    recommended: bool = True,
    scoring: bool = True,
) -> str:
    if status == "rejected":
        return f"The upload was refused{': ' + reason if reason else ''}. Upload a fixed archive."
    if jobs_active:
        return "Checks are running; the job panel shows their progress."
    if out.environment_blocked:
        return (
            "Some checks could not run on this server: set the sandbox up (see the banner), "
            "then use Run again. The checks that ran still hold."
        )
    if rows_total is None:
        return "This assignment names no rubric: read the evidence below."
    if review_state == "submitted":
        return "Your review is submitted."
    if not scoring:
        return (
            "You are not scoring this hand-in: read the evidence and the reviewers' scores, "
            "or choose to score it yourself in the rubric."
        )
    left = rows_total - rows_scored
    if left > 0:
        return f"Score the rubric: {_count(left, 'row', 'rows')} of {rows_total} left."
    if not recommended:
        return "Every row is scored: choose your overall recommendation, then submit."
    return "Every row is scored: submit your review."
