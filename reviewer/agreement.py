"""Reviewer agreement and calibration for one assignment, from submitted reviews.

Units are (submission, rubric row) pairs scored 0–3 in submitted reviews. Krippendorff's
alpha (ordinal) comes from the `krippendorff` package, over all units and per row; the
quadratic-weighted Cohen's kappa of each reviewer pair with at least MIN_SHARED shared
units comes from scikit-learn. Each reviewer's mean offset is their score minus the mean of
the others' on the same unit, averaged over the units they share; share_of_3 is the share
of their scores that are 3. A figure that the data cannot define (one reviewer, no
variation) is None, never a number that looks measured.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from statistics import mean
from typing import Any

from reviewer.models import RubricRow, RubricTemplate, Score
from reviewer.report import weighted_total
from submissions.models import Assignment, Submission

MIN_SHARED = 5
CATEGORIES = [0, 1, 2, 3]
FLAG_ROW_POINTS = 2  # reviewers this far apart on one row: flagged
FLAG_TOTAL_POINTS = 20  # or this far apart on the weighted total (out of 100)

Units = dict[tuple[int, int], dict[str, int]]  # (submission, row) -> reviewer -> score


@dataclass
class CohortData:
    """The submitted scores of an assignment, as the figures and the table need them."""

    assignment: Assignment
    rows: list[RubricRow]
    submissions: list[Submission]
    units: Units = field(default_factory=dict)


def cohort_data(assignment: Assignment) -> CohortData:
    """Latest submission per candidate and every submitted score (three queries)."""
    template = RubricTemplate.objects.filter(slug=assignment.rubric).first()
    rows = list(template.rows.all()) if template else []
    latest: dict[int, Submission] = {}
    for s in (
        Submission.objects.filter(assignment=assignment)
        .exclude(status=Submission.Status.REJECTED)
        .select_related("candidate")
        .order_by("candidate_id", "-created")
    ):
        latest.setdefault(s.candidate_id, s)
    submissions = sorted(latest.values(), key=lambda s: (s.candidate.name, s.pk))
    units: Units = defaultdict(dict)
    scores = Score.objects.filter(
        review__submission__in=submissions, review__state="submitted", value__isnull=False
    ).values_list("review__submission_id", "row_id", "review__reviewer__username", "value")
    for submission_id, row_id, reviewer, value in scores:
        units[(submission_id, row_id)][reviewer] = value
    return CohortData(assignment, rows, submissions, dict(units))


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), 4)


def alpha_ordinal(units: Units, domain: list[int] = CATEGORIES) -> float | None:
    """Krippendorff's alpha, ordinal, over these units (None when undefined)."""
    import krippendorff
    import numpy as np

    reviewers = sorted({r for scores in units.values() for r in scores})
    pairable = [u for u, scores in units.items() if len(scores) >= 2]
    if len(reviewers) < 2 or not pairable:
        return None
    data = np.array([[units[u].get(r, np.nan) for u in pairable] for r in reviewers], dtype=float)
    if len({v for u in pairable for v in units[u].values()}) < 2:
        return None  # no variation at all: alpha is 0/0
    value = krippendorff.alpha(
        reliability_data=data, level_of_measurement="ordinal", value_domain=domain
    )
    return _finite(value)


def pair_kappas(units: Units) -> list[dict[str, Any]]:
    """Quadratic-weighted kappa of each reviewer pair with MIN_SHARED shared units."""
    from sklearn.metrics import cohen_kappa_score

    reviewers = sorted({r for scores in units.values() for r in scores})
    out = []
    for a, b in combinations(reviewers, 2):
        shared = [u for u, scores in units.items() if a in scores and b in scores]
        if len(shared) < MIN_SHARED:
            continue
        left = [units[u][a] for u in shared]
        right = [units[u][b] for u in shared]
        if len(set(left) | set(right)) < 2:
            kappa = None  # both gave one and the same score throughout: undefined
        else:
            kappa = _finite(cohen_kappa_score(left, right, weights="quadratic", labels=CATEGORIES))
        out.append({"a": a, "b": b, "n": len(shared), "weighted_kappa": kappa})
    return out


def reviewer_calibration(units: Units) -> list[dict[str, Any]]:
    """Each reviewer's units, mean offset from the others, and share of 3s."""
    reviewers = sorted({r for scores in units.values() for r in scores})
    out = []
    for reviewer in reviewers:
        mine = [scores[reviewer] for scores in units.values() if reviewer in scores]
        offsets = [
            scores[reviewer] - mean(v for r, v in scores.items() if r != reviewer)
            for scores in units.values()
            if reviewer in scores and len(scores) >= 2
        ]
        out.append(
            {
                "reviewer": reviewer,
                "n": len(mine),
                "mean_offset": round(mean(offsets), 4) if offsets else None,
                "share_of_3": round(mine.count(3) / len(mine), 4) if mine else None,
            }
        )
    return out


def cohort_json(assignment: Assignment) -> dict[str, Any]:
    """The machine-readable cohort: candidates, their reviews, agreement, calibration."""
    data = cohort_data(assignment)
    weights = [(row.pk, row.title, row.weight) for row in data.rows]
    candidates = []
    for s in data.submissions:
        by_reviewer: dict[str, dict[str, int]] = defaultdict(dict)
        for row_id, title, _ in weights:
            for reviewer, value in data.units.get((s.pk, row_id), {}).items():
                by_reviewer[reviewer][title] = value
        reviews = []
        for reviewer, rows in sorted(by_reviewer.items()):
            values = {title: rows.get(title) for _, title, _ in weights}
            total = weighted_total([(w, values[t]) for _, t, w in weights])
            reviews.append({"reviewer": reviewer, "total": total, "rows": rows})
        totals = [r["total"] for r in reviews if r["total"] is not None]
        flagged = bool(totals) and (max(totals) - min(totals) >= FLAG_TOTAL_POINTS)
        for row_id, _, _ in weights:
            scores = data.units.get((s.pk, row_id), {})
            apart = max(scores.values()) - min(scores.values()) if len(scores) >= 2 else 0
            flagged = flagged or apart >= FLAG_ROW_POINTS
        candidates.append(
            {
                "candidate": s.candidate.name,
                "submission": s.pk,
                "status": s.status,
                "reviews": reviews,
                "mean": round(mean(totals), 1) if totals else None,
                "min": min(totals) if totals else None,
                "max": max(totals) if totals else None,
                "flagged": flagged,
            }
        )
    rows_alpha = {
        title: alpha_ordinal({u: v for u, v in data.units.items() if u[1] == row_id})
        for row_id, title, _ in weights
    }
    return {
        "assignment": assignment.slug,
        "candidates": candidates,
        "agreement": {
            "alpha_ordinal": alpha_ordinal(data.units),
            "pairs": pair_kappas(data.units),
            "rows": rows_alpha,
        },
        "reviewers": reviewer_calibration(data.units),
    }
