"""Intake from a repository URL: fetched at one ref through the outbound guard, then the
bundle path (stored as a bundle, judged at one commit, the same commit twice deduped)."""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from submissions.intake.archive import ArchiveRejected
from submissions.intake.git.fetch import fetch_bundle, split_credentials
from submissions.intake.trees import git_limits
from submissions.intake.upload import (
    GitSource,
    IntakeResult,
    UploadRejected,
    submission_create,
    upload_scratch,
)
from submissions.models import Assignment, Candidate, Submission


def repository_name(url: str) -> str:
    """A file name for a repository's bundle, from the last part of its URL path."""
    stem = PurePosixPath(urlsplit(url).path.rstrip("/")).name.removesuffix(".git")
    return f"{stem or 'repository'}.bundle"


def submission_from_repository(
    *,
    url: str,
    candidate: Candidate,
    assignment: Assignment,
    ref: str | None = None,
    before: datetime | None = None,
    stub_url: str = "",
    uploaded_by: AbstractBaseUser | AnonymousUser | None = None,
) -> IntakeResult:
    """Fetch a repository's ref and store it as a submission judged at one commit.

    A fetch the guard refuses, or that fails, stores nothing: UploadRejected with the rule.
    """
    bare, _ = split_credentials(url)
    with upload_scratch("fetch-") as scratch:
        bundle = scratch / "repository.bundle"
        try:
            name = fetch_bundle(
                url,
                bundle,
                ref=ref,
                allow=list(settings.OUTBOUND_ALLOW),
                limits=git_limits(),
            )
        except ArchiveRejected as exc:
            raise UploadRejected(f"{exc.detail} ({exc.rule})") from None
        source = GitSource(Submission.SourceKind.REPOSITORY, bare, name, before)
        with bundle.open("rb") as handle:
            return submission_create(
                upload=handle,
                filename=repository_name(bare),
                candidate=candidate,
                assignment=assignment,
                stub_url=stub_url,
                uploaded_by=uploaded_by,
                source=source,
            )
