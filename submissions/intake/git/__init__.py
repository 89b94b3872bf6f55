"""Hand-ins from where they live: a git bundle, or a repository fetched at a commit.

No git program touches the hand-in. dulwich (pure Python) reads the objects into memory,
after the pack guard (`pack`) has measured every entry against the caps; the tree at the
chosen commit is written out through the same allowlist sink archives use (`tree`), so
names, collisions, depth and sizes follow the archive rules and refusals carry the same
rule ids. A repository URL is fetched through the outbound guard (`fetch`) and kept as a
bundle, so the stored hand-in is always a file that unpacks again the same way.

Modules: `pack` (the guard), `objects` (bundle, refs, --before), `tree`, `fetch`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dulwich.objects import Commit

from submissions.intake.archive.core import ArchiveRejected, Limits
from submissions.intake.archive.sink import Sink
from submissions.intake.git.objects import (
    BUNDLE_SIGNATURES,
    Objects,
    commit_before,
    commit_subject,
    read_bundle,
    resolve_ref,
)
from submissions.intake.git.pack import GitLimits
from submissions.intake.git.tree import write_tree

__all__ = ["GitLimits", "GitResult", "commit_subject", "extract_bundle", "is_bundle"]


@dataclass
class GitResult:
    """What an accepted bundle unpacked to, and which commit that was."""

    ref: str
    commit: str
    files: int
    total_bytes: int
    lfs_pointers: list[str] = field(default_factory=list)
    format: str = "git bundle"
    commit_time: int | None = None  # the committer date, epoch seconds
    subject: str = ""  # the commit message's first line


def is_bundle(path: Path) -> bool:
    """True when the file starts as a git bundle does."""
    with Path(path).open("rb") as fh:
        return fh.read(len(BUNDLE_SIGNATURES[0])) in BUNDLE_SIGNATURES


def extract_bundle(
    bundle: Path,
    dest: Path,
    limits: Limits,
    git_limits: GitLimits,
    *,
    ref: str | None = None,
    before: datetime | None = None,
    commit: str | None = None,
) -> GitResult:
    """Write the tree of one commit of `bundle` into the new directory `dest`, all or nothing.

    The commit is `commit` when given (a stored submission unpacked again), else the ref's
    tip, or with `before` the newest commit on the ref dated at or before it.
    """
    bundle, dest = Path(bundle), Path(dest)
    if os.path.lexists(dest):
        raise ValueError(f"destination already exists: {dest}")
    size = bundle.stat().st_size
    if size > limits.max_upload_bytes:
        raise ArchiveRejected(
            "upload_too_large",
            f"the bundle is {size} bytes, over the limit of {limits.max_upload_bytes}"
            " (max_upload_bytes)",
        )
    objects = read_bundle(bundle.read_bytes(), git_limits)
    name, chosen = resolve_ref(objects, commit or ref)
    if commit is None and before is not None:
        chosen = commit_before(objects, chosen, before, git_limits)
    try:
        return _write(objects, name, chosen, dest, limits, size)
    except ArchiveRejected as exc:
        # A refusal of the tree still names the commit it judged: the submission keeps it.
        exc.ref, exc.commit = name, chosen.id.decode()
        raise


def _write(
    objects: Objects, name: str, chosen: Commit, dest: Path, limits: Limits, size: int
) -> GitResult:
    partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        sink = Sink(partial, limits, size)
        try:
            walked = write_tree(objects, chosen, sink, limits)
        finally:
            sink.close()
        if walked.files == 0:
            raise ArchiveRejected("empty", "the commit's tree holds no files")
        os.chmod(partial, 0o755)  # noqa: S103 - the policy: folders are 0755
        os.rename(partial, dest)
    except BaseException:
        shutil.rmtree(partial)
        raise
    return GitResult(
        ref=name,
        commit=chosen.id.decode(),
        files=walked.files,
        total_bytes=sink.bytes,
        lfs_pointers=walked.lfs_pointers,
        commit_time=chosen.commit_time,
        subject=commit_subject(chosen),
    )
