"""The lead's similarity page: which hand-ins of a cohort share recordings or code, and why.

The ranking reads what the two cohort checks stored (`cohort.recordings_unique`'s shared
response ids, `cohort.code_similarity`'s file pairs and shares): each hand-in was compared
with the cohort when it arrived (incrementally, one indexed query), so opening the page
compares nothing again. One pair's "why" reads only those two hand-ins' rows: the shared
ids, the matching spans of each file pair (lines on both sides, from the fingerprints'
lines), the first prompt when both conversations open with the same one, and the tool
calls when both first conversations make the same ones in the same order.

Only the latest hand-in of each candidate counts (the checks' cohort), and starter code
never counts (the assignment's starter list and what most of the cohort holds).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.checks.catalog import CODE_SIMILARITY, RECORDINGS_UNIQUE
from submissions.checks.cohort import OTHER, cohort_latest
from submissions.checks.similarity import shared_hashes
from submissions.intake.stored import MemberRefused, member_read
from submissions.models import Assignment, CheckResult, ResponseId, SourceFingerprint, Submission
from submissions.redact import redact_text

# Lines between two matching fingerprints of one span still read as one passage.
SPAN_GAP = 3
MAX_SPANS = 50  # per file pair shown
MAX_PROMPT = 2000  # characters of a shared prompt shown


@dataclass
class FilePair:
    path: str
    other_path: str
    share: float
    fingerprints: int


@dataclass
class Pair:
    """Two hand-ins (by id) and what they share; `left` is the lower id."""

    left: Submission
    right: Submission
    ids: set[str] = field(default_factory=set)
    files: dict[tuple[str, str], FilePair] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """How the page names the pair (`?pair=`)."""
        return f"{self.left.pk}-{self.right.pk}"

    @property
    def share(self) -> float:
        return max((f.share for f in self.files.values()), default=0.0)

    @property
    def kind(self) -> str:
        return "ids" if self.ids else "code"

    def rank(self) -> tuple:
        # A shared id is certain; code is a share: ids first, then the highest share.
        return (not self.ids, -len(self.ids), -self.share, self.left.pk, self.right.pk)

    def file_pairs(self) -> list[FilePair]:
        return sorted(self.files.values(), key=lambda f: (-f.share, f.path, f.other_path))


def _latest(assignment: Assignment) -> dict[int, Submission]:
    """The latest non-rejected hand-in of each candidate, by id."""
    rows = (
        Submission.objects.filter(assignment=assignment)
        .exclude(status=Submission.Status.REJECTED)
        .select_related("candidate")
        .order_by("candidate_id", "-created", "-pk")
    )
    latest: dict[int, Submission] = {}
    for submission in rows:
        latest.setdefault(submission.candidate_id, submission)
    return {s.pk: s for s in latest.values()}


def similar_pairs(assignment: Assignment) -> list[Pair]:
    """Every pair of the cohort's latest hand-ins that a cohort check found sharing ids or
    code, ranked (shared ids first, then by the highest file share)."""
    latest = _latest(assignment)
    results = CheckResult.objects.filter(
        submission_id__in=latest,
        check_id__in=(RECORDINGS_UNIQUE, CODE_SIMILARITY),
        status__in=("fail", "warn"),
    ).values_list("submission_id", "check_id", "evidence")
    pairs: dict[tuple[int, int], Pair] = {}
    for pk, check_id, evidence in results:
        for item in evidence if isinstance(evidence, list) else ():
            other = (item.get(OTHER) or {}) if isinstance(item, dict) else {}
            other_pk = other.get("submission")
            if other_pk not in latest or other_pk == pk:
                continue
            low, high = sorted((pk, other_pk))
            pair = pairs.setdefault((low, high), Pair(latest[low], latest[high]))
            if check_id == RECORDINGS_UNIQUE and item.get("id"):
                pair.ids.add(str(item["id"]))
            elif check_id == CODE_SIMILARITY:
                # Each side's share of its own file: the pair keeps the larger reading.
                mine, theirs = str(item.get("path", "")), str(other.get("path", ""))
                key = (mine, theirs) if pk == low else (theirs, mine)
                share = float(item.get("share") or 0)
                known = pair.files.get(key)
                if known is None or share > known.share:
                    n = int(item.get("fingerprints") or 0)
                    pair.files[key] = FilePair(key[0], key[1], share, n)
    return sorted(pairs.values(), key=Pair.rank)


@dataclass
class Span:
    """A matching passage: lines in the left file, lines in the right one, and (for the top
    file pair) their text, redacted, side by side."""

    left: tuple[int, int]
    right: tuple[int, int]
    fingerprints: int
    left_text: list[tuple[int, str]] = field(default_factory=list)
    right_text: list[tuple[int, str]] = field(default_factory=list)


SPAN_LINES = 40  # lines of one side of a span shown as text
FILE_BYTES = 256 * 1024  # read of each file of the top pair for its spans' text


def _lines(submission: Submission, path: str) -> list[str] | None:
    """The file's lines (its first FILE_BYTES, redacted), or None when it cannot be read."""
    try:
        member = member_read(submission, path, limit=FILE_BYTES)
    except MemberRefused:
        return None
    return redact_text(member.head.decode("utf-8", "replace")).splitlines()


def _with_text(spans: list[Span], left: list[str] | None, right: list[str] | None) -> None:
    """Each span's lines on both sides, as (number, text), at most SPAN_LINES a side."""
    for span in spans:
        for side, lines, (first, last) in (("left", left, span.left), ("right", right, span.right)):
            if lines is None or first < 1:
                continue
            end = min(last, first + SPAN_LINES - 1, len(lines))
            text = [(n, lines[n - 1][:300]) for n in range(first, end + 1)]
            setattr(span, f"{side}_text", text)


def _spans(matches: list[tuple[int, int, int, int]]) -> list[Span]:
    """Matching fingerprints (left first, left last, right first, right last) merged into
    passages: consecutive on the left within `SPAN_GAP` lines."""
    spans: list[Span] = []
    for a, b, c, d in sorted(matches):
        last = spans[-1] if spans else None
        if last is not None and a <= last.left[1] + SPAN_GAP:
            last.left = (last.left[0], max(last.left[1], b))
            last.right = (min(last.right[0], c), max(last.right[1], d))
            last.fingerprints += 1
        else:
            spans.append(Span((a, b), (c, d), 1))
    return spans


def pair_detail(pair: Pair) -> dict[str, Any]:
    """The "why" of one pair: shared ids with their paths, each file pair's matching spans,
    and the shared opening prompt, if any."""
    left, right = pair.left, pair.right
    ids = sorted(pair.ids)
    id_paths: dict[str, dict[int, str]] = defaultdict(dict)
    for value, sub, path in ResponseId.objects.filter(
        submission_id__in=(left.pk, right.pk), value__in=ids
    ).values_list("value", "submission_id", "path"):
        id_paths[value].setdefault(sub, path)
    shared_ids = [(v, id_paths[v].get(left.pk, ""), id_paths[v].get(right.pk, "")) for v in ids]

    cohort = list(cohort_latest(left).values_list("pk", flat=True))
    excluded = shared_hashes(left, cohort) | set(left.assignment.starter_fingerprints)
    files: list[dict[str, Any]] = []
    for file_pair in pair.file_pairs():
        rows = SourceFingerprint.objects.filter(
            submission_id__in=(left.pk, right.pk),
            path__in={file_pair.path, file_pair.other_path},
        ).values_list("submission_id", "path", "hash", "line", "end_line")
        mine: dict[int, tuple[int, int]] = {}
        theirs: dict[int, tuple[int, int]] = {}
        for sub, path, fingerprint, line, end in rows:
            if fingerprint in excluded:
                continue
            if sub == left.pk and path == file_pair.path:
                mine.setdefault(fingerprint, (line, end))
            elif sub == right.pk and path == file_pair.other_path:
                theirs.setdefault(fingerprint, (line, end))
        matches = [(*mine[h], *theirs[h]) for h in mine.keys() & theirs.keys()]
        spans = _spans(matches)
        if not files and spans:  # the top pair's passages, as text side by side
            _with_text(
                spans[:MAX_SPANS],
                _lines(left, file_pair.path),
                _lines(right, file_pair.other_path),
            )
        files.append(
            {"pair": file_pair, "spans": spans[:MAX_SPANS], "more_spans": len(spans) > MAX_SPANS}
        )
    return {
        "ids": shared_ids,
        "files": files,
        "prompt": shared_prompt(left, right),
        "tools": shared_tool_sequence(left, right),
    }


def _opening(submission: Submission) -> str:
    """The first thread's opening system and user text, whitespace-normalised."""
    turn = submission.turns.order_by("thread", "index").values_list("new_messages", flat=True)
    first = turn.first()
    texts = [
        str(m.get("text") or "")
        for m in (first or [])
        if isinstance(m, dict) and m.get("role") in ("system", "developer", "user")
    ]
    return " ".join(" ".join(texts).split())


def shared_prompt(left: Submission, right: Submission) -> str:
    """The opening prompt both hand-ins' first conversation starts with, or ""."""
    mine = _opening(left)
    return mine[:MAX_PROMPT] if mine and mine == _opening(right) else ""


MIN_TOOL_CALLS = 3  # a shorter sequence of tool calls is what the brief asks of everyone
MAX_TOOL_CALLS = 200


def _tool_sequence(submission: Submission) -> list[str]:
    """The tool names the first conversation's answers call, in order."""
    responses = (
        submission.turns.filter(thread=submission.turns.order_by("thread").values("thread")[:1])
        .order_by("index")
        .values_list("response", flat=True)[:MAX_TOOL_CALLS]
    )
    names = []
    for response in responses:
        for call in (response or {}).get("tool_calls") or ():
            if isinstance(call, dict):
                names.append(str(call.get("name") or "?")[:100])
    return names[:MAX_TOOL_CALLS]


def shared_tool_sequence(left: Submission, right: Submission) -> list[str]:
    """The tool calls both first conversations make in the same order (at least
    `MIN_TOOL_CALLS` of them), or []."""
    mine = _tool_sequence(left)
    return mine if len(mine) >= MIN_TOOL_CALLS and mine == _tool_sequence(right) else []
