"""The history of the judged commit, read for `cassettes.provenance`: bounded, first parent.

From the judged commit back along first parents (the line the hand-in was built on; a
merged side branch shows as its merge), at most `max_commits` commits. Each commit is
compared with its first parent tree by tree, a folder whose tree id did not change never
opened, so a commit costs what it changed. What comes out is plain data for the check:
which commits changed which of the recordings' paths (blob ids before and after), and the
oldest commit that added or changed code.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import PurePosixPath

from dulwich.objects import Blob, Commit, ObjectID, Tree

from cassettes_app.checks.provenance import Change, CommitInfo, History
from submissions.intake.git.objects import Objects, commit_subject

MAX_COMMITS = 1000  # commits of history read for provenance

# What counts as code: the languages take-homes are written in, and the files that run them.
CODE_SUFFIXES = frozenset(
    [
        ".py",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".go",
        ".rb",
        ".java",
        ".kt",
        ".rs",
        ".cs",
        ".php",
        ".sh",
        ".ps1",
    ]
)
CODE_NAMES = frozenset({"Makefile", "Dockerfile", "run.sh", "justfile"})


def is_code(path: str) -> bool:
    """True for a source file or a file that runs the hand-in."""
    name = PurePosixPath(path)
    return name.suffix in CODE_SUFFIXES or name.name in CODE_NAMES


def _entries(objects: Objects, tree_id: bytes | None) -> dict[bytes, tuple[int, bytes]]:
    if tree_id is None:
        return {}
    try:
        tree = objects.store[ObjectID(tree_id)]
    except KeyError:
        return {}
    if not isinstance(tree, Tree):
        return {}
    return {name: (mode, sha) for name, mode, sha in tree.iteritems()}


def tree_diff(
    objects: Objects, old: bytes | None, new: bytes | None, prefix: str = ""
) -> Iterable[tuple[str, bytes | None, bytes | None]]:
    """(path, old blob, new blob) of every regular file that differs between two trees."""
    if old == new:
        return
    before, after = _entries(objects, old), _entries(objects, new)
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        path = prefix + name.decode("utf-8", "replace")
        was_dir = was is not None and stat.S_ISDIR(was[0])
        now_dir = now is not None and stat.S_ISDIR(now[0])
        if was_dir or now_dir:
            yield from tree_diff(
                objects, was[1] if was and was_dir else None, now[1] if now and now_dir else None,
                path + "/",
            )  # fmt: skip
        was_file = was is not None and stat.S_ISREG(was[0])
        now_file = now is not None and stat.S_ISREG(now[0])
        if was_file or now_file:
            yield path, was[1] if was and was_file else None, now[1] if now and now_file else None


def _info(commit: Commit) -> CommitInfo:
    return CommitInfo(commit.id.decode(), commit.commit_time, commit_subject(commit))


def _commit(objects: Objects, sha: bytes) -> Commit | None:
    try:
        found = objects.store[ObjectID(sha)]
    except KeyError:
        return None
    return found if isinstance(found, Commit) else None


def recording_history(
    objects: Objects,
    commit: str,
    paths: Iterable[str],
    *,
    max_commits: int = MAX_COMMITS,
    max_blob_bytes: int = 100 * 2**20,
) -> History:
    """The changes to `paths` in the newest `max_commits` commits of `commit`'s history."""
    wanted = set(paths)
    changes: list[Change] = []
    walked: list[CommitInfo] = []
    first_code: CommitInfo | None = None
    current = _commit(objects, commit.encode())
    while current is not None and len(walked) < max_commits:
        info = _info(current)
        walked.append(info)
        parent = _commit(objects, current.parents[0]) if current.parents else None
        code = False
        found = []
        for path, old, new in tree_diff(objects, parent.tree if parent else None, current.tree):
            if path in wanted:
                found.append(Change(path, info, _hex(old), _hex(new)))
            elif new is not None and is_code(path):
                code = True
        changes.extend(reversed(found))
        if code:
            first_code = info
        current = parent
    changes.reverse()
    position = {c.sha: index for index, c in enumerate(reversed(walked))}

    def load(blob_id: str) -> bytes | None:
        try:
            blob = objects.store[ObjectID(blob_id.encode())]
        except KeyError:
            return None
        if not isinstance(blob, Blob) or blob.raw_length() > max_blob_bytes:
            return None
        return blob.as_raw_string()

    return History(
        commits=len(walked),
        limit=max_commits,
        bounded=current is not None,
        changes=changes,
        load=load,
        first_code=first_code,
        position=position,
    )


def _hex(sha: bytes | None) -> str | None:
    return sha.decode() if sha is not None else None
