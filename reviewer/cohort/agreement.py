"""Reviewer agreement and calibration for one assignment, from submitted reviews.

Units are (submission, rubric row) pairs scored 0–3 in submitted reviews. Krippendorff's
alpha (ordinal) comes from the `krippendorff` package, over all units and per row; the
quadratic-weighted Cohen's kappa of each reviewer pair with at least MIN_SHARED shared
units comes from scikit-learn. Each reviewer's mean offset is their score minus the mean of
the others' on the same unit, averaged over the units they share; share_of_3 is the share
of their scores that are 3. A figure that the data cannot define (one reviewer, no
variation) is None, never a number that looks measured.

Every figure a page reads comes with its uncertainty (`Figure`): the units it stands on and a
95 % bootstrap interval over units (BOOTSTRAP_RESAMPLES resamples, a fixed seed so a page
shows the same interval twice). Gwet's AC2 with ordinal weights stands beside alpha: it
does not collapse when nearly every score is the same, as kappa-type figures do. A reading
("reliable", "tentative") is given only when the whole interval supports it and at least
MIN_UNITS_TO_READ units were scored by two or more reviewers.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from itertools import combinations
from statistics import mean
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MIN_SHARED = 5
CATEGORIES = [0, 1, 2, 3]
FLAG_ROW_POINTS = 2  # reviewers this far apart on one row: flagged
FLAG_TOTAL_POINTS = 20  # or this far apart on the weighted total (out of 100)

Units = dict[tuple[int, int], dict[str, int]]  # (submission, row) -> reviewer -> score


# The scientific stack this module imports inside its functions, so a management command or
# a test that never computes a figure does not pay for it (scikit-learn alone is ~1 s).
HEAVY_IMPORTS = ("numpy", "krippendorff", "sklearn.metrics")


def warm() -> None:
    """Import the scientific stack now, so the first figure a web process serves does not
    wait for it (called from the app's ready() in web processes only)."""
    import importlib

    for name in HEAVY_IMPORTS:
        importlib.import_module(name)


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
            scores[reviewer] - _mean_of_others(scores, reviewer)
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


def _mean_of_others(scores: dict[Any, Any], reviewer: Any) -> Any:
    """`statistics.mean` of the other reviewers' scores, the same value of the same type.

    Scores are ints: their mean is an int when the division is exact, else int / int (as
    correctly rounded as mean's exact fraction). mean's exact arithmetic cost half a second
    of a 1,000-candidate calibration page; anything but ints still goes to it.
    """
    others = [v for r, v in scores.items() if r != reviewer]
    if not all(type(v) is int for v in others):
        return mean(others)
    total, count = sum(others), len(others)
    return total // count if total % count == 0 else total / count


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


# ------------------------------------------------------------------ uncertainty

MIN_UNITS_TO_READ = 10  # units with two or more reviewers before any reading is given
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20261204  # fixed: the same scores always give the same interval
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Figure:
    """One agreement figure: the estimate, its 95 % bootstrap interval, the units scored by
    two or more reviewers it stands on, and what may be read from it."""

    value: float | None
    low: float | None
    high: float | None
    units: int
    reading: str

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "ci95": [self.low, self.high] if self.low is not None else None,
            "units": self.units,
            "reading": self.reading,
        }


def _counts(units: Units, domain: list[int]) -> np.ndarray:
    """One row per unit, one column per category: how many reviewers gave it."""
    import numpy as np

    index = {value: i for i, value in enumerate(domain)}
    out = np.zeros((len(units), len(domain)))
    for row, scores in enumerate(units.values()):
        for value in scores.values():
            out[row, index[value]] += 1
    return out


def ordinal_weights(q: int) -> np.ndarray:
    """Gwet's ordinal weights: 1 - C(|k-l|+1, 2) / C(q, 2) (Handbook of Inter-Rater
    Reliability, 4th ed., ch. 3)."""
    import numpy as np

    k = np.arange(q)
    d = np.abs(k[:, None] - k[None, :])
    m = (d + 1) * d / 2
    return 1 - m / m.max() if q > 1 else np.ones((1, 1))


def _ac2_parts(
    counts: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per unit: its share of agreement (0 with fewer than two ratings), whether it has two
    or more ratings, and its category shares; AC2 of any resample is built from these."""
    import numpy as np

    r = counts.sum(axis=1)
    weighted = counts @ weights.T
    paired = r >= 2
    pa = np.zeros(len(counts))
    pa[paired] = (counts[paired] * (weighted[paired] - 1)).sum(axis=1) / (
        r[paired] * (r[paired] - 1)
    )
    shares = counts / np.where(r > 0, r, 1)[:, None]
    return pa, paired.astype(float), shares


def _ac2_from(
    pa: np.ndarray, paired: np.ndarray, shares: np.ndarray, weights: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """Gwet's AC2 for a batch of unit weightings `n` (rows: resamples, columns: units)."""
    import numpy as np

    q = weights.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_a = (n @ pa) / (n @ paired)
        pi = (n @ shares) / n.sum(axis=1, keepdims=True)
        p_e = weights.sum() * (pi * (1 - pi)).sum(axis=1) / (q * (q - 1))
        return (p_a - p_e) / (1 - p_e)


def ac2_ordinal(units: Units, domain: list[int] = CATEGORIES) -> float | None:
    """Gwet's AC2 with ordinal weights over these units (None when undefined)."""
    import numpy as np

    if paired_count(units) == 0 or len({r for s in units.values() for r in s}) < 2:
        return None
    counts = _counts(units, domain)
    weights = ordinal_weights(len(domain))
    value = _ac2_from(*_ac2_parts(counts, weights), weights, np.ones((1, len(counts))))[0]
    return _finite(value)


def _coincidences(counts: np.ndarray) -> np.ndarray:
    """Each pairable unit's coincidence matrix (Krippendorff), flattened: n_uc n_uk / (m_u - 1),
    minus n_uc / (m_u - 1) on the diagonal."""
    import numpy as np

    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :]
    diagonal = np.einsum("uc,ck->uck", counts, np.eye(counts.shape[1]))
    return ((outer - diagonal) / (m - 1)[:, None, None]).reshape(len(counts), -1)


def _alpha_from(coincidence: np.ndarray, q: int) -> np.ndarray:
    """Ordinal alpha for a batch of summed coincidence matrices (rows: resamples)."""
    import numpy as np

    o = coincidence.reshape(-1, q, q)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    cum = np.cumsum(n_c, axis=1)
    # delta^2(c, k) = (sum of n_g for g from c to k - (n_c + n_k) / 2)^2
    lo = np.minimum.outer(np.arange(q), np.arange(q))
    hi = np.maximum.outer(np.arange(q), np.arange(q))
    between = cum[:, hi] - np.where(lo > 0, cum[:, np.maximum(lo - 1, 0)], 0)
    delta = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (o * delta).sum(axis=(1, 2))
        expected = (n_c[:, :, None] * n_c[:, None, :] * delta).sum(axis=(1, 2)) / (n - 1)
        return 1 - observed / expected


def _resamples(n_units: int, seed: int, resamples: int) -> np.ndarray:
    """How often each unit is drawn in each bootstrap resample (rows: resamples)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n_units, size=(resamples, n_units))
    offsets = drawn + n_units * np.arange(resamples)[:, None]
    return (
        np.bincount(offsets.ravel(), minlength=resamples * n_units)
        .reshape(resamples, n_units)
        .astype(float)
    )


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    """The percentile interval of the defined resampled values; None when most are undefined."""
    import numpy as np

    defined = values[np.isfinite(values)]
    if len(defined) < len(values) / 2:
        return None, None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return round(float(low), 4), round(float(high), 4)


def bootstrap_intervals(
    units: Units,
    *,
    domain: list[int] = CATEGORIES,
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
    drawn: dict[tuple[int, int, int], np.ndarray] | None = None,
) -> dict[str, tuple[float | None, float | None]]:
    """95 % percentile intervals of ordinal alpha and AC2, resampling units with
    replacement (the same resamples for both). `drawn`, shared by the caller across calls,
    keeps the resamples of each number of units: they depend on nothing else."""
    if not units:
        return {"alpha": (None, None), "ac2": (None, None)}
    counts = _counts(units, domain)
    key = (len(counts), seed, resamples)
    draws = drawn.get(key) if drawn is not None else None
    if draws is None:
        draws = _resamples(*key)
        if drawn is not None:
            draws.flags.writeable = False  # shared by the next call: read, never written
            drawn[key] = draws
    pairable = counts.sum(axis=1) >= 2
    coincidences = _coincidences(counts[pairable]) if pairable.any() else None
    # Every unit pairable (a cohort scored by two or more): no 1,000-row copy of the draws.
    picked = draws if pairable.all() else draws[:, pairable]
    alpha = (
        _alpha_from(picked @ coincidences, len(domain))
        if coincidences is not None
        else draws[:, 0] * float("nan")
    )
    weights = ordinal_weights(len(domain))
    ac2 = _ac2_from(*_ac2_parts(counts, weights), weights, draws)
    return {"alpha": _interval(alpha), "ac2": _interval(ac2)}


def figure_reading(value: float | None, low: float | None, high: float | None, units: int) -> str:
    """What may be read: Krippendorff's thresholds, applied to the whole interval, and only
    from MIN_UNITS_TO_READ units up."""
    if value is None:
        return "not defined"
    if units < MIN_UNITS_TO_READ:
        return f"too few units to read ({units} of the {MIN_UNITS_TO_READ} needed)"
    if low is None or high is None:
        return "too few units to read: the resamples mostly leave it undefined"
    if low >= ALPHA_RELIABLE:
        return "reliable"
    if low >= ALPHA_TENTATIVE:
        return "tentative: draw only tentative conclusions"
    if high < ALPHA_TENTATIVE:
        if high < 0:
            return "not reliable: reviewers disagree more than chance would"
        return "not reliable"
    return f"too few units to read: the interval runs from {low:.3f} to {high:.3f}"


def figures(
    units: Units, *, drawn: dict[tuple[int, int, int], np.ndarray] | None = None
) -> dict[str, Figure]:
    """Alpha (ordinal) and AC2 (ordinal weights) with their intervals and readings;
    `drawn` as `bootstrap_intervals` takes it."""
    paired = paired_count(units)
    intervals = bootstrap_intervals(units, drawn=drawn)
    out = {}
    for name, value in (("alpha", alpha_ordinal(units)), ("ac2", ac2_ordinal(units))):
        low, high = intervals[name] if value is not None else (None, None)
        out[name] = Figure(value, low, high, paired, figure_reading(value, low, high, paired))
    return out
