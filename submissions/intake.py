"""Intake: store an uploaded archive, check it by unpacking safely, and start its jobs."""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from submissions.archive import ArchiveRejected, ExtractResult, Limits, extract_archive
from submissions.jobs import JobError, Outcome, Progress, handler, job_create
from submissions.models import Assignment, Candidate, Finding, Job, Submission

log = logging.getLogger(__name__)

_CHUNK = 1024 * 1024


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


def tree_path(submission: Submission) -> Path:
    """Where a submission's unpacked tree lives on this machine.

    Keyed by id and archive hash: ids can repeat (SQLite reuses a deleted row's id), and a
    stale tree must never be taken for another submission's.
    """
    folder = f"{submission.pk}-{submission.archive_sha256[:16]}"
    return Path(settings.WORK_DIR) / "submissions" / folder / "tree"


def spool_upload(upload: IO[bytes], dest: Path) -> tuple[str, int]:
    """Copy an upload to a local file in chunks, returning its sha256 and size."""
    digest = hashlib.sha256()
    size = 0
    limit = settings.INTAKE_MAX_UPLOAD_BYTES
    with dest.open("wb") as out:
        while chunk := upload.read(_CHUNK):
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
    uploaded_by: object | None = None,
) -> IntakeResult:
    """Store an archive as a submission, or return the one already made from the same bytes.

    The archive is unpacked once here, into a temporary folder, so a hostile or broken
    archive is refused while the uploader waits, with the entry and the rule that refused it.
    A refused archive is still kept as a `rejected` submission, so nothing sent is lost.
    """
    Path(settings.WORK_DIR).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="upload-", dir=settings.WORK_DIR))
    try:
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

        safe_name = Path(filename).name[:200] or "archive"
        try:
            with transaction.atomic():
                submission = Submission(
                    candidate=candidate,
                    assignment=assignment,
                    archive_name=safe_name,
                    archive_sha256=sha256,
                    archive_size=size,
                    stub_url=stub_url,
                    uploaded_by=uploaded_by if getattr(uploaded_by, "pk", None) else None,
                )
                if rejected is not None:
                    submission.status = Submission.Status.REJECTED
                    submission.status_reason = str(rejected)
                else:
                    assert result is not None
                    submission.archive_format = result.format
                    submission.file_count = result.files
                    submission.unpacked_bytes = result.total_bytes
                with spooled.open("rb") as handle:
                    submission.archive.save(f"{sha256[:16]}-{safe_name}", File(handle), save=False)
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
                    dest = tree_path(submission)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if dest.exists():  # a leftover of a rolled-back transaction
                        shutil.rmtree(dest)
                    (scratch / "tree").rename(dest)
                    job_create(submission=submission, kind=Job.Kind.INTAKE)
        except IntegrityError:
            # A concurrent upload of the same bytes won the race: answer with its submission.
            existing = Submission.objects.get(
                candidate=candidate, assignment=assignment, archive_sha256=sha256
            )
            return IntakeResult(existing, created=False)
        return IntakeResult(submission, created=True, rejected=rejected)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def submission_tree(submission: Submission) -> Path:
    """The unpacked tree on this machine, unpacked again from storage when missing here."""
    return archive_tree(submission.archive.name, tree_path(submission))


def archive_tree(stored_name: str, dest: Path) -> Path:
    """`dest` holding the stored archive unpacked; unpacked (with the intake caps) if missing."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="fetch-", dir=dest.parent))
    try:
        local = scratch / "archive"
        with default_storage.open(stored_name, "rb") as src, local.open("wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
        extract_archive(local, scratch / "tree", intake_limits())
        try:
            (scratch / "tree").rename(dest)
        except OSError:
            if not dest.is_dir():  # another worker on this machine may have won the race
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return dest


@handler(Job.Kind.INTAKE)
def intake_run(job: Job, progress: Progress) -> Outcome:
    """Make sure the tree is unpacked on this worker and describe it."""
    submission = job.submission
    progress.step("unpack", 10)
    try:
        tree = submission_tree(submission)
    except ArchiveRejected as exc:
        raise JobError(f"the stored archive no longer unpacks: {exc}") from exc
    except FileNotFoundError as exc:
        raise JobError(f"the stored archive is missing: {exc}") from exc
    progress.step("inventory", 60)
    files = 0
    total = 0
    for path in tree.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            total += path.stat().st_size
    progress.log(f"unpacked {files} files, {total} bytes ({submission.archive_format})")
    Submission.objects.filter(pk=submission.pk).update(
        file_count=files, unpacked_bytes=total, status=Submission.Status.PROCESSING
    )
    # A redelivered intake must not queue a second analysis.
    if not submission.jobs.filter(kind=Job.Kind.ANALYSIS).exists():
        job_create(submission=submission, kind=Job.Kind.ANALYSIS)
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, f"{files} files unpacked")


def submission_settle(*, submission_id: int) -> None:
    """Mark a submission ready once all its jobs ended (error when intake itself failed)."""
    submission = Submission.objects.filter(pk=submission_id).first()
    if submission is None or submission.status == Submission.Status.REJECTED:
        return
    jobs = list(submission.jobs.values_list("kind", "state", "error"))
    if any(state not in Job.FINAL_STATES for _, state, _ in jobs):
        return
    intake_failed = [
        err for kind, state, err in jobs if kind == Job.Kind.INTAKE and state != "passed"
    ]
    if intake_failed:
        status, reason = Submission.Status.ERROR, intake_failed[0] or "intake did not pass"
    else:
        status, reason = Submission.Status.READY, ""
    Submission.objects.filter(pk=submission_id).update(status=status, status_reason=reason)
