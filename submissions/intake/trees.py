"""Where a submission's unpacked tree lives, unpacked again from storage when missing here."""

from __future__ import annotations

import shutil
import tempfile
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
    return dest
