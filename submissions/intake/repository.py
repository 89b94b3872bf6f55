"""Intake from a repository URL: fetched at one ref through the outbound guard, then the
bundle path (stored as a bundle, judged at one commit, the same commit twice deduped)."""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from dulwich.objects import Commit, ObjectID

from submissions.intake.archive import ArchiveRejected
from submissions.intake.git.fetch import fetch_bundle, split_credentials
from submissions.intake.git.objects import Objects, commit_subject, read_bundle, resolve_ref
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
    token: str = "",
) -> IntakeResult:
    """Fetch a repository's ref and store it as a submission judged at one commit.

    `token` (an access token for a private repository) is used for this fetch only.

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
                token=token,
            )
        except ArchiveRejected as exc:
            detail = f"{exc.detail} ({exc.rule})"
            raise UploadRejected(detail.replace(token, "***") if token else detail) from None
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


def _is_ancestor(objects: Objects, tip: Commit, wanted: str, limit: int) -> bool:
    """True when `wanted` is `tip` or one of its ancestors (at most `limit` commits read)."""
    seen: set[bytes] = set()
    pending = [tip.id]
    while pending and len(seen) < limit:
        sha = pending.pop()
        if sha in seen:
            continue
        if sha.decode() == wanted:
            return True
        seen.add(sha)
        try:
            found = objects.store[ObjectID(sha)]
        except KeyError:
            continue
        if isinstance(found, Commit):
            pending.extend(found.parents)
    return False


def _ref_now(submission: Submission, token: str) -> tuple[str, str, str]:
    """(state, the ref's commit now, detail) of one fetch of the submission's ref."""
    limits = git_limits()
    with upload_scratch("check-") as scratch:
        bundle = scratch / "repository.bundle"
        fetch_bundle(
            submission.source_url,
            bundle,
            ref=submission.source_ref or None,
            allow=list(settings.OUTBOUND_ALLOW),
            limits=limits,
            token=token,
        )
        objects = read_bundle(bundle.read_bytes(), limits)
    name, tip = resolve_ref(objects, None)
    now = tip.id.decode()
    judged = submission.source_commit
    if now == judged:
        return Submission.RefState.SAME, now, f"{name} still points at the commit judged"
    if _is_ancestor(objects, tip, judged, limits.max_commits):
        return (
            Submission.RefState.MOVED,
            now,
            f"{name} moved on to {now[:10]} (“{commit_subject(tip)}”); the commit judged is "
            "still in its history",
        )
    return (
        Submission.RefState.REWRITTEN,
        now,
        f"{name} now points at {now[:10]} (“{commit_subject(tip)}”), and the commit judged is "
        "no longer in its history: the history was rewritten (a force-push)",
    )


def ref_check(submission: Submission, *, token: str = "") -> Submission:
    """Fetch a repository submission's ref again and store where it points now.

    What was judged (the commit, the checks) never changes. `token` is used for this fetch
    only: it is neither stored nor logged, and no message holds it.
    """
    if submission.source_kind != Submission.SourceKind.REPOSITORY or not submission.source_url:
        raise ValueError("only a submission fetched from a repository URL can be checked again")
    try:
        state, now, detail = _ref_now(submission, token)
    except ArchiveRejected as exc:
        state, now = Submission.RefState.FAILED, ""
        detail = str(exc).replace(token, "***") if token else str(exc)
        if exc.rule == "fetch_failed" and ("401" in exc.detail or "403" in exc.detail):
            detail += "; a private repository needs its access token again: tokens are not kept"
    Submission.objects.filter(pk=submission.pk).update(
        ref_checked_at=timezone.now(),
        ref_check_state=state,
        ref_check_commit=now,
        ref_check_detail=detail[:2000],
    )
    submission.refresh_from_db()
    return submission
