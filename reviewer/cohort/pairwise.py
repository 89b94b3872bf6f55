"""Two candidates of one cohort side by side: their checks aligned by id, their rubric rows,
and their conversations on the same ticket aligned turn by turn (the lead's pairwise view)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models.functions import Substr

from cassettes_app.checks.catalog import CATALOG
from cassettes_app.diff import Segment, turn_text, word_diff
from cassettes_app.text import clipped
from reviewer.cohort.cohort import Candidate, Cohort, RowRange, RowScore
from reviewer.models import RubricRow
from reviewer.review.verdict import status_label
from submissions.conversations import pair_conversations, thread_index
from submissions.models import Assignment, CheckResult, Submission

# What one page renders at most: a 2,000-conversation hand-in must not make a 2,000-table page.
MAX_THREADS = 50
MAX_TURNS = 40
TURN_CHARS = 2_000  # of each turn's text per side; the per-turn diff page has it whole
SUMMARY_CHARS = 300

SUBMISSION_NUMBER = re.compile(r"[0-9]{1,18}")  # never an int SQLite cannot hold


@dataclass(frozen=True, slots=True)
class CheckSide:
    """One submission's result of one check, as the page shows it."""

    status: str
    label: str
    summary: str


@dataclass(slots=True)
class CheckLine:
    check_id: str
    title: str
    cells: list[tuple[str, CheckSide | None]]  # (candidate name, result or none)

    @property
    def differs(self) -> bool:
        a, b = (side.status if side else None for _, side in self.cells)
        return a != b


@dataclass(slots=True)
class RubricSide:
    name: str
    scores: list[tuple[str, RowScore]]  # (reviewer, score), by reviewer name
    mean: float | None


@dataclass(slots=True)
class RubricLine:
    row: RubricRow
    cells: list[RubricSide]

    @property
    def differs(self) -> bool:
        return self.cells[0].mean != self.cells[1].mean


@dataclass(slots=True)
class TurnSide:
    segments: list[Segment]
    cut: int  # characters left out


@dataclass(slots=True)
class TurnLine:
    index: int
    cells: list[tuple[str, TurnSide | None]]  # (candidate name, the turn or none)
    differs: bool


@dataclass(slots=True)
class ConversationPair:
    a: dict[str, Any]  # thread_index() entries
    b: dict[str, Any]
    paired_by: str
    turns: list[TurnLine]
    capped: bool

    @property
    def first(self) -> int | None:
        return next((t.index for t in self.turns if t.differs), None)


def check_lines(a: Candidate, b: Candidate) -> list[CheckLine]:
    """One line per check id either submission has, in id order."""
    found: dict[int, dict[str, CheckSide]] = {a.submission.pk: {}, b.submission.pk: {}}
    for sid, cid, status, summary in (
        CheckResult.objects.filter(submission_id__in=list(found))
        .order_by()
        .values_list("submission_id", "check_id", "status", Substr("summary", 1, SUMMARY_CHARS))
    ):
        text = " ".join((summary or "").split())
        # The database hands at most SUMMARY_CHARS: a text that long was cut there.
        text = clipped(text, SUMMARY_CHARS - 1)
        found[sid][cid] = CheckSide(status, status_label(status), text)
    ours, theirs = found[a.submission.pk], found[b.submission.pk]
    lines = []
    for cid in sorted(ours.keys() | theirs.keys()):
        spec = CATALOG.get(cid)
        cells = [(a.name, ours.get(cid)), (b.name, theirs.get(cid))]
        lines.append(CheckLine(cid, spec.title if spec else cid, cells))
    return lines


def _rubric_side(name: str, rng: RowRange) -> RubricSide:
    return RubricSide(name, sorted(rng.by_reviewer.items()), rng.mean)


def rubric_lines(cohort: Cohort, a: Candidate, b: Candidate) -> list[RubricLine]:
    """Each rubric row with both candidates' submitted scores (ranges follow cohort.rows)."""
    return [
        RubricLine(row, [_rubric_side(a.name, ra), _rubric_side(b.name, rb)])
        for row, ra, rb in zip(cohort.rows, a.ranges, b.ranges, strict=True)
    ]


def _turns_of(submission: Submission, threads: list[int]) -> dict[int, list[dict]]:
    """The first MAX_TURNS + 1 turns of these conversations (one more tells it was capped)."""
    out: dict[int, list[dict]] = defaultdict(list)
    rows = (
        submission.turns.filter(thread__in=threads, index__lte=MAX_TURNS)
        .order_by("thread", "index")
        .values_list("thread", "new_messages", "response")
    )
    for thread, new_messages, response in rows:
        out[thread].append({"new_messages": new_messages, "response": response})
    return out


def _clip(text: str) -> tuple[str, int]:
    if len(text) <= TURN_CHARS:
        return text, 0
    return text[:TURN_CHARS], len(text) - TURN_CHARS


def _turn_lines(names: tuple[str, str], left: list[dict], right: list[dict]) -> list[TurnLine]:
    """Turns aligned by position; a differing pair gets word-level marks within the
    TURN_CHARS shown (the whole text decides whether they differ)."""
    lines = []
    for index in range(min(max(len(left), len(right)), MAX_TURNS)):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        text_a, text_b = turn_text(a), turn_text(b)
        differs = a is None or b is None or text_a != text_b
        (shown_a, cut_a), (shown_b, cut_b) = _clip(text_a), _clip(text_b)
        if a is not None and b is not None and differs:
            seg_a, seg_b = word_diff(shown_a, shown_b)
        else:
            seg_a, seg_b = [Segment("same", shown_a)], [Segment("same", shown_b)]
        cells = [
            (names[0], TurnSide(seg_a, cut_a) if a is not None else None),
            (names[1], TurnSide(seg_b, cut_b) if b is not None else None),
        ]
        lines.append(TurnLine(index, cells, differs))
    return lines


def conversations_side_by_side(a: Candidate, b: Candidate) -> dict[str, Any]:
    """Both submissions' conversations paired by request, the first MAX_THREADS of them
    aligned turn by turn, in two queries per submission whatever their size."""
    ours, theirs = thread_index(a.submission), thread_index(b.submission)
    pairs, only_a, only_b, skipped = pair_conversations(ours, theirs)
    shown = pairs[:MAX_THREADS]
    turns_a = _turns_of(a.submission, [m["thread"] for m, _, _ in shown])
    turns_b = _turns_of(b.submission, [t["thread"] for _, t, _ in shown])
    conversations = []
    for mine, other, how in shown:
        left, right = turns_a.get(mine["thread"], []), turns_b.get(other["thread"], [])
        conversations.append(
            ConversationPair(
                mine,
                other,
                how,
                _turn_lines((a.name, b.name), left, right),
                capped=max(len(left), len(right)) > MAX_TURNS,
            )
        )
    return {
        "conversations": conversations,
        "pair_count": len(pairs),
        "threads_capped": len(pairs) > MAX_THREADS,
        "only_a": only_a[:MAX_THREADS],
        "only_b": only_b[:MAX_THREADS],
        "only_a_count": len(only_a),
        "only_b_count": len(only_b),
        "only_a_more": max(0, len(only_a) - MAX_THREADS),
        "only_b_more": max(0, len(only_b) - MAX_THREADS),
        "fuzzy_skipped": skipped,
        "thread_counts": (len(ours), len(theirs)),
    }


def _why_absent(assignment: Assignment, pks: list[int]) -> list[str]:
    """Why these submission numbers are not candidates of this cohort, in words."""
    found = {s.pk: s for s in Submission.objects.filter(pk__in=pks).select_related("candidate")}
    out = []
    for pk in pks:
        s = found.get(pk)
        if s is None:
            out.append(f"There is no submission #{pk}.")
        elif s.assignment_id != assignment.pk:
            out.append(f"Submission #{pk} belongs to another assignment, not to this cohort.")
        elif s.status == Submission.Status.REJECTED:
            out.append(f"Submission #{pk} ({s.candidate.name}) was refused at upload.")
        else:
            out.append(
                f"Submission #{pk} is an older upload of {s.candidate.name}: the cohort "
                "compares each candidate's latest submission."
            )
    return out


def pick_candidates(
    assignment: Assignment, cohort: Cohort, raw: dict[str, str]
) -> tuple[dict[str, Candidate], list[str], int]:
    """The chosen candidates by side, the problems with the choice, and the page's status."""
    bad = [v for v in raw.values() if v and not SUBMISSION_NUMBER.fullmatch(v)]
    if bad:
        return (
            {},
            [f"“{v[:40]}” is not a submission number: choose from the lists." for v in bad],
            400,
        )
    pks = {side: int(v) for side, v in raw.items() if v}
    if len(pks) == 2 and pks["a"] == pks["b"]:
        return {}, ["A and B are the same submission: choose two different candidates."], 400
    by_pk = {c.submission.pk: c for c in cohort.candidates}
    absent = [pk for pk in pks.values() if pk not in by_pk]
    if absent:
        return {}, _why_absent(assignment, absent), 404
    return {side: by_pk[pk] for side, pk in pks.items()}, [], 200


def side_by_side(cohort: Cohort, a: Candidate, b: Candidate) -> dict[str, Any]:
    """Everything the pairwise view shows of two chosen candidates, differences counted."""
    checks = check_lines(a, b)
    rubric = rubric_lines(cohort, a, b)
    return {
        "a": a,
        "b": b,
        "checks": checks,
        "checks_differ": sum(line.differs for line in checks),
        "rubric": rubric,
        "rubric_differ": sum(line.differs for line in rubric),
        "totals": [(c, sorted(c.totals.items(), key=lambda item: item[0])) for c in (a, b)],
        "totals_differ": a.mean != b.mean,
        **conversations_side_by_side(a, b),
    }
