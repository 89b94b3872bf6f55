"""Where a submission's unpacked tree lives, unpacked again from storage when missing here.

Trees are a per-host cache under WORK_DIR, bounded by TREE_CACHE_BYTES: each placed tree
records its size beside it, each use stamps its folder, and the least recently used go first.
A job holds its submission's tree (`tree_in_use`, a shared lock) while it runs, and eviction
never removes a held tree, so the cap can be passed while every tree is in a job. A tree
removed is unpacked again from storage when next needed. Re-record trees carry no lock: one
used within JOB_TIME_LIMIT stays.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from submissions.intake.archive import Limits, extract_archive
from submissions.intake.git import GitLimits, extract_bundle
from submissions.models import Submission

CHUNK = 1024 * 1024


def intake_limits() -> Limits:
    """The archive caps in force, from settings."""
    return Limits(
        max_upload_bytes=settings.INTAKE_MAX_UPLOAD_BYTES,
        max_total_bytes=settings.INTAKE_MAX_TOTAL_BYTES,
        max_file_bytes=settings.INTAKE_MAX_FILE_BYTES,
        max_files=settings.INTAKE_MAX_FILES,
        max_ratio=settings.INTAKE_MAX_RATIO,
        max_depth=settings.INTAKE_MAX_DEPTH,
    )


def git_limits() -> GitLimits:
    """The pack caps in force, from the archive caps: a history may inflate to twice a tree."""
    limits = intake_limits()
    return GitLimits(
        max_pack_bytes=limits.max_upload_bytes,
        max_object_bytes=limits.max_file_bytes,
        max_inflated_bytes=2 * limits.max_total_bytes,
    )


def tree_path(submission: Submission) -> Path:
    """Where a submission's unpacked tree lives on this machine.

    Keyed by id and archive hash: ids can repeat (SQLite reuses a deleted row's id), and a
    stale tree must never be taken for another submission's.
    """
    folder = f"{submission.pk}-{submission.archive_sha256[:16]}"
    return Path(settings.WORK_DIR) / "submissions" / folder / "tree"


def submission_tree(submission: Submission) -> Path:
    """The unpacked tree on this machine, unpacked again from storage when missing here."""
    commit = submission.source_commit or None
    return archive_tree(submission.archive.name, tree_path(submission), commit=commit)


def archive_tree(stored_name: str, dest: Path, *, commit: str | None = None) -> Path:
    """`dest` holding the stored archive unpacked; unpacked (with the intake caps) if missing.

    With `commit`, the stored file is a bundle, and the tree is that commit's.
    """
    if dest.is_dir():
        tree_touch(dest)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="fetch-", dir=dest.parent))
    try:
        local = scratch / "archive"
        with default_storage.open(stored_name, "rb") as src, local.open("wb") as out:
            shutil.copyfileobj(src, out, CHUNK)
        if commit is None:
            extract_archive(local, scratch / "tree", intake_limits())
        else:
            extract_bundle(local, scratch / "tree", intake_limits(), git_limits(), commit=commit)
        try:
            (scratch / "tree").rename(dest)
        except OSError:
            if not dest.is_dir():  # another worker on this machine may have won the race
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    tree_placed(dest)
    return dest


# --- the bounded cache of trees ----------------------------------------------------------

_SIZE_FILE = "tree.bytes"


def tree_touch(dest: Path) -> None:
    """Stamp a tree as just used (its folder's mtime), for least-recently-used eviction."""
    with contextlib.suppress(FileNotFoundError):
        os.utime(dest.parent)


def tree_placed(dest: Path) -> None:
    """Record a new tree's size beside it, then keep this host's trees under their cap."""
    (dest.parent / _SIZE_FILE).write_text(str(_tree_bytes(dest)))
    tree_touch(dest)
    trees_evict(keep=dest.parent)


def _tree_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


_SUBMISSION_FOLDER = re.compile(r"(\d+)-[0-9a-f]+")


def _lock_file(submission_id: int) -> int:
    folder = Path(settings.WORK_DIR) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / f"submission-{submission_id}.lock"
    return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def tree_in_use(submission_id: int) -> Iterator[None]:
    """Hold the submission's tree on this host for a job: eviction skips it meanwhile.

    Shared, so several jobs may hold it; taken before the job asks for its tree, and it
    waits while an eviction is removing that tree (which the job then unpacks again).
    """
    fd = _lock_file(submission_id)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _remove_unless_held(folder: Path) -> bool:
    """Remove a tree's folder unless a job holds it; True when it went."""
    match = _SUBMISSION_FOLDER.fullmatch(folder.name)
    if folder.parent.name != "submissions" or match is None:
        shutil.rmtree(folder, ignore_errors=True)
        return True
    fd = _lock_file(int(match.group(1)))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a job on this host is reading it
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def trees_evict(*, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used trees of this host until they total TREE_CACHE_BYTES
    at most; never `keep`, a tree a job holds, or a re-record tree used within
    JOB_TIME_LIMIT. Returns the folders gone."""
    work = Path(settings.WORK_DIR)
    entries = []
    for kind in ("submissions", "rerecords"):
        with contextlib.suppress(FileNotFoundError), os.scandir(work / kind) as folders:
            for entry in folders:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                folder = Path(entry.path)
                try:
                    size = int((folder / _SIZE_FILE).read_text())
                except (OSError, ValueError):
                    size = _tree_bytes(folder)  # placed before sizes were recorded
                entries.append((entry.stat(follow_symlinks=False).st_mtime, size, folder))
    total = sum(size for _, size, _ in entries)
    busy_since = time.time() - settings.JOB_TIME_LIMIT
    gone = []
    for used, size, folder in sorted(entries):
        if total <= settings.TREE_CACHE_BYTES:
            break
        if folder == keep or (folder.parent.name == "rerecords" and used >= busy_since):
            continue
        if _remove_unless_held(folder):
            gone.append(folder)
            total -= size
    return gone
