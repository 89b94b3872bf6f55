"""One assignment's cohort as the hiring lead sees it: every candidate's latest submission,
each submitted review's scores with the evidence line and note behind them, the range and
the disagreement flag, and the check counts.

The comparison page, `manage.py cohort` and the shareable report all read this one
structure, so they show the same numbers. Only submitted reviews count: a draft can still
change, so it is counted apart (`drafts`) and never enters a total, a range or a figure.
A fixed number of queries whatever the cohort size; scores come back as tuples.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from statistics import mean
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from reviewer.cohort import agreement
from reviewer.cohort.agreement import FLAG_ROW_POINTS, FLAG_TOTAL_POINTS, Units
from reviewer.cohort.safe_text import SafeText
from reviewer.models import Note, Review, RubricRow, Score
from reviewer.review.contradiction import Contradiction, contradiction
from reviewer.review.rubrics import rubric_for, weighted_total
from reviewer.review.scoring import checks_not_applying
from submissions.models import Assignment, CheckResult, Submission

# When a candidate is flagged, in the words every page and the report use.
FLAG_RULE = (
    f"reviewers differ by {FLAG_ROW_POINTS} or more points on a row, "
    f"by {FLAG_TOTAL_POINTS} or more on the total, "
    "or their recommendations split between yes and no"
)

# ------------------------------------------------------------------ recommendations
# The levels' order and labels are the model's choices (strong no … strong yes); these
# helpers only count and word them, so every page, the CSV, the report and the JSON agree.
Recommendation = Review.Recommendation
YES_SIDE = frozenset({Recommendation.YES, Recommendation.STRONG_YES})
# The choices' values, built once: `Recommendation.values` makes a new list at each read,
# and a calibration page read it once per review of the cohort.
RECOMMENDATIONS = frozenset(Recommendation.values)


def recommendation_label(value: str) -> str:
    """The label of a recommendation value ("Strong yes"); "" for a review without one."""
    return Recommendation(value).label if value in RECOMMENDATIONS else ""


def recommendation_counts(values: Iterable[str]) -> list[tuple[str, str, int]]:
    """(value, label, count) of each level given, the most favourable first."""
    counts = Counter(v for v in values if v in RECOMMENDATIONS)
    return [
        (level.value, level.label, counts[level.value])
        for level in reversed(Recommendation)
        if counts[level.value]
    ]


def recommendation_text(values: Iterable[str]) -> str:
    """The counts in words: "2 yes · 1 strong no"; "" when nobody recommended."""
    return " · ".join(f"{n} {label.lower()}" for _, label, n in recommendation_counts(values))


def recommendation_agreement(values: Iterable[str]) -> str:
    """Whether the reviewers agree on the recommendation: "agree" (one level), "same side"
    (yes and strong yes, or no and strong no), "split" (yes and no), "one" (a single
    recommendation) or "none"."""
    given = [v for v in values if v in RECOMMENDATIONS]
    if not given:
        return "none"
    if len(given) == 1:
        return "one"
    if len(set(given)) == 1:
        return "agree"
    sides = {v in YES_SIDE for v in given}
    return "same side" if len(sides) == 1 else "split"


# The check-based status filter, in the order the page lists it.
STATUSES = {
    "flaws": "flaws found",
    "could-not-run": "could not run",
    "clean": "no flaws",
    "unchecked": "not checked yet",
}


def range_text(low: float | None, high: float | None) -> str:
    """A range as the pages print it: "1–3", "2" when everyone agrees, "—" with no score."""
    if low is None:
        return "—"
    return str(low) if low == high else f"{low}–{high}"


@dataclass
class RowScore:
    """One reviewer's score on one rubric row, with what they wrote for it."""

    value: int | None
    evidence: str = ""
    notes: list[str] = field(default_factory=list)
    contradiction: Contradiction | None = None  # with the row's linked checks


@dataclass
class ReviewEntry:
    """One submitted review of a candidate."""

    reviewer: str
    scores: dict[int, RowScore]  # row id -> score
    recommendation: str = ""  # a Review.Recommendation value, "" when none was given

    @property
    def recommendation_label(self) -> str:
        return recommendation_label(self.recommendation)

    def total(self, rows: list[RubricRow]) -> float | None:
        return weighted_total(
            [(row.weight, s.value if (s := self.scores.get(row.pk)) else None) for row in rows]
        )


@dataclass
class RowRange:
    """A rubric row across one candidate's reviews."""

    row: RubricRow
    by_reviewer: dict[str, RowScore]

    @cached_property
    def values(self) -> list[int]:
        return [s.value for s in self.by_reviewer.values() if s.value is not None]

    @property
    def low(self) -> int | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> int | None:
        return max(self.values) if self.values else None

    @cached_property
    def apart(self) -> int:
        # Read for every flag, sort and cell: computed once, from the cached values.
        return agreement.spread(self.values)

    @property
    def flagged(self) -> bool:
        return self.apart >= FLAG_ROW_POINTS

    @property
    def mean(self) -> float | None:
        return round(mean(self.values), 2) if self.values else None

    @property
    def range_text(self) -> str:
        return range_text(self.low, self.high)


@dataclass(frozen=True, slots=True)
class ReviewerCell:
    name: str
    total: float | None
    state: str  # "submitted", "draft" or "" (no review by this reviewer)
    recommendation: str = ""  # its label, "" when none


@dataclass(frozen=True, slots=True)
class Contradicted:
    """One score of a candidate that contradicts its row's linked checks."""

    reviewer: str
    row: RubricRow
    contradiction: Contradiction

    @property
    def text(self) -> str:
        return f"{self.reviewer} on {self.row.title}: {self.contradiction.text}"


@dataclass
class Candidate:
    submission: Submission
    reviews: list[ReviewEntry]  # submitted, by reviewer name
    totals: dict[str, float | None]  # reviewer -> weighted total
    ranges: list[RowRange]
    drafts: list[str] = field(default_factory=list)  # reviewers still scoring
    checks: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> status -> n

    @property
    def name(self) -> str:
        return self.submission.candidate.name

    @cached_property
    def scored(self) -> list[float]:
        return [t for t in self.totals.values() if t is not None]

    @cached_property
    def mean(self) -> float | None:
        # statistics.mean is exact and slow; the sort by mean and each page read it again.
        return round(mean(self.scored), 1) if self.scored else None

    @property
    def low(self) -> float | None:
        return min(self.scored) if self.scored else None

    @property
    def high(self) -> float | None:
        return max(self.scored) if self.scored else None

    @property
    def total_apart(self) -> float:
        if len(self.scored) < 2:
            return 0.0
        return round(max(self.scored) - min(self.scored), 1)

    @property
    def range_text(self) -> str:
        return range_text(self.low, self.high)

    @property
    def totals_flagged(self) -> bool:
        return self.total_apart >= FLAG_TOTAL_POINTS

    @property
    def recommendations(self) -> list[str]:
        """Each submitted review's recommendation, by reviewer name ("" for none)."""
        return [r.recommendation for r in self.reviews]

    @property
    def recommendation_text(self) -> str:
        return recommendation_text(self.recommendations)

    @property
    def recommendation_agreement(self) -> str:
        return recommendation_agreement(self.recommendations)

    @cached_property
    def contradictions(self) -> list[Contradicted]:
        """The submitted scores that contradict their rows' linked checks, by reviewer then
        rubric row."""
        return [
            Contradicted(who, r.row, s.contradiction)
            for r in self.ranges
            for who, s in sorted(r.by_reviewer.items())
            if s.contradiction is not None
        ]

    @cached_property
    def flag_reasons(self) -> list[str]:
        """Why this candidate's reviewers disagree, in words; empty when they do not."""
        out = []
        if self.totals_flagged:
            out.append(f"totals {self.low} to {self.high} ({self.total_apart} apart)")
        for r in self.ranges:
            if r.flagged:
                out.append(f"{r.row.title}: {r.low} to {r.high}")
        if self.recommendation_agreement == "split":
            out.append(f"recommendations split: {self.recommendation_text}")
        return out

    @property
    def flagged(self) -> bool:
        return bool(self.flag_reasons)

    def count(self, status: str) -> int:
        return sum(counts.get(status, 0) for counts in self.checks.values())

    @property
    def fails(self) -> int:
        return self.count("fail")

    @property
    def errors(self) -> int:
        return self.count("error")

    @cached_property
    def status(self) -> str:
        """The check-based status (a key of STATUSES): a fail is a flaw found; an error is
        a check that could not run, never a flaw."""
        if self.count("fail"):
            return "flaws"
        if self.count("error"):
            return "could-not-run"
        if self.checks:
            return "clean"
        return "unchecked"

    def cells(self, reviewers: list[str]) -> list[ReviewerCell]:
        """One cell per reviewer of the cohort: their total, or that they are still
        scoring, or that this candidate is not theirs."""
        given = {r.reviewer: r.recommendation_label for r in self.reviews}
        return [
            ReviewerCell(
                name,
                self.totals.get(name),
                "submitted" if name in self.totals else "draft" if name in self.drafts else "",
                given.get(name, ""),
            )
            for name in reviewers
        ]

    def review_by(self, reviewer: str) -> ReviewEntry | None:
        return next((r for r in self.reviews if r.reviewer == reviewer), None)


@dataclass
class Cohort:
    assignment: Assignment
    rows: list[RubricRow]
    candidates: list[Candidate]

    @cached_property
    def reviewers(self) -> list[str]:
        return sorted({r.reviewer for c in self.candidates for r in c.reviews})

    @cached_property
    def units(self) -> Units:
        """(submission, row) -> reviewer -> score, over submitted, scored rows."""
        units: Units = {}
        for c in self.candidates:
            for r in c.reviews:
                for row_id, s in r.scores.items():
                    if s.value is not None:
                        units.setdefault((c.submission.pk, row_id), {})[r.reviewer] = s.value
        return units

    @cached_property
    def alpha(self) -> float | None:
        """Krippendorff's alpha (ordinal) over every unit (without loading scikit-learn)."""
        return self.figures["alpha"].value

    @cached_property
    def figures(self) -> dict[str, agreement.Figure]:
        """Alpha and AC2 over every unit, each with its interval, units and reading."""
        return agreement.figures(self.units)

    @cached_property
    def row_figures(self) -> dict[int, dict[str, agreement.Figure]]:
        """The same per rubric row id."""
        # Every row of a fully scored cohort has as many units: one set of resamples
        # serves them all (drawing them was most of the intervals' time).
        drawn: dict = {}
        return {
            row.pk: agreement.figures(
                {u: v for u, v in self.units.items() if u[1] == row.pk}, drawn=drawn
            )
            for row in self.rows
        }

    @cached_property
    def agreement(self) -> dict[str, Any]:
        return {
            "alpha_ordinal": self.alpha,
            "alpha": self.figures["alpha"].as_json(),
            "ac2_ordinal": self.figures["ac2"].as_json(),
            "pairs": agreement.pair_kappas(self.units),
            "rows": {row.title: self.row_figures[row.pk]["alpha"].value for row in self.rows},
            "row_figures": {
                row.title: {name: f.as_json() for name, f in self.row_figures[row.pk].items()}
                for row in self.rows
            },
        }

    @cached_property
    def calibration(self) -> list[dict[str, Any]]:
        return agreement.reviewer_calibration(self.units)

    def as_json(self) -> dict[str, Any]:
        """The machine-readable cohort (`manage.py cohort SLUG --format json`)."""
        titles = {row.pk: row.title for row in self.rows}
        candidates = []
        for c in sorted(self.candidates, key=lambda c: (c.name, c.submission.pk)):
            reviews = [
                {
                    "reviewer": r.reviewer,
                    "total": c.totals[r.reviewer],
                    "recommendation": r.recommendation or None,
                    "rows": {
                        titles[row_id]: s.value
                        for row_id, s in r.scores.items()
                        if s.value is not None and row_id in titles
                    },
                    # row title -> what the score contradicts (only rows that do)
                    "contradicts_checks": {
                        titles[row_id]: s.contradiction.as_json()
                        for row_id, s in r.scores.items()
                        if s.contradiction is not None and row_id in titles
                    },
                }
                for r in c.reviews
            ]
            candidates.append(
                {
                    "candidate": c.name,
                    "submission": c.submission.pk,
                    "status": c.submission.status,
                    "reviews": reviews,
                    "mean": c.mean,
                    "min": c.low,
                    "max": c.high,
                    "flagged": c.flagged,
                    "flag_reasons": c.flag_reasons,
                    "recommendations": {
                        value: n for value, _, n in recommendation_counts(c.recommendations)
                    },
                    "recommendation_agreement": c.recommendation_agreement,
                    "contradicted": bool(c.contradictions),
                }
            )
        return {
            "assignment": self.assignment.slug,
            "candidates": candidates,
            "agreement": self.agreement,
            "reviewers": self.calibration,
        }


def _newest_first(submissions: QuerySet[Submission]) -> QuerySet[Submission]:
    """The rule of every cohort: a candidate's latest submission that was not refused at
    upload counts (ordered so the first seen per assignment and candidate is that one)."""
    return submissions.exclude(status=Submission.Status.REJECTED).order_by(
        "assignment_id", "candidate_id", "-created"
    )


def cohort_for(assignment: Assignment, *, only: Submission | None = None) -> Cohort:
    """The cohort of one assignment, in seven queries whatever its size: each candidate's
    latest submission, or `only` that one submission (latest or not) as a cohort of one.

    Evidence lines and notes are redacted here, whole, so a secret a reviewer pasted is
    never shown in full on any page or report built from this; whoever shows them cuts."""
    template = rubric_for(assignment)
    rows = list(template.rows.all()) if template else []
    latest: dict[int, Submission] = {}
    if only is not None:
        latest[only.candidate_id] = only
        scope: dict[str, Any] = {"submission": only}
    else:
        for s in (
            _newest_first(Submission.objects.filter(assignment=assignment))
            .select_related("candidate")
            .only("pk", "status", "created", "candidate__name", "assignment_id")
        ):
            latest.setdefault(s.candidate_id, s)
        # Filtered by assignment rather than by a list of 1,000 ids; older submissions'
        # rows are skipped below.
        scope = {"submission__assignment": assignment}
    ids = {s.pk for s in latest.values()}
    text = SafeText()
    username = f"reviewer__{get_user_model().USERNAME_FIELD}"
    # review -> (submission, who, state, uid, recommendation)
    reviews: dict[int, tuple[int, str, str, int, str]] = {}
    for rid, sid, who, state, uid, recommendation in (
        Review.objects.filter(**scope)
        .order_by()
        .values_list("pk", "submission_id", username, "state", "reviewer_id", "recommendation")
    ):
        if sid in ids:
            reviews[rid] = (sid, who, state, uid, recommendation)
    notes: dict[tuple[int, int, int], list[str]] = defaultdict(list)  # (sub, row, uid)
    for sid, row_id, uid, body in (
        Note.objects.filter(**scope, row__isnull=False)
        .order_by("created", "pk")
        .values_list("submission_id", "row_id", "author_id", "body")
    ):
        if sid in ids:
            notes[(sid, row_id, uid)].append(text.full(body))
    scores: dict[int, dict[int, RowScore]] = defaultdict(dict)
    for rid, row_id, value, evidence in (
        Score.objects.filter(**{f"review__{k}": v for k, v in scope.items()})
        .order_by()
        .values_list("review_id", "row_id", "value", "evidence")
    ):
        if rid in reviews:
            sid, _, _, uid, _ = reviews[rid]
            scores[rid][row_id] = RowScore(
                value, text.full(evidence), notes.get((sid, row_id, uid), [])
            )
    checks: dict[int, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    statuses: dict[int, dict[str, str]] = defaultdict(dict)  # submission -> check -> status
    for sid, cid, status in CheckResult.objects.filter(**scope).values_list(
        "submission_id", "check_id", "status"
    ):
        if sid in ids:
            checks[sid][cid.split(".", 1)[0]][status] += 1
            statuses[sid][cid] = status
    by_submission: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for rid, (sid, who, state, _, _) in reviews.items():
        by_submission[sid].append((who, state, rid))
    not_applying = checks_not_applying(assignment)
    linked = {row.pk: row.check_ids for row in rows}
    candidates = []
    for s in latest.values():
        entries = sorted(by_submission[s.pk])
        submitted = [
            ReviewEntry(who, scores[rid], reviews[rid][4])
            for who, state, rid in entries
            if state == Review.State.SUBMITTED
        ]
        for entry in submitted:
            for row_id, score in entry.scores.items():
                score.contradiction = contradiction(
                    score.value,
                    linked.get(row_id, ()),
                    statuses[s.pk],
                    not_applying=not_applying,
                )
        ranges = [
            RowRange(row, {r.reviewer: r.scores[row.pk] for r in submitted if row.pk in r.scores})
            for row in rows
        ]
        candidates.append(
            Candidate(
                submission=s,
                reviews=submitted,
                totals={r.reviewer: r.total(rows) for r in submitted},
                ranges=ranges,
                drafts=[who for who, state, _ in entries if state != Review.State.SUBMITTED],
                checks={g: dict(v) for g, v in checks[s.pk].items()},
            )
        )
    candidates.sort(key=lambda c: (c.name, c.submission.pk))
    return Cohort(assignment, rows, candidates)


def _latest_owner(ids: list[int]) -> dict[int, int]:
    """The latest non-rejected submission of each candidate of these assignments, mapped to
    its assignment (one query)."""
    latest: dict[tuple[int, int], int] = {}  # (assignment, candidate) -> submission
    for sid, aid, cid in _newest_first(Submission.objects.filter(assignment__in=ids)).values_list(
        "pk", "assignment_id", "candidate_id"
    ):
        latest.setdefault((aid, cid), sid)
    return {sid: aid for (aid, _), sid in latest.items()}


def units_by_assignment(assignments: list[Assignment]) -> dict[int, Units]:
    """Each assignment's units, as `cohort_for` builds them (latest non-rejected submission
    per candidate, submitted reviews, scored rows), in two queries for all of them."""
    ids = [a.pk for a in assignments]
    if not ids:
        return {}
    owner = _latest_owner(ids)
    username = f"review__reviewer__{get_user_model().USERNAME_FIELD}"
    out: dict[int, Units] = {aid: {} for aid in ids}
    for sid, row_id, who, value in (
        Score.objects.filter(
            review__submission__assignment__in=ids,
            review__state=Review.State.SUBMITTED,
            value__isnull=False,
        )
        .order_by()
        .values_list("review__submission_id", "row_id", username, "value")
    ):
        if sid in owner:  # an older submission's scores do not count
            out[owner[sid]].setdefault((sid, row_id), {})[who] = value
    return out


def recommendations_by_assignment(
    assignments: list[Assignment],
) -> dict[int, list[tuple[str, str]]]:
    """Each assignment's (reviewer, recommendation) pairs, over the reviews `cohort_for`
    counts (latest non-rejected submission per candidate, submitted reviews; "" where none
    was given), in two queries for all of them."""
    ids = [a.pk for a in assignments]
    if not ids:
        return {}
    owner = _latest_owner(ids)
    username = f"reviewer__{get_user_model().USERNAME_FIELD}"
    out: dict[int, list[tuple[str, str]]] = {aid: [] for aid in ids}
    for sid, who, value in (
        Review.objects.filter(submission__assignment__in=ids, state=Review.State.SUBMITTED)
        .order_by(username, "submission_id")
        .values_list("submission_id", username, "recommendation")
    ):
        if sid in owner:
            out[owner[sid]].append((who, value))
    return out
