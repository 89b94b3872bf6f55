"""One file of a submission, read from its stored archive: no tree unpacked, no WORK_DIR.

The web host shows evidence files from the archive in storage (a volume or S3), so it works
with an empty WORK_DIR, as a second replica, and for a hand-in ingested on another host.
A storage that is a local folder is read in place; any other is copied once, hash-checked,
into a per-host cache of archives keyed by sha256 (ARCHIVE_CACHE_DIR), bounded by bytes
(ARCHIVE_CACHE_BYTES) and emptied least recently used first. A file's first bytes are read
from the archive (a zip member alone is inflated; a tar is streamed; a git bundle is read at
the judged commit, from its pack indexed once in the same cache so that only the objects on
the path are inflated), never more than the viewer's limit, and a file over the per-file cap
(INTAKE_MAX_FILE_BYTES) is refused before any of it is read.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.cache import caches
from django.core.files.storage import FileSystemStorage, default_storage
from dulwich.objects import Commit, ObjectID

from submissions.intake.archive import ArchiveRejected, detect_format
from submissions.intake.archive.members import (
    Member,
    NoSuchMember,
    archive_files,
    check_size,
    read_member,
)
from submissions.intake.git import is_bundle
from submissions.intake.git.objects import (
    Objects,
    commit_subject,
    read_bundle_indexed,
    resolve_ref,
)
from submissions.intake.git.tree import tree_blob, tree_files
from submissions.intake.trees import CHUNK, git_limits, intake_limits
from submissions.models import Submission

_SHA = re.compile(r"[0-9a-f]{40}")


class MemberRefused(Exception):
    """The file cannot be shown; `reason` says why, `too_large` when it is over the cap."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large


@dataclass(frozen=True)
class StoredCommit:
    """A commit of a git hand-in's stored history, as the file viewer names it."""

    sha: str
    subject: str
    time: datetime.datetime


def member_read(submission: Submission, path: str, *, limit: int, commit: str = "") -> Member:
    """The first `limit` bytes of the submission's file at `path`, and its size.

    `commit` (a full commit id) reads the file at another commit of a git hand-in's stored
    history (the commits `cassettes.provenance` names); the judged commit otherwise.
    """
    if not _is_relative(path):
        raise MemberRefused("not a path inside the submission")
    limits = intake_limits()
    try:
        local = _local_archive(submission)
        if submission.source_commit:
            with _bundle(submission, local) as objects:
                found = _stored_commit(objects, commit or submission.source_commit)
                blob = tree_blob(objects, found, path, limits)
                check_size(blob.raw_length(), limits, path)
                data = blob.as_raw_string()
                return Member(data[:limit], len(data))
        with local.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            return read_member(fh, size, _format(submission, local), path, limit, limits)
    except ArchiveRejected as exc:
        raise MemberRefused(exc.detail, too_large=exc.rule == "file_too_large") from exc
    except LookupError as exc:  # NoSuchMember, and a git tree's own reasons
        raise MemberRefused(str(exc)) from exc


def stored_commit(submission: Submission, commit: str) -> StoredCommit:
    """A commit of the submission's stored history, by full id; MemberRefused if not there."""
    if not submission.source_commit:
        raise MemberRefused("an archive has no history: only its one tree can be shown")
    try:
        with _bundle(submission, _local_archive(submission)) as objects:
            found = _stored_commit(objects, commit)
    except ArchiveRejected as exc:
        raise MemberRefused(exc.detail) from exc
    return StoredCommit(
        found.id.decode(),
        commit_subject(found),
        datetime.datetime.fromtimestamp(found.commit_time, datetime.UTC),
    )


def _stored_commit(objects: Objects, commit: str) -> Commit:
    """The commit `commit` names in the stored pack: a full id only (no ref, no prefix, so
    a link names one commit for good)."""
    if not _SHA.fullmatch(commit):
        raise MemberRefused("not a commit id (40 hex digits)")
    try:
        found = objects.store[ObjectID(commit.encode())]
    except KeyError:
        found = None
    if not isinstance(found, Commit):
        raise MemberRefused("no such commit in the stored history")
    return found


def member_paths(submission: Submission) -> frozenset[str]:
    """Every file path of the submission's tree (empty when its archive cannot be read).

    Kept per process by archive hash and commit: a stored archive never changes.
    """
    key = f"member-paths:{submission.archive_sha256}:{submission.source_commit}"
    cache = caches["fragments"]
    known = cache.get(key)
    if known is not None:
        return frozenset(known)
    try:
        paths = _list(submission)
    except (ArchiveRejected, MemberRefused, OSError):
        return frozenset()
    cache.set(key, paths, None)
    return frozenset(paths)


def _list(submission: Submission) -> list[str]:
    limits = intake_limits()
    local = _local_archive(submission)
    if submission.source_commit:
        with _bundle(submission, local) as objects:
            _, commit = resolve_ref(objects, submission.source_commit)
            return tree_files(objects, commit, limits)
    with local.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return archive_files(fh, size, _format(submission, local), limits)


@contextlib.contextmanager
def _bundle(submission: Submission, local: Path) -> Iterator[Objects]:
    """The bundle's objects, from its pack indexed once in this host's archive cache."""
    folder = Path(settings.ARCHIVE_CACHE_DIR)
    basename = folder / f"{_checked_sha(submission.archive_sha256)}.git"
    fresh = not Path(f"{basename}.idx").is_file()
    objects, pack = read_bundle_indexed(local, basename, git_limits())
    try:
        yield objects
    finally:
        pack.close()
    if fresh:
        cache_evict(folder, settings.ARCHIVE_CACHE_BYTES, keep=Path(f"{basename}.pack"))


def _is_relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _format(submission: Submission, local: Path) -> str:
    fmt = submission.archive_format
    if fmt in ("zip", "tar", "tar.gz", "tar.bz2", "tar.xz"):
        return fmt
    if is_bundle(local):
        raise MemberRefused("a git bundle without its judged commit")
    return detect_format(local)


# --- the stored archive on this host -------------------------------------------------------


def _local_archive(submission: Submission) -> Path:
    """A local path holding the submission's stored archive."""
    name = submission.archive.name
    if not name:
        raise MemberRefused("the submission has no stored archive")
    # A local folder (FileSystemStorage) is read in place; any other storage is copied here.
    if not isinstance(default_storage, FileSystemStorage):
        return cached_archive(name, submission.archive_sha256, submission.archive_size)
    local = Path(default_storage.path(name))
    if not local.is_file():
        raise MemberRefused("the stored archive is missing from storage")
    return local


def cached_archive(name: str, sha256: str, size: int) -> Path:
    """The stored archive `name` in this host's cache, fetched and hash-checked if missing."""
    folder = Path(settings.ARCHIVE_CACHE_DIR)
    cached = folder / _checked_sha(sha256)
    with contextlib.suppress(FileNotFoundError):
        os.utime(cached)  # its last use, for least-recently-used eviction
        return cached
    folder.mkdir(parents=True, exist_ok=True)
    cap = max(size, settings.INTAKE_MAX_UPLOAD_BYTES)
    fd, scratch = tempfile.mkstemp(prefix=".fetch-", dir=folder)
    try:
        digest = hashlib.sha256()
        got = 0
        with os.fdopen(fd, "wb") as out:
            try:
                src = default_storage.open(name, "rb")
            except (FileNotFoundError, OSError) as exc:
                raise MemberRefused("the stored archive is missing from storage") from exc
            with src:
                while chunk := src.read(CHUNK):
                    got += len(chunk)
                    if got > cap:
                        raise MemberRefused("the stored archive is larger than recorded")
                    digest.update(chunk)
                    out.write(chunk)
        if digest.hexdigest() != sha256:
            raise MemberRefused("the stored archive does not match its recorded hash")
        os.replace(scratch, cached)  # another request may have won: the bytes are the same
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    cache_evict(folder, settings.ARCHIVE_CACHE_BYTES, keep=cached)
    return cached


def _checked_sha(sha256: str) -> str:
    """The archive's hash, safe as a file name."""
    if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
        raise MemberRefused("the submission's archive hash is not recorded")
    return sha256


def cache_evict(folder: Path, cap: int, *, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used files of `folder` until it holds at most `cap` bytes;
    `keep` (the file just fetched) stays even alone over the cap. Returns what went."""
    files = []
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
            info = entry.stat(follow_symlinks=False)
            files.append((info.st_mtime, info.st_size, Path(entry.path)))
    total = sum(size for _, size, _ in files)
    gone = []
    for _, size, path in sorted(files):
        if total <= cap:
            break
        if keep is not None and path == keep:
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            gone.append(path)
        total -= size
    return gone


__all__ = [
    "Member",
    "MemberRefused",
    "NoSuchMember",
    "StoredCommit",
    "member_paths",
    "member_read",
    "stored_commit",
]
