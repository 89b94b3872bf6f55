"""Agreement and calibration figures, against reference values computed independently:
Krippendorff's worked example (2011, "Computing Krippendorff's Alpha-Reliability": 4
observers, 12 units, missing values; ordinal alpha 0.815) and a weighted kappa worked out
by hand from its definition here."""

from __future__ import annotations

import io
import json
from io import StringIO
from itertools import product
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from reviewer.cohort.agreement import MIN_SHARED, alpha_ordinal, pair_kappas, reviewer_calibration
from reviewer.models import Review, RubricTemplate, Score
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate
from tests.conftest import make_zip

PAPER = {  # observer -> values of units 1..12 (None: not coded)
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def _units(table: dict[str, list]) -> dict:
    units: dict = {}
    for observer, values in table.items():
        for i, value in enumerate(values):
            if value is not None:
                units.setdefault((i, 0), {})[observer] = value
    return units


def test_alpha_ordinal_matches_krippendorffs_worked_example() -> None:
    assert alpha_ordinal(_units(PAPER), domain=[1, 2, 3, 4, 5]) == pytest.approx(0.815, abs=5e-4)


def test_alpha_is_none_when_the_data_cannot_define_it() -> None:
    assert alpha_ordinal(_units({"A": [2, 2, 2]})) is None  # one reviewer
    assert alpha_ordinal(_units({"A": [2, 2], "B": [2, 2]})) is None  # no variation


def _kappa_by_hand(a: list[int], b: list[int]) -> float:
    """1 - sum(w * observed) / sum(w * expected), w = (i - j)^2, over categories 0..3."""
    n = len(a)
    observed = {(i, j): 0.0 for i, j in product(range(4), repeat=2)}
    for x, y in zip(a, b, strict=True):
        observed[(x, y)] += 1 / n
    pa = [a.count(i) / n for i in range(4)]
    pb = [b.count(i) / n for i in range(4)]
    num = sum((i - j) ** 2 * observed[(i, j)] for i, j in observed)
    den = sum((i - j) ** 2 * pa[i] * pb[j] for i, j in observed)
    return 1 - num / den


def test_weighted_kappa_matches_its_definition_and_needs_five_shared_units() -> None:
    a = [0, 1, 2, 3, 3, 2, 1]
    b = [0, 1, 3, 3, 2, 2, 0]
    c = [3, 3, 3]  # only three units shared with the others: no kappa
    units = {(i, 0): {"ann": a[i], "ben": b[i]} for i in range(len(a))}
    for i, v in enumerate(c):
        units[(i, 0)]["cy"] = v
    (pair,) = pair_kappas(units)
    assert (pair["a"], pair["b"], pair["n"]) == ("ann", "ben", len(a))
    assert pair["weighted_kappa"] == pytest.approx(_kappa_by_hand(a, b), abs=1e-4)
    assert MIN_SHARED == 5


def test_each_reviewers_offset_and_share_of_threes() -> None:
    units = {
        (1, 0): {"ann": 3, "ben": 1},
        (2, 0): {"ann": 3, "ben": 2, "cy": 1},
        (3, 0): {"ann": 2},
    }
    got = {r["reviewer"]: r for r in reviewer_calibration(units)}
    # ann: (3 - 1) and (3 - mean(2, 1)) -> mean(2, 1.5) = 1.75; 2 of her 3 scores are 3s.
    assert got["ann"] == {"reviewer": "ann", "n": 3, "mean_offset": 1.75, "share_of_3": 0.6667}
    # ben: (1 - 3) and (2 - mean(3, 1)) -> mean(-2, 0) = -1.
    assert got["ben"]["mean_offset"] == -1 and got["ben"]["share_of_3"] == 0


def test_offsets_keep_the_values_and_types_statistics_mean_gives() -> None:
    """The offsets' fast mean of the others' scores is statistics.mean's value and type (an
    int when exact): the JSON of the calibration figures does not change by a character."""
    import random
    from statistics import mean

    def reference(units):  # the figures as computed with statistics.mean throughout
        out = []
        for who in sorted({r for scores in units.values() for r in scores}):
            mine = [scores[who] for scores in units.values() if who in scores]
            offsets = [
                scores[who] - mean(v for r, v in scores.items() if r != who)
                for scores in units.values()
                if who in scores and len(scores) >= 2
            ]
            out.append(
                {
                    "reviewer": who,
                    "n": len(mine),
                    "mean_offset": round(mean(offsets), 4) if offsets else None,
                    "share_of_3": round(mine.count(3) / len(mine), 4) if mine else None,
                }
            )
        return out

    rng = random.Random(32)
    people = ["ann", "ben", "cy", "dee", "eve", "fay", "gus"]
    for _ in range(300):
        units = {
            (u, 0): {r: rng.randint(0, 3) for r in rng.sample(people, rng.randint(1, 7))}
            for u in range(rng.randint(1, 12))
        }
        assert json.dumps(reviewer_calibration(units)) == json.dumps(reference(units))


@pytest.fixture
def cohort(assignment, reviewer, reviewer2, lead):
    rubric = RubricTemplate.objects.get(slug="cassette")
    rows = list(rubric.rows.all())
    plan = {  # candidate -> (alice's scores, bob's scores) on every row
        "Ann": (3, 3), "Ben": (3, 0), "Cy": (2, 2), "Dee": (1, 2), "Eve": (0, 1), "Fay": (2, 3),
    }  # fmt: skip
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name, values in plan.items():
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": name})), filename="c.zip",
                candidate=Candidate.objects.create(name=name), assignment=assignment,
            ).submission  # fmt: skip
            for user, value in zip((reviewer, reviewer2), values, strict=True):
                review = Review.objects.create(
                    submission=s, reviewer=user, rubric=rubric, state="submitted"
                )
                Score.objects.bulk_create([Score(review=review, row=r, value=value) for r in rows])
    # A draft counts for nothing.
    draft = Review.objects.create(submission=s, reviewer=lead, rubric=rubric)
    Score.objects.bulk_create([Score(review=draft, row=r, value=0) for r in rows])
    return plan, rows


def test_the_cohort_command_prints_the_figures_with_sorted_keys(assignment, cohort) -> None:
    plan, rows = cohort
    out = StringIO()
    call_command("cohort", assignment.slug, "--format", "json", stdout=out)
    text = out.getvalue()
    doc = json.loads(text)
    assert text == json.dumps(doc, sort_keys=True, indent=2) + "\n"
    assert set(doc) == {"agreement", "assignment", "candidates", "reviewers"}
    by_name = {c["candidate"]: c for c in doc["candidates"]}
    ben = by_name["Ben"]
    assert [r["reviewer"] for r in ben["reviews"]] == ["alice", "bob"]  # the draft left out
    assert (ben["min"], ben["max"], ben["mean"]) == (0.0, 100.0, 50.0) and ben["flagged"]
    assert by_name["Cy"]["flagged"] is False  # the same scores
    # One point apart on every row is 33.3 apart in total: flagged by the total rule.
    assert by_name["Dee"]["flagged"] is True and by_name["Dee"]["max"] - by_name["Dee"]["min"] > 20
    assert all(set(r["rows"]) == {row.title for row in rows} for r in ben["reviews"])
    (pair,) = doc["agreement"]["pairs"]
    assert (pair["a"], pair["b"], pair["n"]) == ("alice", "bob", 6 * len(rows))
    alice = [plan[c][0] for c in sorted(plan) for _ in rows]
    bob = [plan[c][1] for c in sorted(plan) for _ in rows]
    assert pair["weighted_kappa"] == pytest.approx(_kappa_by_hand(alice, bob), abs=1e-4)
    assert -1 <= doc["agreement"]["alpha_ordinal"] <= 1
    assert set(doc["agreement"]["rows"]) == {row.title for row in rows}
    reviewers = {r["reviewer"]: r for r in doc["reviewers"]}
    # alice minus bob on each candidate: 0, 3, 0, -1, -1, -1 -> mean 0.
    assert reviewers["alice"]["mean_offset"] == 0 and reviewers["bob"]["mean_offset"] == 0
    assert reviewers["alice"]["share_of_3"] == pytest.approx(2 / 6, abs=1e-4)


def test_an_unknown_assignment_is_a_clear_error(db) -> None:
    with pytest.raises(CommandError, match="no assignment 'nope'"):
        call_command("cohort", "nope")


# Gwet's AC2 on the same 12 units (Gwet, "Handbook of Inter-Rater Reliability", 4th ed., the
# `cac.raw4raters` data of his irrCAC package, which is Krippendorff's example above): AC1
# (identity weights) 0.77544 with pa 0.81818 and pe 0.19032, as the handbook prints it; AC2
# with ordinal weights 0.89894 (pa 0.96818, pe 0.68516), as irrCAC computes it.
def test_ac2_matches_gwets_worked_example() -> None:
    import numpy as np

    from reviewer.cohort import agreement

    units = _units(PAPER)
    domain = [1, 2, 3, 4, 5]
    counts = agreement._counts(units, domain)
    identity = np.eye(5)
    pa, paired, shares = agreement._ac2_parts(counts, identity)
    ac1 = agreement._ac2_from(pa, paired, shares, identity, np.ones((1, len(counts))))[0]
    assert ac1 == pytest.approx(0.77544, abs=5e-6)
    assert agreement.ac2_ordinal(units, domain=domain) == pytest.approx(0.89894, abs=5e-5)
    assert agreement.ordinal_weights(5)[0].tolist() == pytest.approx([1, 0.9, 0.7, 0.4, 0])


def test_the_bootstraps_alpha_is_the_librarys_alpha_on_every_resample() -> None:
    """The vectorised alpha behind the interval equals the `krippendorff` package's on the
    data and on each resample drawn with the seed, so the interval is the library's too."""
    import krippendorff
    import numpy as np

    from reviewer.cohort import agreement

    rng = np.random.default_rng(3)
    units = {
        (u, 0): {r: int(rng.integers(0, 4)) for r in "abc" if rng.random() < 0.8} for u in range(40)
    }
    units = {u: s for u, s in units.items() if s}
    domain = agreement.CATEGORIES
    counts = agreement._counts(units, domain)
    pairable = counts.sum(axis=1) >= 2
    draws = agreement._resamples(len(counts), seed=11, resamples=25)
    ours = agreement._alpha_from(draws[:, pairable] @ agreement._coincidences(counts[pairable]), 4)
    keys = list(units)
    for row, draw in zip(ours, draws, strict=True):
        picked = [keys[i] for i, k in enumerate(draw) for _ in range(int(k))]
        table = np.array([[units[u].get(r, np.nan) for u in picked] for r in "abc"], dtype=float)
        theirs = krippendorff.alpha(
            reliability_data=table, level_of_measurement="ordinal", value_domain=domain
        )
        assert row == pytest.approx(theirs, abs=1e-9)
    whole = agreement._alpha_from(agreement._coincidences(counts[pairable]).sum(axis=0)[None], 4)
    assert whole[0] == pytest.approx(agreement.alpha_ordinal(units), abs=1e-4)


def test_shared_resamples_give_each_rows_figures_as_drawn_alone() -> None:
    """Cohort.row_figures shares one set of resamples among rows with as many units: each
    row's figures equal those computed on their own, and a row of another size draws its
    own."""
    import numpy as np

    from reviewer.cohort import agreement

    rng = np.random.default_rng(5)
    rows = {
        row: {
            (u, row): {r: int(rng.integers(0, 4)) for r in "abc" if rng.random() < 0.9}
            for u in range(size)
        }
        for row, size in ((1, 60), (2, 60), (3, 60), (4, 35))
    }
    drawn: dict = {}
    for units in rows.values():
        units = {u: s for u, s in units.items() if s}
        assert agreement.figures(units, drawn=drawn) == agreement.figures(units)
    assert sorted(n for n, _, _ in drawn) == sorted({len(u) for u in rows.values()})


def test_an_interval_is_seeded_and_holds_its_estimate() -> None:
    from reviewer.cohort import agreement

    units = _units(PAPER)
    domain = [1, 2, 3, 4, 5]
    first = agreement.bootstrap_intervals(units, domain=domain)
    assert first == agreement.bootstrap_intervals(units, domain=domain)
    low, high = first["alpha"]
    assert low < 0.815 < high <= 1
    low, high = first["ac2"]
    assert low < 0.89894 < high <= 1


def test_no_reading_from_two_units_however_high() -> None:
    """Two units in full agreement once read 'reliable'; now they are too few to read."""
    from reviewer.cohort import agreement

    units = {(1, 0): {"a": 3, "b": 3}, (2, 0): {"a": 0, "b": 0}}
    figures = agreement.figures(units)
    assert figures["alpha"].value == 1.0
    assert figures["alpha"].units == 2
    assert figures["alpha"].reading.startswith("too few units to read (2 of the 10")
    many = {(i, 0): {"a": i % 4, "b": i % 4, "c": i % 4} for i in range(40)}
    assert agreement.figures(many)["alpha"].reading == "reliable"
    assert agreement.figures(many)["ac2"].reading == "reliable"
    split = {(i, 0): {"a": i % 4, "b": (i * 7 + 1) % 4} for i in range(40)}
    assert agreement.figures(split)["alpha"].reading.startswith("not reliable")


def test_an_all_pairable_cohort_resamples_without_a_copy_to_the_same_intervals() -> None:
    """bootstrap_intervals multiplies the draws themselves when every unit is pairable: the
    resampled alphas equal, bit for bit, those of the column-picked copy it made before."""
    import numpy as np

    from reviewer.cohort import agreement

    rng = np.random.default_rng(9)
    units = {(u, 0): {r: int(rng.integers(0, 4)) for r in "abc"} for u in range(300)}
    counts = agreement._counts(units, agreement.CATEGORIES)
    pairable = counts.sum(axis=1) >= 2
    assert pairable.all()
    draws = agreement._resamples(len(counts), agreement.BOOTSTRAP_SEED, 200)
    coincidences = agreement._coincidences(counts)
    picked = agreement._alpha_from(draws[:, pairable] @ coincidences, 4)
    assert np.array_equal(agreement._alpha_from(draws @ coincidences, 4), picked, equal_nan=True)
    low, high = agreement.bootstrap_intervals(units, resamples=200)["alpha"]
    tail = (1 - agreement.CONFIDENCE) / 2 * 100
    expected = np.percentile(picked[np.isfinite(picked)], [tail, 100 - tail])
    assert (low, high) == (round(float(expected[0]), 4), round(float(expected[1]), 4))
