"""Re-record uploads: a reviewer uploads the recordings made again against the live model.

The upload is checked like a submission's archive (same extractor, same caps) while the
reviewer waits; the `rerecord` job (`submissions.runs.rerecord`) then compares it.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction

from submissions.intake.archive import ArchiveRejected, extract_archive
from submissions.intake.trees import intake_limits
from submissions.intake.upload import (
    UploadRejected,
    place_tree,
    safe_archive_name,
    spool_upload,
    store_archive,
    stored_uploader,
    upload_scratch,
)
from submissions.jobs.queue import job_create
from submissions.models import Job, Rerecord, Submission


def rerecord_tree_path(rerecord: Rerecord) -> Path:
    """Where a re-record's unpacked tree lives on this machine (keyed by id and hash)."""
    folder = f"{rerecord.pk}-{rerecord.archive_sha256[:16]}"
    return Path(settings.WORK_DIR) / "rerecords" / folder / "tree"


def rerecord_create(
    *,
    submission: Submission,
    upload: IO[bytes],
    filename: str,
    uploaded_by: AbstractBaseUser | AnonymousUser | None = None,
) -> tuple[Rerecord, bool]:
    """Store a re-record archive and queue its comparison; the same bytes twice are one.

    Raises UploadRejected (with the entry and the rule) for an archive the extractor refuses:
    nothing is stored then, and the reviewer still has the file.
    """
    with upload_scratch("rerecord-") as scratch:
        spooled = scratch / "archive"
        sha256, size = spool_upload(upload, spooled)
        existing = Rerecord.objects.filter(submission=submission, archive_sha256=sha256).first()
        if existing is not None:
            return existing, False
        try:
            extract_archive(spooled, scratch / "tree", intake_limits())
        except ArchiveRejected as exc:
            raise UploadRejected(f"The archive was rejected: {exc}") from exc
        try:
            with transaction.atomic():
                rerecord = Rerecord(
                    submission=submission,
                    archive_name=safe_archive_name(filename),
                    archive_sha256=sha256,
                    archive_size=size,
                    uploaded_by=stored_uploader(uploaded_by),
                )
                store_archive(rerecord, spooled, filename, sha256)
                rerecord.save()
                place_tree(scratch / "tree", rerecord_tree_path(rerecord))
                rerecord.job = job_create(
                    submission=submission, kind=Job.Kind.RERECORD, params={"rerecord": rerecord.pk}
                )
                rerecord.save(update_fields=["job"])
        except IntegrityError:
            # The same bytes uploaded twice at once: answer with the one that was stored.
            return Rerecord.objects.get(submission=submission, archive_sha256=sha256), False
        return rerecord, True
