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
from collections.abc import Collection
from itertools import combinations
from statistics import mean
from typing import Any

MIN_SHARED = 5
CATEGORIES = [0, 1, 2, 3]
FLAG_ROW_POINTS = 2  # reviewers this far apart on one row: flagged
FLAG_TOTAL_POINTS = 20  # or this far apart on the weighted total (out of 100)

Units = dict[tuple[int, int], dict[str, int]]  # (submission, row) -> reviewer -> score


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


# Krippendorff's own guide ("Content Analysis", 2004): rely on alpha >= .800, draw only
# tentative conclusions from .667 <= alpha < .800, and none below .667.
ALPHA_RELIABLE = 0.800
ALPHA_TENTATIVE = 0.667
MOST_DISAGREEMENT = 20  # units listed for the next calibration session


def spread(values: Collection[int]) -> int:
    """Highest minus lowest of one unit's scores; 0 with fewer than two."""
    return max(values) - min(values) if len(values) >= 2 else 0


def paired_count(units: Units) -> int:
    """Units scored by two or more reviewers: the ones an agreement figure can use."""
    return sum(len(scores) >= 2 for scores in units.values())


def alpha_reason(units: Units) -> str | None:
    """Why alpha_ordinal(units) is undefined, in words; None when nothing rules it out."""
    reviewers = {r for scores in units.values() for r in scores}
    if not units:
        return "no submitted scores yet"
    if len(reviewers) < 2:
        return "only one reviewer has submitted scores"
    paired = [scores for scores in units.values() if len(scores) >= 2]
    if not paired:
        return "no unit was scored by two or more reviewers"
    values = {v for scores in paired for v in scores.values()}
    if len(values) < 2:
        return f"no variation: every score on units with two or more reviewers is {values.pop()}"
    return None


def alpha_reading(value: float | None) -> str:
    """Krippendorff's guide, in words."""
    if value is None:
        return "not defined"
    if value >= ALPHA_RELIABLE:
        return "reliable"
    if value >= ALPHA_TENTATIVE:
        return "tentative: draw only tentative conclusions"
    if value < 0:
        return "not reliable: reviewers disagree more than chance would"
    return "not reliable"


def offset_reading(value: float | None) -> str:
    """A mean offset in words: above the others is more lenient, below is harsher."""
    if value is None:
        return "not defined: shares no unit with another reviewer"
    if value > 0:
        return "more lenient than the others"
    if value < 0:
        return "harsher than the others"
    return "in line with the others"


def shared_counts(units: Units) -> list[dict[str, Any]]:
    """Every reviewer pair and the number of units both scored (0 included)."""
    reviewers = sorted({r for scores in units.values() for r in scores})
    return [
        {"a": a, "b": b, "n": sum(a in s and b in s for s in units.values())}
        for a, b in combinations(reviewers, 2)
    ]


def threes(units: Units) -> dict[str, int]:
    """How many 3s each reviewer gave."""
    out: dict[str, int] = {}
    for scores in units.values():
        for reviewer, value in scores.items():
            out[reviewer] = out.get(reviewer, 0) + (value == 3)
    return out


def row_spreads(units: Units) -> dict[int, dict[str, Any]]:
    """Per rubric row id: units scored, units paired, the mean spread (highest minus
    lowest) over the paired ones, and how many of those are 1 and 2+ points apart."""
    out: dict[int, dict[str, Any]] = {}
    for (_, row_id), scores in units.items():
        entry = out.setdefault(row_id, {"units": 0, "paired": 0, "spreads": []})
        entry["units"] += 1
        if len(scores) >= 2:
            entry["paired"] += 1
            entry["spreads"].append(spread(scores.values()))
    for entry in out.values():
        spreads = entry.pop("spreads")
        entry["mean_spread"] = round(mean(spreads), 4) if spreads else None
        entry["apart"] = sum(s >= 1 for s in spreads)
        entry["flagged"] = sum(s >= FLAG_ROW_POINTS for s in spreads)
    return out


def most_disagreement(
    units: Units, *, limit: int = MOST_DISAGREEMENT, tiebreak: Any = None
) -> list[tuple[tuple[int, int], int]]:
    """The units whose reviewers are at least a point apart, widest first, then by
    `tiebreak(unit)` (the unit itself by default); at most `limit` of them."""
    apart = [
        (unit, spread(scores.values()))
        for unit, scores in units.items()
        if spread(scores.values()) >= 1
    ]
    apart.sort(key=lambda item: (-item[1], tiebreak(item[0]) if tiebreak else item[0]))
    return apart[:limit]
