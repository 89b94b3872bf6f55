"""Intake: store an uploaded archive, check it by unpacking safely, and start its jobs."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.core.files import File
from django.db import IntegrityError, transaction

from submissions.intake.archive import ArchiveRejected, extract_archive
from submissions.intake.git import extract_bundle, is_bundle
from submissions.intake.trees import CHUNK, git_limits, intake_limits, tree_path, tree_placed
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
    """Move an unpacked tree where its owner's jobs look for it, when this host keeps the
    trees of what it receives (INTAKE_KEEP_TREE); otherwise it goes with the upload's scratch
    folder, and the job unpacks it again from storage on whichever host runs it."""
    if not settings.INTAKE_KEEP_TREE:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():  # a leftover of a rolled-back transaction
        shutil.rmtree(dest)
    unpacked.rename(dest)
    tree_placed(dest)


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


@dataclass(frozen=True)
class GitSource:
    """How to judge a git hand-in: which ref, which commit, and where it came from."""

    kind: str = Submission.SourceKind.BUNDLE
    url: str = ""  # a repository's URL, credentials already stripped
    ref: str | None = None
    before: datetime | None = None


@dataclass
class _Unpacked:
    """An upload checked by unpacking: what it unpacked to, or the rule that refused it."""

    kind: str
    format: str = ""
    files: int = 0
    total_bytes: int = 0
    ref: str = ""
    commit: str = ""
    lfs_pointers: list[str] = field(default_factory=list)
    rejected: ArchiveRejected | None = None
    commit_time: datetime | None = None
    subject: str = ""


def _unpack(spooled: Path, dest: Path, source: GitSource | None, bundle: bool) -> _Unpacked:
    """Unpack an archive or a bundle into `dest`, or say which rule refused it."""
    if not bundle:
        try:
            result = extract_archive(spooled, dest, intake_limits())
        except ArchiveRejected as exc:
            return _Unpacked(Submission.SourceKind.ARCHIVE, rejected=exc)
        return _Unpacked(
            Submission.SourceKind.ARCHIVE, result.format, result.files, result.total_bytes
        )
    source = source or GitSource()
    try:
        git = extract_bundle(
            spooled, dest, intake_limits(), git_limits(), ref=source.ref, before=source.before
        )
    except ArchiveRejected as exc:
        return _Unpacked(
            source.kind,
            "git bundle",
            ref=exc.ref or source.ref or "",
            commit=exc.commit,
            rejected=exc,
        )
    when = datetime.fromtimestamp(git.commit_time, UTC) if git.commit_time is not None else None
    return _Unpacked(
        source.kind,
        git.format,
        git.files,
        git.total_bytes,
        git.ref,
        git.commit,
        git.lfs_pointers,
        commit_time=when,
        subject=git.subject,
    )


def _existing(
    candidate: Candidate, assignment: Assignment, *, sha256: str = "", commit: str = ""
) -> Submission | None:
    """The submission already made from the same bytes, or from the same commit."""
    same = Submission.objects.filter(candidate=candidate, assignment=assignment)
    if commit:
        return same.filter(source_commit=commit).first()
    return same.filter(archive_sha256=sha256).first()


def submission_create(
    *,
    upload: IO[bytes],
    filename: str,
    candidate: Candidate,
    assignment: Assignment,
    stub_url: str = "",
    uploaded_by: AbstractBaseUser | AnonymousUser | None = None,
    source: GitSource | None = None,
) -> IntakeResult:
    """Store an archive or a git bundle as a submission, or return the one already made.

    The upload is unpacked once here, into a temporary folder, so a hostile or broken
    hand-in is refused while the uploader waits, with the entry and the rule that refused
    it. A refused hand-in is still kept as a `rejected` submission, so nothing sent is lost.
    The same bytes, or the same commit of a bundle or repository, give the same submission.
    """
    with upload_scratch("upload-") as scratch:
        spooled = scratch / "archive"
        sha256, size = spool_upload(upload, spooled)
        # An archive is one submission per file; a bundle one per commit, known once read.
        bundle = source is not None or is_bundle(spooled)
        existing = None if bundle else _existing(candidate, assignment, sha256=sha256)
        if existing is not None:
            return IntakeResult(existing, created=False)
        unpacked = _unpack(spooled, scratch / "tree", source, bundle)
        if unpacked.commit:
            existing = _existing(candidate, assignment, commit=unpacked.commit)
            if existing is not None:
                return IntakeResult(existing, created=False)
        submission = Submission(
            candidate=candidate,
            assignment=assignment,
            archive_name=safe_archive_name(filename),
            archive_sha256=sha256,
            archive_size=size,
            stub_url=stub_url,
            uploaded_by=stored_uploader(uploaded_by),
            source_kind=unpacked.kind,
            source_url=source.url if source else "",
            source_ref=unpacked.ref[:300],
            source_commit=unpacked.commit,
            source_commit_time=unpacked.commit_time,
            source_commit_subject=unpacked.subject,
        )
        try:
            with transaction.atomic():
                _save(submission, unpacked, spooled, scratch / "tree")
        except IntegrityError:
            # A concurrent upload of the same bytes won the race: answer with its submission.
            found = _existing(candidate, assignment, sha256=sha256, commit=unpacked.commit)
            assert found is not None
            return IntakeResult(found, created=False)
        return IntakeResult(submission, created=True, rejected=unpacked.rejected)


def _save(submission: Submission, unpacked: _Unpacked, spooled: Path, tree: Path) -> None:
    """Save the submission, its archive and findings; place its tree and queue intake."""
    rejected = unpacked.rejected
    if rejected is not None:
        submission.status = Submission.Status.REJECTED
        submission.status_reason = str(rejected)
    else:
        submission.archive_format = unpacked.format
        submission.file_count = unpacked.files
        submission.unpacked_bytes = unpacked.total_bytes
    store_archive(submission, spooled, submission.archive_name, submission.archive_sha256)
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
        return
    for path in unpacked.lfs_pointers:
        Finding.objects.create(
            submission=submission,
            kind="lfs_pointer",
            severity=Finding.Severity.WARN,
            path=path[:1024],
            message="this recording is an LFS pointer: its content is not in the hand-in",
        )
    place_tree(tree, tree_path(submission))
    job_create(submission=submission, kind=Job.Kind.INTAKE)
