"""Intake: store an uploaded archive, check it by unpacking safely, and start its jobs."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.core.files import File
from django.db import IntegrityError, transaction

from submissions.intake.archive import ArchiveRejected, ExtractResult, extract_archive
from submissions.intake.trees import CHUNK, intake_limits, tree_path
from submissions.jobs.queue import job_create
from submissions.models import Assignment, Candidate, Finding, Job, Submission

log = logging.getLogger(__name__)


@contextlib.contextmanager
def upload_scratch(prefix: str) -> Iterator[Path]:
    """A private folder under WORK_DIR for one upload, removed whatever happens."""
    Path(settings.WORK_DIR).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=settings.WORK_DIR))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stored_uploader(user: AbstractBaseUser | AnonymousUser | None) -> User | None:
    """The uploader a row keeps: a saved user, never the anonymous one (it has no id)."""
    return user if isinstance(user, get_user_model()) and user.pk else None


def store_archive(instance: Any, spooled: Path, filename: str, sha256: str) -> None:
    """Save the spooled archive to storage on `instance` (a Submission or Rerecord)."""
    with spooled.open("rb") as handle:
        instance.archive.save(f"{sha256[:16]}-{instance.archive_name}", File(handle), save=False)


def safe_archive_name(filename: str) -> str:
    """The uploaded file's own name, without folders, as it is shown and stored."""
    return Path(filename).name[:200] or "archive"


def place_tree(unpacked: Path, dest: Path) -> None:
    """Move an unpacked tree where its owner's jobs look for it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():  # a leftover of a rolled-back transaction
        shutil.rmtree(dest)
    unpacked.rename(dest)


class UploadRejected(Exception):
    """The upload was refused before any submission existed (too large, unreadable)."""


@dataclass
class IntakeResult:
    submission: Submission
    created: bool
    rejected: ArchiveRejected | None = None

    @property
    def reason(self) -> str:
        if self.rejected is not None:
            return str(self.rejected)
        if self.submission.status == Submission.Status.REJECTED:
            return self.submission.status_reason
        return ""


def spool_upload(upload: IO[bytes], dest: Path) -> tuple[str, int]:
    """Copy an upload to a local file in chunks, returning its sha256 and size."""
    digest = hashlib.sha256()
    size = 0
    limit = settings.INTAKE_MAX_UPLOAD_BYTES
    with dest.open("wb") as out:
        while chunk := upload.read(CHUNK):
            size += len(chunk)
            if size > limit:
                raise UploadRejected(
                    f"the archive is larger than the upload limit of {limit} bytes "
                    "(upload_too_large)"
                )
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest(), size


def submission_create(
    *,
    upload: IO[bytes],
    filename: str,
    candidate: Candidate,
    assignment: Assignment,
    stub_url: str = "",
    uploaded_by: AbstractBaseUser | AnonymousUser | None = None,
) -> IntakeResult:
    """Store an archive as a submission, or return the one already made from the same bytes.

    The archive is unpacked once here, into a temporary folder, so a hostile or broken
    archive is refused while the uploader waits, with the entry and the rule that refused it.
    A refused archive is still kept as a `rejected` submission, so nothing sent is lost.
    """
    with upload_scratch("upload-") as scratch:
        spooled = scratch / "archive"
        sha256, size = spool_upload(upload, spooled)
        existing = Submission.objects.filter(
            candidate=candidate, assignment=assignment, archive_sha256=sha256
        ).first()
        if existing is not None:
            return IntakeResult(existing, created=False)

        rejected: ArchiveRejected | None = None
        result: ExtractResult | None = None
        try:
            result = extract_archive(spooled, scratch / "tree", intake_limits())
        except ArchiveRejected as exc:
            rejected = exc

        try:
            with transaction.atomic():
                submission = Submission(
                    candidate=candidate,
                    assignment=assignment,
                    archive_name=safe_archive_name(filename),
                    archive_sha256=sha256,
                    archive_size=size,
                    stub_url=stub_url,
                    uploaded_by=stored_uploader(uploaded_by),
                )
                if rejected is not None:
                    submission.status = Submission.Status.REJECTED
                    submission.status_reason = str(rejected)
                else:
                    assert result is not None
                    submission.archive_format = result.format
                    submission.file_count = result.files
                    submission.unpacked_bytes = result.total_bytes
                store_archive(submission, spooled, filename, sha256)
                submission.save()
                if submission.uploaded_by_id:
                    submission.reviewers.add(submission.uploaded_by_id)
                if rejected is not None:
                    Finding.objects.create(
                        submission=submission,
                        kind="archive_rejected",
                        severity=Finding.Severity.ERROR,
                        path=(rejected.entry or "")[:1024],
                        message=str(rejected),
                    )
                else:
                    place_tree(scratch / "tree", tree_path(submission))
                    job_create(submission=submission, kind=Job.Kind.INTAKE)
        except IntegrityError:
            # A concurrent upload of the same bytes won the race: answer with its submission.
            existing = Submission.objects.get(
                candidate=candidate, assignment=assignment, archive_sha256=sha256
            )
            return IntakeResult(existing, created=False)
        return IntakeResult(submission, created=True, rejected=rejected)
