"""The rerecord job: pair each original recording file with its re-recorded version (by key,
else by path), turn both into turns the same way, and store which pairs differ and where they
first diverge. The per-turn diff page reads one pair at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cassettes_app.analysis import Analyzer
from cassettes_app.diff import diff_turns
from cassettes_app.formats import parse_path
from cassettes_app.pairing import Pairing, file_turns, pair_files
from submissions.assignments import analysis_config
from submissions.intake.archive import ArchiveRejected
from submissions.intake.rerecord import rerecord_tree_path
from submissions.intake.trees import archive_tree, submission_tree
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import Job, Recording, Rerecord, RerecordPair, Submission

_BATCH = 200


def _original_files(submission: Submission) -> list[tuple[str, str]]:
    """(path, key) of each recording file of the submission, in path order (first key wins)."""
    seen: dict[str, str] = {}
    rows = (
        Recording.objects.filter(submission=submission, role=Recording.Role.RECORDING)
        .order_by("path", "pk")
        .values_list("path", "key")
    )
    for path, key in rows.iterator(chunk_size=2000):
        seen.setdefault(path, key)
    return list(seen.items())


def _rerecorded_files(tree: Path, submission: Submission) -> list[tuple[str, str]]:
    """(path, key) of each recording file the re-record archive holds, as analysis finds them."""
    analyzer = Analyzer(tree, analysis_config(submission))
    out = []
    try:
        for report in analyzer.files():
            if report.role != "recording":
                continue
            keys = [r.key for r in report.result.recordings if r.key]
            out.append((report.path, keys[0] if keys else ""))
    finally:
        analyzer.close()
    return out


def _turns(root: Path, rel: str | None) -> tuple[list[dict[str, Any]], int]:
    if rel is None:
        return [], 0
    path = root / rel
    if not path.is_file():
        return [], 0
    return file_turns([parse_path(str(path), rel)])


def compare_pair(original_root: Path, rerecord_root: Path, pairing: Pairing) -> RerecordPair:
    """The stored comparison of one pairing: both sides' turns and where they diverge."""
    left, left_total = _turns(original_root, pairing.original)
    right, right_total = _turns(rerecord_root, pairing.rerecorded)
    changed, first = True, None
    if pairing.original is not None and pairing.rerecorded is not None:
        _, first = diff_turns(left, right)
        changed = first is not None or left_total != right_total
    return RerecordPair(
        key=(pairing.key or "")[:128],
        original_path=(pairing.original or "")[:1024],
        rerecorded_path=(pairing.rerecorded or "")[:1024],
        matched_by=pairing.matched_by,
        changed=changed,
        first_turn=first,
        original_turn_count=left_total,
        rerecorded_turn_count=right_total,
        original_turns=left,
        rerecorded_turns=right,
    )


def rerecord_run(job: Job, progress: Progress) -> Outcome:
    """Pair the re-record's files with the submission's and store each pair's comparison."""
    rerecord_pk = (job.params or {}).get("rerecord")
    rerecord = (
        Rerecord.objects.filter(pk=rerecord_pk, submission=job.submission).first()
        if rerecord_pk is not None
        else None
    )
    if rerecord is None:
        raise JobError("the re-record this job compares no longer exists")
    try:
        return _compare(job, rerecord, progress)
    except Exception as exc:
        Rerecord.objects.filter(pk=rerecord.pk).update(
            status=Rerecord.Status.ERROR, status_reason=str(exc)[:2000]
        )
        raise


def _compare(job: Job, rerecord: Rerecord, progress: Progress) -> Outcome:
    submission = job.submission
    progress.step("unpack", 5)
    try:
        theirs = archive_tree(rerecord.archive.name, rerecord_tree_path(rerecord))
        ours = submission_tree(submission)
    except (ArchiveRejected, FileNotFoundError) as exc:
        raise JobError(f"an archive could not be unpacked again: {exc}") from exc
    progress.step("discover", 15)
    pairings = pair_files(_original_files(submission), _rerecorded_files(theirs, submission))
    RerecordPair.objects.filter(rerecord=rerecord).delete()  # a redelivered job starts over
    progress.step("compare", 30)
    batch: list[RerecordPair] = []
    changed = 0
    for done, pairing in enumerate(pairings, 1):
        pair = compare_pair(ours, theirs, pairing)
        pair.rerecord = rerecord
        changed += pair.changed and pairing.matched_by != ""
        batch.append(pair)
        if len(batch) >= _BATCH:
            RerecordPair.objects.bulk_create(batch)
            batch.clear()
            progress.step(f"compare ({done} of {len(pairings)})", 30 + 65 * done // len(pairings))
    RerecordPair.objects.bulk_create(batch)
    matched = sum(1 for p in pairings if p.matched_by)
    only_original = sum(1 for p in pairings if p.rerecorded is None)
    only_rerecorded = sum(1 for p in pairings if p.original is None)
    Rerecord.objects.filter(pk=rerecord.pk).update(
        status=Rerecord.Status.READY,
        status_reason="",
        pair_count=matched,
        changed_count=changed,
        only_original=only_original,
        only_rerecorded=only_rerecorded,
    )
    summary = (
        f"{matched} recordings paired, {changed} differ; {only_original} not re-recorded, "
        f"{only_rerecorded} only in the re-record"
    )
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, summary)
