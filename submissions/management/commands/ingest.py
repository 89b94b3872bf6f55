"""manage.py ingest ARCHIVE_BUNDLE_OR_URL --assignment SLUG --candidate NAME [--ref REF]
[--before ISO-TIME] [--token-env VAR | --token-file PATH|-] [--stub-url URL] [--inline|--wait].

A repository's access token is read from an environment variable or a file (or stdin), never
from argv, where `ps` and shell history would show it; it is sealed on the submission as the
page's form keeps it (`submission_from_repository`), and no message holds it.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import URLValidator

from submissions.intake.git.fetch import split_credentials
from submissions.intake.repository import AccessRefused, submission_from_repository
from submissions.intake.upload import GitSource, IntakeResult, UploadRejected, submission_create
from submissions.management.commands._jobs import run_or_wait
from submissions.models import Assignment, Candidate


class Command(BaseCommand):
    help = (
        "Create a submission from an archive, a git bundle, or a repository URL frozen at a "
        "commit. Progress goes to stderr; the last line of stdout is the submission id. A "
        "rejected hand-in exits non-zero with the reason (and its rule) on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="an archive, a git bundle, or an http(s) repository URL")
        parser.add_argument("--ref", default=None, help="the branch, tag or ref to judge")
        parser.add_argument(
            "--before",
            type=_instant,
            default=None,
            help="judge the last commit on the ref dated at or before this ISO time (UTC if"
            " no offset); commit dates are the candidate's to set",
        )
        secret = parser.add_mutually_exclusive_group()
        secret.add_argument(
            "--token-env",
            metavar="VAR",
            default=None,
            help="read a private repository's access token from this environment variable",
        )
        secret.add_argument(
            "--token-file",
            metavar="PATH",
            default=None,
            help="read a private repository's access token from this file ('-': stdin)",
        )
        parser.add_argument("--assignment", required=True, help="the assignment's slug")
        parser.add_argument("--candidate", required=True, help="the candidate's name")
        parser.add_argument("--stub-url", default="", help="the candidate's live stub URL")
        parser.add_argument("--wait", action="store_true", help="return when the jobs end")
        parser.add_argument(
            "--timeout", type=float, default=1800, help="seconds --wait waits for a worker"
        )
        parser.add_argument(
            "--inline",
            action="store_true",
            help="run the jobs in this process instead of waiting for a worker",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        raw = str(options["source"])
        is_url = "://" in raw
        # Only the URL without its credentials is ever printed or stored.
        shown = split_credentials(raw)[0] if is_url else raw
        if not is_url and not Path(raw).is_file():
            raise CommandError(f"{raw}: no such file")
        token = _token(options)
        if token and not is_url:
            raise CommandError("an access token is for a repository URL, not a file")
        try:
            assignment = Assignment.objects.get(slug=options["assignment"])
        except Assignment.DoesNotExist:
            slugs = ", ".join(Assignment.objects.values_list("slug", flat=True)) or "none yet"
            raise CommandError(
                f"no assignment with slug {options['assignment']!r} (known: {slugs})"
            ) from None
        stub_url = str(options["stub_url"] or "")
        if stub_url:
            try:
                URLValidator(schemes=["http", "https"])(stub_url)
            except ValidationError:
                raise CommandError(f"--stub-url {stub_url!r} is not an http(s) URL") from None
        name = " ".join(str(options["candidate"]).split())
        if not name:
            raise CommandError("--candidate must name the candidate")
        candidate, _ = Candidate.objects.get_or_create(name=name)
        try:
            result = _ingest(raw, is_url, candidate, assignment, stub_url, token, options)
        except AccessRefused as exc:
            how = "--token-env VAR or --token-file PATH|-"
            raise CommandError(f"{shown}: rejected: {exc} ({how})") from None
        except UploadRejected as exc:
            raise CommandError(f"{shown}: rejected: {exc}") from None
        submission = result.submission
        if not result.created:
            self.stderr.write(f"already ingested as submission {submission.pk}")
        if result.reason:
            self.stdout.write(str(submission.pk))
            raise CommandError(f"{shown}: rejected: {result.reason}")
        self.stderr.write(f"submission {submission.pk} stored (sha256 {submission.archive_sha256})")
        if submission.source_commit:
            self.stderr.write(f"judged at {submission.source_ref} {submission.source_commit}")
        run_or_wait(self, submission=submission, options=options, reported_id=submission.pk)
        self.stdout.write(str(submission.pk))


def _instant(text: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


_TOKEN_MAX_CHARS = 500  # the form's token field's max_length


def _token(options: dict[str, Any]) -> str:
    """The access token --token-env or --token-file names ("" without either), stripped as
    the form's field strips it. Errors name the variable or the file, never the value."""
    if options["token_env"]:
        var = str(options["token_env"])
        if var not in os.environ:
            raise CommandError(f"--token-env: the environment variable {var} is not set")
        token = os.environ[var].strip()
        where = f"the environment variable {var}"
    elif options["token_file"]:
        path = str(options["token_file"])
        try:
            token = (sys.stdin.read() if path == "-" else Path(path).read_text()).strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise CommandError(f"--token-file: {path} could not be read ({reason})") from None
        where = "stdin" if path == "-" else path
    else:
        return ""
    if not token:
        raise CommandError(f"--token-*: {where} holds no access token")
    if len(token) > _TOKEN_MAX_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise CommandError(f"--token-*: {where} does not hold one access token on one line")
    return token


def _ingest(
    raw: str,
    is_url: bool,
    candidate: Candidate,
    assignment: Assignment,
    stub_url: str,
    token: str,
    options: dict[str, Any],
) -> IntakeResult:
    """Fetch a repository, or read a file (an archive, or a bundle judged at --ref/--before)."""
    ref, before = options["ref"], options["before"]
    if is_url:
        return submission_from_repository(
            url=raw,
            candidate=candidate,
            assignment=assignment,
            ref=ref,
            before=before,
            stub_url=stub_url,
            token=token,
        )
    path = Path(raw)
    source = GitSource(ref=ref, before=before) if ref or before else None
    with path.open("rb") as handle:
        return submission_create(
            upload=handle,
            filename=path.name,
            candidate=candidate,
            assignment=assignment,
            stub_url=stub_url,
            source=source,
        )
