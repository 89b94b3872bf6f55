"""Re-record uploads: a reviewer uploads the recordings made again against the live model.

The upload is checked like a submission's archive (same extractor, same caps) while the
reviewer waits; the `rerecord` job (`submissions.runs.rerecord`) then compares it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.db import IntegrityError, transaction

from submissions.intake.archive import ArchiveRejected, extract_archive
from submissions.intake.trees import intake_limits
from submissions.intake.upload import UploadRejected, spool_upload
from submissions.jobs.queue import job_create
from submissions.models import Job, Rerecord, Submission


def rerecord_tree_path(rerecord: Rerecord) -> Path:
    """Where a re-record's unpacked tree lives on this machine (keyed by id and hash)."""
    folder = f"{rerecord.pk}-{rerecord.archive_sha256[:16]}"
    return Path(settings.WORK_DIR) / "rerecords" / folder / "tree"


def rerecord_create(
    *, submission: Submission, upload: IO[bytes], filename: str, uploaded_by: object | None = None
) -> tuple[Rerecord, bool]:
    """Store a re-record archive and queue its comparison; the same bytes twice are one.

    Raises UploadRejected (with the entry and the rule) for an archive the extractor refuses:
    nothing is stored then, and the reviewer still has the file.
    """
    Path(settings.WORK_DIR).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="rerecord-", dir=settings.WORK_DIR))
    try:
        spooled = scratch / "archive"
        sha256, size = spool_upload(upload, spooled)
        existing = Rerecord.objects.filter(submission=submission, archive_sha256=sha256).first()
        if existing is not None:
            return existing, False
        try:
            extract_archive(spooled, scratch / "tree", intake_limits())
        except ArchiveRejected as exc:
            raise UploadRejected(f"The archive was rejected: {exc}") from exc
        safe_name = Path(filename).name[:200] or "archive"
        try:
            with transaction.atomic():
                rerecord = Rerecord(
                    submission=submission,
                    archive_name=safe_name,
                    archive_sha256=sha256,
                    archive_size=size,
                    uploaded_by=uploaded_by if getattr(uploaded_by, "pk", None) else None,
                )
                with spooled.open("rb") as handle:
                    rerecord.archive.save(f"{sha256[:16]}-{safe_name}", File(handle), save=False)
                rerecord.save()
                dest = rerecord_tree_path(rerecord)
                dest.parent.mkdir(parents=True, exist_ok=True)
                if dest.exists():  # a leftover of a rolled-back transaction
                    shutil.rmtree(dest)
                (scratch / "tree").rename(dest)
                rerecord.job = job_create(
                    submission=submission, kind=Job.Kind.RERECORD, params={"rerecord": rerecord.pk}
                )
                rerecord.save(update_fields=["job"])
        except IntegrityError:
            # The same bytes uploaded twice at once: answer with the one that was stored.
            return Rerecord.objects.get(submission=submission, archive_sha256=sha256), False
        return rerecord, True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
