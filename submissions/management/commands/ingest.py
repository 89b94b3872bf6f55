"""manage.py ingest ARCHIVE_BUNDLE_OR_URL --assignment SLUG --candidate NAME [--ref REF]
[--before ISO-TIME] [--stub-url URL] [--inline|--wait]."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import URLValidator

from submissions.intake.git.fetch import split_credentials
from submissions.intake.repository import submission_from_repository
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
            result = _ingest(raw, is_url, candidate, assignment, stub_url, options)
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


def _ingest(
    raw: str,
    is_url: bool,
    candidate: Candidate,
    assignment: Assignment,
    stub_url: str,
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
