"""Intake from a repository URL: fetched at one ref through the outbound guard, then the
bundle path (stored as a bundle, judged at one commit, the same commit twice deduped)."""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.utils import timezone
from dulwich.objects import Commit, ObjectID

from submissions.intake.archive import ArchiveRejected
from submissions.intake.git.fetch import fetch_bundle, split_credentials, token_authorization
from submissions.intake.git.objects import Objects, commit_subject, read_bundle, resolve_ref
from submissions.intake.trees import git_limits
from submissions.intake.upload import (
    GitSource,
    IntakeResult,
    UploadRejected,
    submission_create,
    upload_scratch,
)
from submissions.jobs.queue import job_create
from submissions.models import Assignment, Candidate, Job, Submission
from submissions.sealed import SecretUnreadable, seal, unseal


class AccessRefused(UploadRejected):
    """The server answered 401 or 403: the repository needs an access token, or refused the
    one sent (the message says which)."""


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

    `token` (an access token for a private repository), or credentials in the URL, are
    kept sealed on the submission for *Check again* (`submission_auth_save`), never in clear.

    A fetch the guard refuses, or that fails, stores nothing: UploadRejected with the rule.
    """
    bare, url_auth = split_credentials(url)
    authorization = token_authorization(token) if token else (url_auth or "")
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
            detail = detail.replace(token, "***") if token else detail
            hint = _auth_hint(exc, bool(authorization))
            raise (AccessRefused if hint else UploadRejected)(detail + hint) from None
        source = GitSource(Submission.SourceKind.REPOSITORY, bare, name, before)
        with bundle.open("rb") as handle:
            result = submission_create(
                upload=handle,
                filename=repository_name(bare),
                candidate=candidate,
                assignment=assignment,
                stub_url=stub_url,
                uploaded_by=uploaded_by,
                source=source,
            )
    if authorization and result.submission.source_kind == Submission.SourceKind.REPOSITORY:
        submission_auth_save(result.submission, authorization=authorization)
    return result


def _auth_hint(exc: ArchiveRejected, sent: bool) -> str:
    """What to do when the server answered 401 or 403 (nothing otherwise): a token was
    refused, or a private repository was asked for without one."""
    if exc.rule != "fetch_failed" or ("401" not in exc.detail and "403" not in exc.detail):
        return ""
    if sent:
        return "; the access token was refused: give a new one"
    return "; a private repository needs an access token: give one"


def submission_auth_save(submission: Submission, *, authorization: str) -> None:
    """Keep the Authorization a repository was fetched with, sealed (the newest one wins)."""
    sealed = seal(authorization)
    Submission.objects.filter(pk=submission.pk).update(source_auth_sealed=sealed)
    submission.source_auth_sealed = sealed


def submission_auth_forget(submission: Submission) -> None:
    """Drop a repository's kept access token."""
    Submission.objects.filter(pk=submission.pk).update(source_auth_sealed="")
    submission.source_auth_sealed = ""


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


def _ref_now(submission: Submission, token: str, authorization: str) -> tuple[str, str, str]:
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
            authorization=authorization,
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

    What was judged (the commit, the checks) never changes. `token`, when given, is used
    for this fetch; without it the sealed one kept from intake (if any) is. No message
    holds either.
    """
    if submission.source_kind != Submission.SourceKind.REPOSITORY or not submission.source_url:
        raise ValueError("only a submission fetched from a repository URL can be checked again")
    state: str
    try:
        authorization = "" if token else unseal(submission.source_auth_sealed)
    except SecretUnreadable as exc:
        state, now, detail = Submission.RefState.FAILED, "", f"not fetched: {exc}"
    else:
        try:
            state, now, detail = _ref_now(submission, token, authorization)
        except ArchiveRejected as exc:
            state, now = Submission.RefState.FAILED, ""
            detail = f"{exc.detail} ({exc.rule})"
            detail = detail.replace(token, "***") if token else detail
            detail += _auth_hint(exc, bool(authorization or token))
    Submission.objects.filter(pk=submission.pk).update(
        ref_checked_at=timezone.now(),
        ref_check_state=state,
        ref_check_commit=now,
        ref_check_detail=detail[:2000],
    )
    submission.refresh_from_db()
    return submission


class RefCheckRefused(Exception):
    """*Check again* cannot start: the message says why."""


def ref_check_start(*, submission: Submission, token: str = "") -> Job:
    """Queue a *Check again* job; a `token` given replaces the kept one (sealed) first.

    One at a time per submission: while one is queued or running, it is the one returned.
    """
    if submission.source_kind != Submission.SourceKind.REPOSITORY or not submission.source_url:
        raise RefCheckRefused("Only a hand-in fetched from a repository URL can be checked again.")
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        if token:
            submission_auth_save(locked, authorization=token_authorization(token))
        running = locked.jobs.filter(kind=Job.Kind.REFCHECK).exclude(state__in=Job.FINAL_STATES)
        return running.first() or job_create(submission=locked, kind=Job.Kind.REFCHECK)
