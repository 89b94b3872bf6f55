"""Calibration figures for hiring leads: one assignment's agreement, and each reviewer
across assignments. Units are (submission, rubric row) pairs scored 0–3 in submitted reviews."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from reviewer.cohort import agreement
from reviewer.cohort.agreement import MIN_SHARED, Units
from reviewer.cohort.cohort import (
    RECOMMENDATIONS,
    Cohort,
    Recommendation,
    recommendation_agreement,
    recommendation_text,
    recommendations_by_assignment,
    units_by_assignment,
)
from submissions.models import Assignment

KAPPA_UNDEFINED = "not defined: both reviewers gave one and the same score on every shared unit"


def _level(reading: str) -> str:
    """A class name for the reading (the words carry the meaning; colour only repeats it)."""
    for level in ("reliable", "tentative", "not defined", "too few"):
        if reading.startswith(level):
            return level.replace(" ", "-")
    return "unreliable"


def _agreement_figure(figures: dict[str, agreement.Figure], units: Units) -> dict[str, Any]:
    """Alpha and AC2 with their intervals and units, alpha's reading and, when alpha is
    undefined, why."""
    alpha = figures["alpha"]
    return {
        "alpha": alpha,
        "ac2": figures["ac2"],
        "reading": alpha.reading,
        "level": _level(alpha.reading),
        "reason": (agreement.alpha_reason(units) or "the data cannot define it")
        if alpha.value is None
        else "",
        "units": len(units),
        "paired": agreement.paired_count(units),
    }


def _pairs(pairs: list[dict[str, Any]], units: Units) -> dict[str, Any]:
    """The pair table, and the pairs too thinly shared for a kappa."""
    return {
        "pairs": [
            {**p, "reason": KAPPA_UNDEFINED if p["weighted_kappa"] is None else ""} for p in pairs
        ],
        "thin_pairs": [p for p in agreement.shared_counts(units) if p["n"] < MIN_SHARED],
        "min_shared": MIN_SHARED,
    }


def _reviewers(calibration: list[dict[str, Any]], units: Units) -> list[dict[str, Any]]:
    threes = agreement.threes(units)
    return [
        {
            **r,
            "threes": threes.get(r["reviewer"], 0),
            "reading": agreement.offset_reading(r["mean_offset"]),
        }
        for r in calibration
    ]


def recommendation_spread(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each reviewer's recommendations, level by level in the model's order (strong no
    first), from (reviewer, recommendation) pairs of submitted reviews; "" is none given."""
    by_reviewer: dict[str, list[str]] = defaultdict(list)
    for who, value in pairs:
        by_reviewer[who].append(value)
    out = []
    for who, values in sorted(by_reviewer.items()):
        out.append(
            {
                "reviewer": who,
                "levels": [(level.label, values.count(level.value)) for level in Recommendation],
                "none": sum(1 for v in values if v not in RECOMMENDATIONS),
                "reviews": len(values),
            }
        )
    return out


def recommendation_agreements(cohort: Cohort) -> dict[str, Any]:
    """Whether each candidate's reviewers agree on the recommendation: the candidates with
    two or more recommendations, counted by reading, and the split ones named."""
    readings: dict[str, int] = {"agree": 0, "same side": 0, "split": 0}
    split = []
    for c in cohort.candidates:
        reading = recommendation_agreement(c.recommendations)
        if reading in readings:
            readings[reading] += 1
        if reading == "split":
            split.append({"candidate": c, "text": recommendation_text(c.recommendations)})
    return {"readings": readings, "compared": sum(readings.values()), "split": split}


def calibration_figures(cohort: Cohort) -> dict[str, Any]:
    """Everything the assignment page shows, from the cohort's own figures."""
    units = cohort.units
    figures = cohort.agreement
    spreads = agreement.row_spreads(units)
    rows = []
    for row in cohort.rows:
        row_units = {u: s for u, s in units.items() if u[1] == row.pk}
        spread = spreads.get(row.pk, {})
        rows.append(
            {
                "row": row,
                **_agreement_figure(cohort.row_figures[row.pk], row_units),
                "mean_spread": spread.get("mean_spread"),
                "apart": spread.get("apart", 0),
                "flagged": spread.get("flagged", 0),
            }
        )
    top = max((r["mean_spread"] or 0 for r in rows), default=0)
    widest = [r for r in rows if top and r["mean_spread"] == top]  # every row tied first

    where = {(c.submission.pk, r.row.pk): (c, r) for c in cohort.candidates for r in c.ranges}
    rank = {row.pk: i for i, row in enumerate(cohort.rows)}
    listed = agreement.most_disagreement(
        {u: s for u, s in units.items() if u in where},
        tiebreak=lambda u: (where[u][0].name, u[0], rank[u[1]]),
    )
    disagreements = [
        {
            "candidate": where[unit][0],
            "row": where[unit][1].row,
            "apart": apart,
            "flagged": apart >= agreement.FLAG_ROW_POINTS,
            "scores": sorted(where[unit][1].by_reviewer.items()),
        }
        for unit, apart in listed
    ]
    return {
        "overall": _agreement_figure(cohort.figures, units),
        "rows": rows,
        "widest": widest,
        **_pairs(figures["pairs"], units),
        "reviewers": _reviewers(cohort.calibration, units),
        "disagreements": disagreements,
        "disagreement_limit": agreement.MOST_DISAGREEMENT,
        "drafts": sum(len(c.drafts) for c in cohort.candidates),
        "min_units": agreement.MIN_UNITS_TO_READ,
        "levels": Recommendation.labels,
        "recommendations": recommendation_spread(
            [(r.reviewer, r.recommendation) for c in cohort.candidates for r in c.reviews]
        ),
        "recommendation_agreement": recommendation_agreements(cohort),
    }


def reviewers_across(selected: list[Assignment]) -> dict[str, Any]:
    """Each reviewer over the selected assignments: offsets per assignment and pooled, share
    of 3s, and the pooled pair kappas, in a fixed number of queries."""
    per_assignment = units_by_assignment(selected)
    # (submission, row) is unique across assignments, so pooling is a plain union.
    pooled: Units = {u: s for units in per_assignment.values() for u, s in units.items()}
    breakdown: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for a in selected:
        units = per_assignment[a.pk]
        for entry in _reviewers(agreement.reviewer_calibration(units), units):
            breakdown[entry["reviewer"]].append({"assignment": a, **entry})
    reviewers = [
        {**r, "assignments": breakdown[r["reviewer"]]}
        for r in _reviewers(agreement.reviewer_calibration(pooled), pooled)
    ]
    given = recommendations_by_assignment(selected)
    return {
        "levels": Recommendation.labels,
        "recommendations": recommendation_spread([p for a in selected for p in given[a.pk]]),
        "units": len(pooled),
        "paired": agreement.paired_count(pooled),
        "reviewers": reviewers,
        **_pairs(agreement.pair_kappas(pooled), pooled),
    }
