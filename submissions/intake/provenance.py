"""The history a submission carries, for `cassettes.provenance`: its stored bundle read again.

An archive has none (the check skips, saying so). A bundle or a repository is stored as a
bundle: read under the same pack caps as at intake, and walked from the judged commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.files.storage import default_storage

from cassettes_app.checks.provenance import History, NoHistory
from submissions.intake.archive import ArchiveRejected
from submissions.intake.git.history import MAX_COMMITS, recording_history
from submissions.intake.git.objects import read_bundle
from submissions.intake.trees import git_limits, intake_limits
from submissions.models import Submission


def submission_history(
    submission: Submission, paths: Iterable[str], *, max_commits: int = MAX_COMMITS
) -> History | NoHistory:
    """The judged commit's history for `paths`, or why there is none."""
    if submission.source_kind == Submission.SourceKind.ARCHIVE or not submission.source_commit:
        return NoHistory()
    try:
        with default_storage.open(submission.archive.name, "rb") as handle:
            data = handle.read(intake_limits().max_upload_bytes + 1)
        objects = read_bundle(data, git_limits())
    except (ArchiveRejected, OSError) as exc:
        return NoHistory(f"the stored bundle did not read again: {exc}", error=True)
    return recording_history(
        objects,
        submission.source_commit,
        paths,
        max_commits=max_commits,
        max_blob_bytes=intake_limits().max_file_bytes,
    )
