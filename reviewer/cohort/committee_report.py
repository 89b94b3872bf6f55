"""The shareable report for the hiring committee: one self-contained HTML file per cohort
or per submission, readable offline.

Self-contained: the CSS is inline (its hash is the only style the file's CSP allows), the
chart is inline SVG, and there is no script, no link, no image and no form; the only
hrefs are in-file anchors, so opening the file makes no request.

Every piece of free text a candidate or a reviewer wrote (check summaries and evidence,
evidence lines, notes, audit reasons, old → new values) goes through `redact_text` whole
and is cut only afterwards: a key cut in half first could slip past the scanner, and a
secret pasted anywhere must never land in the file in full.

The figures are `cohort_for`'s, the same as the comparison page and `manage.py cohort
--format json`; only submitted reviews count, drafts are named as still in progress. The
report is a hiring lead's view (the committee's), so it holds every reviewer's scores,
notes and history; `reviewer/views/share.py` decides who may download it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

from cassettes_app.checks.catalog import CATALOG
from reviewer.cohort.agreement import FLAG_ROW_POINTS, MIN_UNITS_TO_READ
from reviewer.cohort.chart import dot_chart
from reviewer.cohort.cohort import (
    FLAG_RULE,
    STATUSES,
    Candidate,
    RowRange,
    cohort_for,
)
from reviewer.cohort.safe_text import SafeText
from reviewer.models import Note, Review, RubricRow, ScoreEvent
from reviewer.review.contradiction import Contradiction
from reviewer.review.verdict import status_label, verdict_for
from submissions.checks.cohort import OTHER
from submissions.models import Assignment, CheckResult, Submission

CSS_PATH = Path(__file__).resolve().parents[2] / "templates" / "reviewer" / "share" / "report.css"

# Caps that keep a 1,000-candidate file a few megabytes: the per-submission report is the
# place for a candidate's whole story, the cohort report shows each one in brief.
SUMMARY_CHARS = 300  # of each check summary
EVIDENCE_CHARS = 200  # of each item of a check's evidence


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of each candidate one report shows."""

    evidence_items: int  # per check that failed, could not run or is worth a look
    evidence_chars: int  # of a reviewer's evidence line
    note_chars: int
    audit_chars: int  # of each old / new value in the audit trail (twice that of a reason)
    audit_events: int  # the newest this many; the older ones are counted
    brief: bool  # passed checks by id only, not with their summaries


COHORT = Limits(
    evidence_items=2,
    evidence_chars=300,
    note_chars=600,
    audit_chars=80,
    audit_events=25,
    brief=True,
)
SUBMISSION = Limits(
    evidence_items=10,
    evidence_chars=2000,
    note_chars=5000,
    audit_chars=600,
    audit_events=1000,
    brief=False,
)

# The order the checks are listed in, and each group's heading.
GROUPS = (
    ("fail", "Flaws found"),
    ("error", "Could not run (says nothing about the candidate)"),
    ("warn", "Worth a look"),
    ("skip", "Skipped (not for this shape, or a precondition unmet)"),
    ("pass", "Passed"),
)
DETAILED = ("fail", "error", "warn")  # the statuses whose evidence the report shows

FIELD_LABELS = {
    "value": "score",
    "evidence": "evidence",
    "override_reason": "override reason",
    "note": "note",
    "anchor": "pinned to",
    "state": "state",
}


@cache
def style() -> str:
    """The report's whole stylesheet (no url(), no @import)."""
    return CSS_PATH.read_text(encoding="utf-8")


def style_source() -> str:
    """The CSP source that allows exactly the report's inline stylesheet."""
    digest = hashlib.sha256(style().encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


# ------------------------------------------------------------------ what a template shows


@dataclass(frozen=True, slots=True)
class CheckLine:
    check_id: str
    title: str
    status: str
    summary: str
    evidence: tuple[str, ...] = ()
    more: int = 0  # evidence items left out


@dataclass(slots=True)
class CheckGroup:
    status: str
    heading: str
    lines: list[CheckLine]
    brief: bool  # ids only


@dataclass(frozen=True, slots=True)
class Change:
    field: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class AuditLine:
    at: str  # UTC, for reading
    iso: str
    who: str
    kind: str
    row: str
    changes: tuple[Change, ...]
    reason: str
    in_progress: bool  # a change of a review that is still a draft


@dataclass(frozen=True, slots=True)
class Pin:
    who: str
    target: str
    body: str


@dataclass(frozen=True, slots=True)
class Cell:
    """One reviewer's score on one row, as the report prints it."""

    value: int | None
    evidence: str
    notes: tuple[str, ...]
    contradiction: Contradiction | None = None  # with the row's linked checks


@dataclass(slots=True)
class ScoreLine:
    row: RubricRow
    range: RowRange
    pairs: list[tuple[str, Cell | None]]  # (reviewer, their score), in Detail.reviewers order

    @property
    def flagged(self) -> bool:
        return self.range.flagged


@dataclass(slots=True)
class Detail:
    """One candidate's section: the verdict, the checks, the scores, the history."""

    candidate: Candidate
    anchor: str
    headline: str
    environment_blocked: bool
    groups: list[CheckGroup]
    reviewers: list[str]  # with a submitted review
    lines: list[ScoreLine]
    pins: list[Pin] = field(default_factory=list)
    audit: list[AuditLine] = field(default_factory=list)
    audit_left_out: int = 0
    audit_people: int = 0  # who made the changes, left-out ones included

    @property
    def audit_summary(self) -> str:
        """The folded audit trail's one line: "14 changes by 3 people, last …"."""
        total = len(self.audit) + self.audit_left_out
        people = f"{self.audit_people} {'person' if self.audit_people == 1 else 'people'}"
        last = f", last {self.audit[-1].at}" if self.audit else ""
        return f"{total} change{'' if total == 1 else 's'} by {people}{last}"

    @property
    def recommendations(self) -> list[tuple[str, str]]:
        """(reviewer, recommendation label or "") in `reviewers` order."""
        given = {r.reviewer: r.recommendation_label for r in self.candidate.reviews}
        return [(name, given.get(name, "")) for name in self.reviewers]

    @property
    def submission(self) -> Submission:
        return self.candidate.submission

    @property
    def uploaded(self) -> str:
        return _utc(self.submission.created)[0]

    @property
    def status_label(self) -> str:
        return STATUSES[self.candidate.status]

    @property
    def totals(self) -> list[tuple[str, float | None]]:
        return [(name, self.candidate.totals.get(name)) for name in self.reviewers]

    @property
    def flagged_lines(self) -> list[ScoreLine]:
        """The rows the reviewers disagree on; when only the totals are apart, the rows
        that differ most, so the section still shows where the gap comes from."""
        flagged = [line for line in self.lines if line.flagged]
        if flagged or not self.candidate.flagged:
            return flagged
        widest = max((line.range.apart for line in self.lines), default=0)
        return [line for line in self.lines if widest and line.range.apart == widest]


# ------------------------------------------------------------------ reading


_CheckRow = tuple[str, str, str, str]  # check id, status, summary, cause


def _check_groups(
    checks: list[_CheckRow], evidence: dict[str, Any], text: SafeText, limits: Limits
) -> list[CheckGroup]:
    by_status: dict[str, list[CheckLine]] = defaultdict(list)
    for check_id, status, summary, _ in checks:
        spec = CATALOG.get(check_id)
        items: list[str] = []
        more = 0
        if status in DETAILED:
            found = evidence.get(check_id) or []
            if not isinstance(found, list):
                found = [found]
            items = [
                text.cut(_evidence_text(e), EVIDENCE_CHARS) for e in found[: limits.evidence_items]
            ]
            more = max(0, len(found) - limits.evidence_items)
        shown = status != "pass" or not limits.brief
        by_status[status].append(
            CheckLine(
                check_id,
                spec.title if spec else check_id,
                status,
                text.cut(summary, SUMMARY_CHARS) if shown else "",
                tuple(i for i in items if i),
                more,
            )
        )
    headings = dict(GROUPS)
    order = [s for s, _ in GROUPS] + sorted(set(by_status) - set(headings))
    return [
        CheckGroup(
            status,
            f"{headings.get(status, status_label(status))}: {len(by_status[status])}",
            by_status[status],
            brief=status == "pass" and limits.brief,
        )
        for status in order
        if by_status.get(status)
    ]


def _evidence_text(item: Any) -> str:
    """One item of a check's evidence on one line (a string, or a dict's `key: value`s).

    Never the other hand-in a cohort check names (`OTHER`): a shared file cannot follow who
    may see that hand-in, so it says "another candidate's hand-in", as the message does.
    """
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        shown = [(k, v) for k, v in item.items() if k != OTHER][:20]
        return "; ".join(f"{k}: {_evidence_text(v)}" for k, v in shown)
    if isinstance(item, list):
        return json.dumps(item[:20], ensure_ascii=False, default=str)
    return json.dumps(item, ensure_ascii=False, default=str)


def _value_text(value: Any, text: SafeText, limit: int) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        return text.cut(value, limit)
    return text.cut(json.dumps(value, ensure_ascii=False, default=str), limit)


def _changes(old: Any, new: Any, reason: str, text: SafeText, limit: int) -> tuple[Change, ...]:
    """What an event changed, field by field: old → new, only where they differ (an
    override reason the event gives as its reason is shown once, as the reason)."""
    old = old if isinstance(old, dict) else ({} if old is None else {"value": old})
    new = new if isinstance(new, dict) else ({} if new is None else {"value": new})
    keys = [
        k
        for k in dict.fromkeys([*new, *old])
        if not (k == "override_reason" and reason and new.get(k) == reason)
    ]
    return tuple(
        Change(
            FIELD_LABELS.get(k, k.replace("_", " ")),
            _value_text(old.get(k), text, limit),
            _value_text(new.get(k), text, limit),
        )
        for k in keys
        if old.get(k) != new.get(k)
    )


def _utc(at: datetime) -> tuple[str, str]:
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC"), at.isoformat(timespec="seconds")


_EventRow = tuple[datetime, str, Any, Any, str, str, str | None, str | None]

KINDS = dict(ScoreEvent.Kind.choices)


def _audit(events: list[_EventRow], text: SafeText, limits: Limits) -> tuple[list[AuditLine], int]:
    """The newest `limits.audit_events` changes, oldest first, and how many were left out."""
    left_out = max(0, len(events) - limits.audit_events)
    out = []
    for at, kind, old, new, reason, who, row, state in events[left_out:]:
        shown, iso = _utc(at)
        out.append(
            AuditLine(
                at=shown,
                iso=iso,
                who=who,
                kind=KINDS.get(kind, kind),
                row=row or "",
                changes=_changes(old, new, reason, text, limits.audit_chars),
                reason=text.cut(reason, 2 * limits.audit_chars) if reason else "",
                in_progress=state is not None and state != Review.State.SUBMITTED,
            )
        )
    return out, left_out


def _detail(
    c: Candidate,
    *,
    checks: list[_CheckRow],
    evidence: dict[str, Any],
    pins: list[tuple[str, str, str]],
    events: list[_EventRow],
    text: SafeText,
    limits: Limits,
) -> Detail:
    reviewers = [r.reviewer for r in c.reviews]
    # Only the headline and whether the sandbox kept checks from running are shown.
    verdict = verdict_for(
        [_Check(cid, status, "", cause) for cid, status, _, cause in checks],
        submission_status=c.submission.status,
    )
    lines = []
    for r in c.ranges:
        pairs: list[tuple[str, Cell | None]] = []
        for name in reviewers:
            s = r.by_reviewer.get(name)
            cell = (
                None
                if s is None
                else Cell(
                    s.value,
                    text.cut(s.evidence, limits.evidence_chars),
                    tuple(text.cut(n, limits.note_chars, one_line=False) for n in s.notes),
                    s.contradiction,
                )
            )
            pairs.append((name, cell))
        lines.append(ScoreLine(r.row, r, pairs))
    audit, left_out = _audit(events, text, limits)
    return Detail(
        candidate=c,
        anchor=f"candidate-{c.submission.pk}",
        headline=verdict.headline,
        environment_blocked=verdict.environment_blocked,
        groups=_check_groups(checks, evidence, text, limits),
        reviewers=reviewers,
        lines=lines,
        pins=[
            Pin(who, target, text.cut(body, limits.note_chars, one_line=False))
            for who, target, body in pins
        ],
        audit=audit,
        audit_left_out=left_out,
        audit_people=len({who for *_, who, _, _ in events}),
    )


@dataclass(frozen=True, slots=True)
class _Check:
    """What `verdict_for` reads of a check."""

    check_id: str
    status: str
    summary: str
    cause: str


def _username() -> str:
    return get_user_model().USERNAME_FIELD


def _event_rows(queryset: QuerySet[ScoreEvent]) -> QuerySet[ScoreEvent, tuple[Any, ...]]:
    """Each change as (submission, at, kind, old, new, reason, who, row, review state)."""
    return queryset.order_by("submission_id", "at", "pk").values_list(
        "submission_id",
        "at",
        "kind",
        "old",
        "new",
        "reason",
        f"actor__{_username()}",
        "row__title",
        "review__state",
    )


def _pin_rows(queryset: QuerySet[Note]) -> QuerySet[Note, tuple[Any, ...]]:
    """Notes pinned to a check, a turn or a file: (submission, who, anchor, body)."""
    return (
        queryset.filter(row__isnull=True)
        .exclude(anchor="")
        .order_by("created", "pk")
        .values_list("submission_id", f"author__{_username()}", "anchor", "body")
    )


def _generated(request: Any, by: str) -> dict[str, str]:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        by = user.get_username()
    shown, iso = _utc(timezone.now())
    return {"generated_at": shown, "generated_iso": iso, "generated_by": by}


def _document(template: str, context: dict[str, Any]) -> str:
    # Rendered without the request: no context processor, no CSRF token, nothing of the
    # session lands in a file meant to travel.
    context["flag_rule"] = FLAG_RULE
    context["flag_row_points"] = FLAG_ROW_POINTS
    context["style"] = mark_safe(style())  # noqa: S308 - our own static stylesheet
    context["style_source"] = style_source()
    return render_to_string(template, context)


# ------------------------------------------------------------------ the two reports


def cohort_report_html(
    assignment: Assignment, *, request: Any = None, generated_by: str = "manage.py cohort_report"
) -> str:
    """The committee's report of one assignment's cohort, as one self-contained HTML file."""
    cohort = cohort_for(assignment)
    ids = {c.submission.pk for c in cohort.candidates}
    text = SafeText()
    checks: dict[int, list[_CheckRow]] = defaultdict(list)
    for sid, cid, status, summary, cause in (
        CheckResult.objects.filter(submission__assignment=assignment)
        .order_by("submission_id", "check_id")
        .values_list("submission_id", "check_id", "status", "summary", "cause")
    ):
        if sid in ids:
            checks[sid].append((cid, status, summary, cause))
    evidence: dict[int, dict[str, Any]] = defaultdict(dict)
    # Only the checks whose evidence the report prints: passes can hold long lists.
    for sid, cid, items in (
        CheckResult.objects.filter(submission__assignment=assignment, status__in=DETAILED)
        .order_by()
        .values_list("submission_id", "check_id", "evidence")
    ):
        if sid in ids:
            evidence[sid][cid] = items
    # A rubric row's notes come with the cohort's scores; the notes pinned to a check,
    # a turn or a file are read here.
    pins: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for sid, who, anchor, body in _pin_rows(Note.objects.filter(submission__assignment=assignment)):
        if sid in ids:
            pins[sid].append((who, anchor, body))
    events: dict[int, list[_EventRow]] = defaultdict(list)
    for sid, *event in _event_rows(ScoreEvent.objects.filter(submission__assignment=assignment)):
        if sid in ids:
            events[sid].append(tuple(event))
    details = [
        _detail(
            c,
            checks=checks[c.submission.pk],
            evidence=evidence[c.submission.pk],
            pins=pins[c.submission.pk],
            events=events[c.submission.pk],
            text=text,
            limits=COHORT,
        )
        for c in cohort.candidates
    ]
    agreement = cohort.agreement
    weights = {row.title: row.weight for row in cohort.rows}
    context = {
        "assignment": assignment,
        "cohort": cohort,
        "details": details,
        "flagged": [d for d in details if d.candidate.flagged],
        "table": [
            {"d": d, "c": d.candidate, "cells": d.candidate.cells(cohort.reviewers)}
            for d in details
        ],
        "chart": dot_chart(cohort.candidates, cohort.reviewers),
        "drafts": sum(len(c.drafts) for c in cohort.candidates),
        "figures": cohort.figures,
        "min_units": MIN_UNITS_TO_READ,
        "row_alphas": [
            (row.title, weights.get(row.title), cohort.row_figures[row.pk]) for row in cohort.rows
        ],
        "pairs": agreement["pairs"],
        "calibration": cohort.calibration,
        "statuses": STATUSES,
        "limits": COHORT,
        **_generated(request, generated_by),
    }
    return _document("reviewer/share/cohort.html", context)


def submission_report_html(
    submission: Submission, *, request: Any = None, generated_by: str = "manage.py cohort_report"
) -> str:
    """One submission's report (verdict, checks, every reviewer's scores and notes, the
    audit trail), as one self-contained HTML file."""
    cohort = cohort_for(submission.assignment, only=submission)
    rows, (candidate,) = cohort.rows, cohort.candidates
    text = SafeText()
    results = list(
        submission.checks.order_by("check_id").values_list(
            "check_id", "status", "summary", "evidence", "cause"
        )
    )
    pins = [(who, anchor, body) for _, who, anchor, body in _pin_rows(submission.notes.all())]
    events = [tuple(e[1:]) for e in _event_rows(ScoreEvent.objects.filter(submission=submission))]
    detail = _detail(
        candidate,
        checks=[(cid, status, summary, cause) for cid, status, summary, _, cause in results],
        evidence={cid: ev for cid, status, _, ev, _ in results if status in DETAILED},
        pins=pins,
        events=events,
        text=text,
        limits=SUBMISSION,
    )
    context = {
        "assignment": submission.assignment,
        "submission": submission,
        "d": detail,
        "rows": rows,
        "limits": SUBMISSION,
        **_generated(request, generated_by),
    }
    return _document("reviewer/share/submission.html", context)
