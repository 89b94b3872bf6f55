"""cohort.code_similarity: how much of each source file is also in another candidate's.

The analysis stores the winnowed fingerprints of every source file (SourceFingerprint rows,
`cassettes_app.fingerprints`): identifiers and literals abstracted, so a renamed, re-typed
or reordered copy keeps most of them. The cohort is `cohort.recordings_unique`'s: the
latest non-rejected hand-in of every other candidate for the same assignment.

Starter code never counts: a fingerprint held by more than `SHARED_SHARE` of the hand-ins
(this one included), and by at least `SHARED_MIN` of them, is code the brief handed out or
an idiom everyone writes, and is dropped from both sides. Two hand-ins alone can thus still
be told apart.

Never `fail` (similar code is a lead for a person, not proof): `warn` when some file with
at least `MIN_FINGERPRINTS` counted fingerprints has more than `THRESHOLD` of them in one
file of another candidate's hand-in, naming the top file pairs and their share; else
`pass`; `skip` when the hand-in has no source file.

Incremental: one indexed query on the hashes finds the cohort's rows holding this hand-in's
fingerprints (not all pairs again); the hand-ins sharing enough of them to cross the
threshold from their side (`_crossing`), and those an earlier outcome named, are judged
again. Blind as
`cohort.recordings_unique`: the other side is a submission id and a path (`OTHER`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from django.db import transaction
from django.db.models import Count

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import CODE_SIMILARITY
from submissions.checks.cohort import OTHER, cohort_judge, cohort_latest
from submissions.checks.store import checks_store
from submissions.models import (
    Assignment,
    CheckResult,
    Job,
    SourceFingerprint,
    Submission,
    assignment_lock,
)

THRESHOLD = 0.5  # share of a file's counted fingerprints found in one other file
MIN_FINGERPRINTS = 20  # a smaller file says too little to compare
SHARED_SHARE = 0.5  # held by more than this share of the hand-ins: starter code
SHARED_MIN = 3  # ... and by at least this many of them
# Of another hand-in's file, how much may be starter or cohort-shared code when deciding
# whether this hand-in could cross the threshold from that side (`_crossing`).
SHARED_SLACK = 0.5
TOP_PAIRS = 10
# Matching rows read per judgment: bounded whatever the cohort shares.
MAX_MATCHES = 200_000
_LOOKUP_CHUNK = 10_000  # hashes per lookup query (SQLite takes 32,766 parameters)

Pair = tuple[str, int, str]  # (this path, other submission, other path)


def shared_hashes(submission: Submission, cohort: list[int]) -> set[int]:
    """This hand-in's hashes that count as starter code (see the module docstring)."""
    population = len(cohort) + 1
    least = max(SHARED_MIN, int(population * SHARED_SHARE) + 1)
    if population < least:
        return set()
    mine = SourceFingerprint.objects.filter(submission=submission).values("hash")
    return set(
        SourceFingerprint.objects.filter(hash__in=mine, submission_id__in=[*cohort, submission.pk])
        .values("hash")
        .annotate(n=Count("submission", distinct=True))
        .filter(n__gte=least)
        .values_list("hash", flat=True)
    )


def _judge(submission: Submission) -> tuple[CheckOutcome, set[int]]:
    """This hand-in's outcome, and the hand-ins that share enough with it to be judged again."""
    own = list(SourceFingerprint.objects.filter(submission=submission).values_list("path", "hash"))
    if not own:
        reason = "no source file in this hand-in to compare (.py, .js, .ts, .go, ...)"
        return skip(CODE_SIMILARITY, reason), set()
    cohort = list(cohort_latest(submission).values_list("pk", flat=True))
    # The brief's starter code (the assignment's `starter_files`) and what most of the
    # cohort holds: neither counts.
    shared = shared_hashes(submission, cohort) | set(submission.assignment.starter_fingerprints)
    by_hash: dict[int, list[str]] = defaultdict(list)
    sizes: Counter[str] = Counter()
    for path, value in own:
        if value not in shared:
            by_hash[value].append(path)
            sizes[path] += 1
    # Only the counted hashes are looked up (starter code, held by everyone, would make
    # each judgment read the whole cohort), in chunks a query's parameters can hold.
    counted_hashes = list(by_hash)
    matches: list[tuple[int, int, str]] = []
    for start in range(0, len(counted_hashes), _LOOKUP_CHUNK):
        matches += (
            SourceFingerprint.objects.filter(
                hash__in=counted_hashes[start : start + _LOOKUP_CHUNK], submission_id__in=cohort
            )
            .order_by()
            .values_list("hash", "submission_id", "path")[: MAX_MATCHES - len(matches)]
        )
        if len(matches) >= MAX_MATCHES:
            break
    common: Counter[Pair] = Counter()
    for value, other, other_path in matches:
        for path in by_hash.get(value, ()):
            common[(path, other, other_path)] += 1
    dropped = shared.intersection(v for _, v in own)
    outcome = _outcome(len({p for p, _ in own}), sizes, common, dropped)
    named = {item[OTHER]["submission"] for item in outcome.evidence}
    return outcome, _crossing(common) | named


def _crossing(common: Counter[Pair]) -> set[int]:
    """The hand-ins whose outcome this one may change: those where some file could have
    more than `THRESHOLD` of its counted fingerprints in common with this hand-in. Their
    counted sizes are not stored, so the test is against the file's stored fingerprints
    with room for up to `SHARED_SLACK` of them to be starter or cohort-shared code: a
    common idiom shared with half the cohort does not judge half the cohort again."""
    near = {pair: n for pair, n in common.items() if n > MIN_FINGERPRINTS * THRESHOLD}
    if not near:
        return set()
    others = {other for _, other, _ in near}
    paths = {other_path for _, _, other_path in near}
    totals = {
        (sub, path): n
        for sub, path, n in SourceFingerprint.objects.filter(
            submission_id__in=others, path__in=paths
        )
        .values_list("submission_id", "path")
        .annotate(n=Count("pk"))
        .values_list("submission_id", "path", "n")
    }
    return {
        other
        for (_, other, other_path), n in near.items()
        if n > THRESHOLD * (1 - SHARED_SLACK) * totals.get((other, other_path), 0)
    }


def _outcome(
    files: int, sizes: Counter[str], common: Counter[Pair], shared: set[int]
) -> CheckOutcome:
    similar = sorted(
        (
            (n / sizes[pair[0]], n, pair)
            for pair, n in common.items()
            if sizes[pair[0]] >= MIN_FINGERPRINTS and n / sizes[pair[0]] > THRESHOLD
        ),
        key=lambda item: (-item[0], -item[1], item[2]),
    )
    starter = (
        f"; {counted(len(shared), 'fingerprint')} of the brief's starter code or shared by most "
        "of the cohort not counted"
    )
    if not similar:
        summary = (
            f"no source file of this hand-in ({counted(files, 'file')}) has more than "
            f"{THRESHOLD:.0%} of its fingerprints in another candidate's file"
            f"{starter if shared else ''}"
        )
        return CheckOutcome(CODE_SIMILARITY, "pass", summary)
    evidence = [_item(share, n, *pair) for share, n, pair in similar[:TOP_PAIRS]]
    paths = {pair[0] for _, _, pair in similar}
    others = {pair[1] for _, _, pair in similar}
    summary = (
        f"{counted(len(paths), 'source file')} of this hand-in share more than {THRESHOLD:.0%} "
        f"of their fingerprints with files in the hand-in of "
        f"{counted(len(others), 'other candidate')} (top {similar[0][0]:.0%}): a lead to "
        "read, not proof of copying"
        f"{starter if shared else ''}"
    )
    return CheckOutcome(CODE_SIMILARITY, "warn", summary, evidence)


def _item(share: float, n: int, path: str, other: int, other_path: str) -> dict[str, Any]:
    """One similar file pair. The message names no other candidate."""
    return {
        "message": f"{share:.0%} of this file's fingerprints ({n}) are in a file of another "
        "candidate's hand-in",
        "path": path,
        "share": round(share, 3),
        "fingerprints": n,
        OTHER: {"submission": other, "path": other_path},
    }


def cohort_code_similarity(*, submission: Submission, job: Job | None) -> CheckOutcome:
    """Judge this hand-in against its cohort, write its outcome, and re-judge the hand-ins
    it shares enough with (or was named by before); returns its own outcome."""
    return cohort_judge(
        submission=submission, job=job, judge=_judge, check_id=CODE_SIMILARITY, flagged="warn"
    )


def code_similarity_again(assignment: Assignment) -> int:
    """Judge again every hand-in of the assignment whose code similarity was judged (after
    its starter code changed, which changes what counts); how many were judged."""
    judged = CheckResult.objects.filter(
        check_id=CODE_SIMILARITY, submission__assignment=assignment
    ).values("submission")
    again = 0
    with transaction.atomic():
        assignment_lock(assignment.pk)
        for submission in Submission.objects.filter(pk__in=judged).select_related("assignment"):
            job = submission.jobs.filter(kind=Job.Kind.ANALYSIS).last()
            checks_store(submission, job, [_judge(submission)[0]])
            again += 1
    return again
