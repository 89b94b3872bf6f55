"""The hiring lead's comparison of one assignment's candidates."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import mean

from cassettes_app.text import clipped
from reviewer.cohort.cohort import STATUSES, Candidate, Cohort
from reviewer.models import Review, Score
from reviewer.review.rubrics import rubric_for, weighted_total
from reviewer.review.scoring import blind_lifted
from submissions.models import Assignment, CheckResult, Submission

CHECK_GROUPS = ("env", "replay", "cassettes", "trace", "service", "ledger", "docs")


SORTS = {
    "total": "mean total, highest first",
    "name": "name",
    "range": "disagreement, widest first",
    "low": "lowest total, highest first",
    "flaws": "flaws found, most first",
}


@dataclass
class Filters:
    """What the lead asked the comparison for; values the cohort does not have are dropped
    and named in `problems`, so a stale link shows everything with a note, not an error."""

    status: str = ""
    reviewer: str = ""
    flagged: bool = False
    sort: str = "total"
    by: str = ""  # sort by this reviewer's total
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: Mapping[str, str], cohort: Cohort) -> Filters:
        f = cls()
        status = query.get("status", "")
        if status in STATUSES:
            f.status = status
        elif status:
            f.problems.append(f"unknown status {status!r}, ignored")
        reviewer = query.get("reviewer", "")
        if reviewer in cohort.reviewers:
            f.reviewer = reviewer
        elif reviewer:
            f.problems.append(f"no submitted review by {reviewer!r}, filter ignored")
        f.flagged = query.get("flagged", "") in ("1", "on", "yes")
        sort = query.get("sort", "total")
        by = query.get("by", "")
        if sort == "reviewer" and by in cohort.reviewers:
            f.sort, f.by = sort, by
        elif sort in SORTS:
            f.sort = sort
        else:
            f.problems.append(f"unknown sort {sort!r}, sorted by total")
        return f

    def apply(self, cohort: Cohort) -> list[Candidate]:
        out = [
            c
            for c in cohort.candidates
            if (not self.status or c.status == self.status)
            and (not self.reviewer or self.reviewer in c.totals)
            and (not self.flagged or c.flagged)
        ]
        return sorted(out, key=self._key)

    def _key(self, c: Candidate) -> tuple:
        name = (c.name.lower(), c.submission.pk)
        if self.sort == "name":
            return name
        if self.sort == "range":
            return (-c.total_apart, not c.flagged, *name)
        if self.sort == "low":
            return (c.low is None, -(c.low or 0), *name)
        if self.sort == "flaws":
            return (-c.count("fail"), -c.count("error"), *name)
        if self.sort == "reviewer":
            mine = c.totals.get(self.by)
            return (mine is None, -(mine or 0), *name)
        return (c.mean is None, -(c.mean or 0), *name)


def comparison_csv(cohort: Cohort, candidates: list[Candidate]) -> str:
    """The comparison as CSV: one line per candidate, each reviewer's total and
    recommendation in their own columns, the range, the flag, the recommendations counted,
    the scores that contradict their checks, and each rubric row's mean, lowest and
    highest. A value nobody gave is empty, never 0."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    header = ["candidate", "submission", "status"]
    header += [f"{_csv_safe(name)} (total)" for name in cohort.reviewers]
    header += [f"{_csv_safe(name)} (recommendation)" for name in cohort.reviewers]
    header += ["mean total", "lowest total", "highest total", "flagged", "why flagged"]
    header += ["recommendations", "recommendations agree", "contradicts its checks"]
    for row in cohort.rows:
        header += [f"{row.title} (mean)", f"{row.title} (lowest)", f"{row.title} (highest)"]
    header += ["reviews", "reviewers", "reviews in progress", "flaws found", "could not run"]
    writer.writerow(header)
    for c in candidates:
        line: list[object] = [_csv_safe(c.name), c.submission.pk, STATUSES[c.status]]
        line += [_blank(c.totals.get(name)) for name in cohort.reviewers]
        given = {r.reviewer: r.recommendation_label for r in c.reviews}
        line += [given.get(name, "") for name in cohort.reviewers]
        line += [_blank(c.mean), _blank(c.low), _blank(c.high), "yes" if c.flagged else "no"]
        line.append(_csv_safe("; ".join(c.flag_reasons)))
        line += [c.recommendation_text, c.recommendation_agreement]
        line.append(_csv_safe("; ".join(x.text for x in c.contradictions)))
        for r in c.ranges:
            line += [_blank(r.mean), _blank(r.low), _blank(r.high)]
        line += [len(c.reviews), _csv_safe(" ".join(c.totals)), len(c.drafts)]
        # `error` (a check that could not run) is never counted as a flaw.
        line += [c.count("fail"), c.count("error")]
        writer.writerow(line)
    return buffer.getvalue()


def _blank(value: object) -> object:
    return "" if value is None else value


def _csv_safe(text: str) -> str:
    """Neutralise spreadsheet formulas in names that came from uploads."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def assignment_rows(
    user: object, assignment: Assignment, submissions: list[Submission]
) -> list[dict]:
    """Rows of the assignment page: badges per check group, a score the user may see, reviews.

    Blind scoring holds here too: a reviewer sees only their own total until they submit;
    hiring leads see the mean of all reviews. Three queries whatever the page size.
    """
    ids = [s.pk for s in submissions]
    template = rubric_for(assignment)
    rubric_rows = list(template.rows.all()) if template else []
    badges: dict[int, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for sid, cid, status in CheckResult.objects.filter(submission_id__in=ids).values_list(
        "submission_id", "check_id", "status"
    ):
        badges[sid][cid.split(".", 1)[0]][status] += 1
    scores: dict[int, dict[int, int | None]] = defaultdict(dict)
    reviews: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for score in Score.objects.filter(review__submission_id__in=ids).select_related("review"):
        scores[score.review_id][score.row_id] = score.value
        entry = (score.review_id, score.review.reviewer_id, score.review.state)
        if entry not in reviews[score.review.submission_id]:
            reviews[score.review.submission_id].append(entry)
    me = getattr(user, "pk", None)
    out = []
    for s in submissions:
        mine = [r for r in reviews[s.pk] if r[1] == me]
        submitted = any(state == Review.State.SUBMITTED for _, _, state in mine)
        draft = any(state == Review.State.DRAFT for _, _, state in mine)
        lifted = blind_lifted(user, own_submitted=submitted, own_draft=draft)
        visible = reviews[s.pk] if lifted else mine
        totals = [
            t
            for rid, _, _ in visible
            if (t := weighted_total([(row.weight, scores[rid].get(row.pk)) for row in rubric_rows]))
            is not None
        ]
        groups = {
            g: _badge(counts) for g, counts in sorted(badges[s.pk].items()) if g in CHECK_GROUPS
        }
        out.append(
            {
                "submission": s,
                "badges": groups,
                "reviews": len(reviews[s.pk]),
                "score": round(mean(totals), 1) if totals else None,
            }
        )
    return out


def _badge(counts: dict[str, int]) -> dict[str, object]:
    """A group's worst status and its counts."""
    for status in ("fail", "error", "warn", "pass", "skip"):
        if counts.get(status):
            return {"status": status, "counts": dict(counts)}
    return {"status": "skip", "counts": dict(counts)}


TITLE_CHARS = 300  # of a cell's hover text


def table_rows(cohort: Cohort, candidates: list[Candidate]) -> list[dict]:
    """What each line of the comparison table shows, laid out for the template: a cell per
    reviewer (their total, "in progress" for a draft, empty when not theirs), a cell per
    rubric row (the range, with every reviewer's evidence line as its hover text), and the
    evidence and notes behind each score for the expanded view."""
    out = []
    for i, c in enumerate(candidates):
        ranges = []
        for r in c.ranges:
            hover = "; ".join(
                f"{who}: {s.value if s.value is not None else '—'}"
                + (f" ({s.evidence})" if s.evidence else "")
                for who, s in sorted(r.by_reviewer.items())
            )
            ranges.append(
                {
                    "row": r.row,
                    "text": r.range_text,
                    "flagged": r.flagged,
                    "title": clipped(hover, TITLE_CHARS),
                }
            )
        details = [
            {
                "row": r.row,
                "flagged": r.flagged,
                "scores": [(who, r.by_reviewer.get(who)) for who in sorted(c.totals)],
            }
            for r in c.ranges
        ]
        following = candidates[i + 1] if i + 1 < len(candidates) else None
        out.append(
            {
                "c": c,
                "reviewer_cells": c.cells(cohort.reviewers),
                "ranges": ranges,
                "details": details,
                "next": following,
            }
        )
    return out
