"""The hiring lead's comparison of one assignment's candidates."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from statistics import mean

from django.contrib.auth import get_user_model

from reviewer.models import RubricRow, RubricTemplate, Score
from reviewer.report import weighted_total
from submissions.models import Assignment, CheckResult, Submission

CHECK_GROUPS = ("env", "replay", "cassettes", "trace", "service", "ledger", "docs")


@dataclass
class RowCell:
    values: list[int]

    # Cached: the template reads each of these several times per cell.
    @cached_property
    def mean(self) -> float | None:
        if not self.values:
            return None
        # statistics.mean of ints, without its Fractions: an int when exact, else the
        # (correctly rounded) quotient.
        total, n = sum(self.values), len(self.values)
        return round(total // n if total % n == 0 else total / n, 2)

    @cached_property
    def spread(self) -> int:
        return max(self.values) - min(self.values) if len(self.values) > 1 else 0


@dataclass
class CandidateRow:
    submission: Submission
    cells: list[RowCell]
    totals: list[float]
    reviewers: list[str]
    checks: dict[str, dict[str, int]] = field(default_factory=dict)

    @cached_property
    def total(self) -> float | None:
        return round(mean(self.totals), 1) if self.totals else None

    @property
    def name(self) -> str:
        return self.submission.candidate.name


def comparison_rows(
    assignment: Assignment, *, sort: str = "total"
) -> tuple[list[RubricRow], list[CandidateRow]]:
    """One row per candidate (their latest submission), with per-row scores across reviews.

    Five queries whatever the cohort size; scores and checks come back as tuples, not model
    instances (a cohort of 1,000 has 15,000 scores).
    """
    template = RubricTemplate.objects.filter(slug=assignment.rubric).first()
    rubric_rows = list(template.rows.all()) if template else []
    latest: dict[int, Submission] = {}
    for s in (
        Submission.objects.filter(assignment=assignment)
        .exclude(status=Submission.Status.REJECTED)
        .select_related("candidate")
        .only("pk", "candidate__name")
        .order_by("candidate_id", "-created")
    ):
        latest.setdefault(s.candidate_id, s)
    # Scores and checks are filtered by assignment, not by a list of 1,000 ids; those of a
    # candidate's older submissions are skipped here.
    ids = {s.pk for s in latest.values()}
    by_review: dict[int, dict[int, int | None]] = defaultdict(dict)
    review_of: dict[int, tuple[int, str]] = {}
    username = f"review__reviewer__{get_user_model().USERNAME_FIELD}"
    scores = (
        Score.objects.filter(review__submission__assignment=assignment)
        .order_by()
        .values_list("review_id", "row_id", "value", "review__submission_id", username)
    )
    for rid, row_id, value, sid, who in scores:
        if sid not in ids:
            continue
        by_review[rid][row_id] = value
        review_of[rid] = (sid, who)
    checks: dict[int, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for sid, cid, status in CheckResult.objects.filter(
        submission__assignment=assignment
    ).values_list("submission_id", "check_id", "status"):
        if sid in ids:
            checks[sid][cid.split(".", 1)[0]][status] += 1
    reviews_of: dict[int, list[int]] = defaultdict(list)
    for rid, (sid, _) in review_of.items():
        reviews_of[sid].append(rid)
    weights = [(row.pk, row.weight) for row in rubric_rows]
    out = []
    for s in latest.values():
        reviews = [by_review[r] for r in reviews_of[s.pk]]
        cells = [RowCell([v for r in reviews if (v := r.get(pk)) is not None]) for pk, _ in weights]
        totals = [
            t
            for r in reviews
            if (t := weighted_total([(w, r.get(pk)) for pk, w in weights])) is not None
        ]
        out.append(
            CandidateRow(
                submission=s,
                cells=cells,
                totals=totals,
                reviewers=sorted(review_of[r][1] for r in reviews_of[s.pk]),
                checks={g: dict(v) for g, v in checks[s.pk].items()},
            )
        )
    if sort == "name":
        out.sort(key=lambda c: c.name.lower())
    else:
        out.sort(key=lambda c: (c.total is None, -(c.total or 0), c.name.lower()))
    return rubric_rows, out


def comparison_csv(rubric_rows: list[RubricRow], rows: list[CandidateRow]) -> str:
    """The comparison as CSV: candidate, each row's mean and spread, total, reviewers."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    header = ["candidate", "submission"]
    for row in rubric_rows:
        header += [f"{row.title} (mean)", f"{row.title} (spread)"]
    header += ["weighted total", "reviews", "reviewers", "flaws found", "could not run"]
    writer.writerow(header)
    for c in rows:
        line = [_csv_safe(c.name), c.submission.pk]
        for cell in c.cells:
            line += ["" if cell.mean is None else cell.mean, cell.spread]
        line += ["" if c.total is None else c.total, len(c.totals), " ".join(c.reviewers)]
        # `error` (a check that could not run) is never counted as a flaw.
        line += [_status_total(c.checks, "fail"), _status_total(c.checks, "error")]
        writer.writerow(line)
    return buffer.getvalue()


def _status_total(groups: dict[str, dict[str, int]], status: str) -> int:
    return sum(counts.get(status, 0) for counts in groups.values())


def _csv_safe(text: str) -> str:
    """Neutralise spreadsheet formulas in names that came from uploads."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def chart_bars(rows: list[CandidateRow], width: int = 600, bar: int = 22) -> list[dict]:
    """Bar geometry for the inline SVG chart of weighted totals (out of 100)."""
    bars = []
    for i, c in enumerate(rows):
        total = c.total or 0
        bars.append(
            {
                "y": i * (bar + 6),
                "width": round(total / 100 * (width - 180), 1),
                "label": c.name,
                "total": c.total,
                "text_y": i * (bar + 6) + bar - 6,
            }
        )
    return bars


def assignment_rows(
    user: object, assignment: Assignment, submissions: list[Submission]
) -> list[dict]:
    """Rows of the assignment page: badges per check group, a score the user may see, reviews.

    Blind scoring holds here too: a reviewer sees only their own total until they submit;
    hiring leads see the mean of all reviews. Three queries whatever the page size.
    """
    from submissions.roles import is_hiring_lead

    ids = [s.pk for s in submissions]
    template = RubricTemplate.objects.filter(slug=assignment.rubric).first()
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
    lead = is_hiring_lead(user)
    me = getattr(user, "pk", None)
    out = []
    for s in submissions:
        mine = [r for r in reviews[s.pk] if r[1] == me]
        submitted = any(state == "submitted" for _, _, state in mine)
        visible = reviews[s.pk] if (lead or submitted) else mine
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
