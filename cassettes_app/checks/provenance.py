"""`cassettes.provenance`: the hand-in's git history as evidence of how its recordings came.

A recording is made by running the code against a model: a new recording brings a new
recording time. A later commit that changes the file while its own recording time stays is
a hand edit (the cassette brief's warning), seen in the history rather than guessed. A
recording committed before any code of the hand-in existed is information: it was not made
by the code the hand-in carries (copied in, or the code came later).

Pure: the history arrives as plain data (the commits that changed each path, the blob ids
before and after, a loader for the bytes), and the recording time is read by the analysis'
own reader, passed in. Commit dates are the candidate's to set; they are shown, not trusted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import PROVENANCE

ARCHIVE_REASON = (
    "the hand-in is an archive: it carries no history, so no recording can be followed "
    "through its commits (hand in a git bundle or a repository URL for that)"
)


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """One commit as the evidence names it."""

    sha: str
    time: int  # the committer date, epoch seconds: the candidate's to set
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def date(self) -> str:
        return dt.datetime.fromtimestamp(self.time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def label(self) -> str:
        """`abc1234567 (2024-05-01 10:00:00 UTC, "subject")`."""
        return f"{self.short} ({self.date}, “{self.subject}”)"

    def as_dict(self) -> dict[str, Any]:
        return {"commit": self.sha, "short": self.short, "date": self.date, "subject": self.subject}


@dataclass(frozen=True, slots=True)
class Change:
    """One commit's change to one path (against its first parent)."""

    path: str
    commit: CommitInfo
    before: str | None  # blob id before this commit; None: the path was added here
    after: str | None  # blob id after it; None: the path was removed here


@dataclass
class History:
    """What the walk of the judged commit's history found, oldest change first."""

    commits: int  # commits read
    limit: int  # the most commits the walk reads
    bounded: bool  # older commits exist that were not read
    changes: list[Change]
    load: Callable[[str], bytes | None]  # blob id -> bytes (None: too large to read)
    # Oldest commit read that added or changed code (None: none did, in the commits read).
    first_code: CommitInfo | None = None
    position: dict[str, int] = field(default_factory=dict)  # commit id -> 0 for the oldest


@dataclass(frozen=True)
class NoHistory:
    """Why there is no history to read: an archive (skip), or it did not read (error)."""

    reason: str = ARCHIVE_REASON
    error: bool = False


@dataclass
class _Path:
    """One path followed through its changes."""

    recorded_in: CommitInfo | None = None  # None: before the commits read
    times: tuple[str, ...] = ()
    edits: list[dict[str, Any]] = field(default_factory=list)
    untimed: int = 0  # changes of a file that keeps no recording time


TimeReader = Callable[[str, bytes], tuple[str, ...]]


def _times(history: History, path: str, blob: str, read: TimeReader) -> tuple[str, ...] | None:
    data = history.load(blob)
    return None if data is None else read(path, data)


def _follow(history: History, path: str, changes: Iterable[Change], read: TimeReader) -> _Path:
    """Walk one path's changes oldest first; a change that keeps the time is an edit."""
    state = _Path()
    for change in changes:
        if change.after is None:  # removed: a later add starts afresh
            state = _Path(edits=state.edits, untimed=state.untimed)
            continue
        after = _times(history, path, change.after, read)
        if change.before is None:
            state.recorded_in, state.times = change.commit, after or ()
            continue
        if not state.times and state.recorded_in is None:  # changed before the commits read
            state.times = _times(history, path, change.before, read) or ()
        if after is None:
            continue
        if not any(after):
            state.untimed += 1
        elif after == state.times:
            state.edits.append(_edit(path, state.recorded_in, change.commit, after, history))
            continue
        state.recorded_in, state.times = change.commit, after
    return state


def _edit(
    path: str,
    recorded: CommitInfo | None,
    changed: CommitInfo,
    times: tuple[str, ...],
    history: History,
) -> dict[str, Any]:
    when = ", ".join(t for t in times if t)
    where = (
        f"recorded in {recorded.label()}"
        if recorded is not None
        else f"recorded before the {history.limit} newest commits read"
    )
    return {
        "path": path,
        "message": f"changed in {changed.label()}, {where}; its recording time {when} "
        "stayed: a hand edit, not a new recording",
        "recorded_in": recorded.as_dict() if recorded is not None else None,
        "changed_in": changed.as_dict(),
        "recorded_at": when,
    }


def _before_code(history: History, path: str, added: CommitInfo) -> dict[str, Any] | None:
    """An information item when `path` was committed before any code of the hand-in."""
    first = history.first_code
    if history.bounded:
        return None  # the code may be in a commit that was not read
    if first is not None and history.position[first.sha] <= history.position[added.sha]:
        return None
    later = f"the first code came in {first.label()}" if first else "no code was committed"
    return {
        "path": path,
        "level": "info",
        "message": f"committed in {added.label()}, before any code of the hand-in ({later}): "
        "not recorded by the code it carries",
        "recorded_in": added.as_dict(),
    }


def cassettes_provenance(
    history: History | NoHistory, paths: Sequence[str], read: TimeReader
) -> CheckOutcome:
    """Fail when a later commit changed a recording and kept its recording time."""
    if isinstance(history, NoHistory):
        if history.error:
            return CheckOutcome(PROVENANCE, "error", history.reason)
        return skip(PROVENANCE, history.reason)
    if not paths:
        return skip(PROVENANCE, "no recordings to follow through the history")
    by_path: dict[str, list[Change]] = {p: [] for p in paths}
    for change in history.changes:
        if change.path in by_path:
            by_path[change.path].append(change)
    edits: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    untimed = 0
    for path, changes in by_path.items():
        state = _follow(history, path, changes, read)
        edits.extend(state.edits)
        untimed += state.untimed
        added = next((c.commit for c in changes if c.before is None and c.after), None)
        note = _before_code(history, path, added) if added is not None else None
        if note is not None:
            notes.append(note)
    read_note = f"{counted(history.commits, 'commit')} read"
    if history.bounded:
        read_note += f" (the newest {history.limit}; older ones were not read)"
    if untimed:
        read_note += f"; {counted(untimed, 'change')} to files that keep no recording time"
    if edits:
        summary = (
            f"{counted(len(edits), 'change')} kept the recording time of the file changed "
            f"(hand edits, not new recordings); {read_note}"
        )
        return CheckOutcome(PROVENANCE, "fail", summary, [*edits, *notes])
    summary = (
        f"no change to the {counted(len(paths), 'recording')} kept its recording time; {read_note}"
    )
    return CheckOutcome(PROVENANCE, "pass", summary, notes)
