"""manage.py ingest ARCHIVE --assignment SLUG --candidate NAME [--stub-url URL] [--wait]."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import URLValidator

from submissions.intake.upload import UploadRejected, submission_create
from submissions.management.commands._jobs import run_or_wait
from submissions.models import Assignment, Candidate


class Command(BaseCommand):
    help = (
        "Create a submission from an archive. Progress goes to stderr; the last line of stdout "
        "is the submission id. A rejected archive exits non-zero with the reason on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", type=Path)
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
        archive: Path = options["archive"]
        if not archive.is_file():
            raise CommandError(f"{archive}: no such file")
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
            with archive.open("rb") as handle:
                result = submission_create(
                    upload=handle,
                    filename=archive.name,
                    candidate=candidate,
                    assignment=assignment,
                    stub_url=stub_url,
                )
        except UploadRejected as exc:
            raise CommandError(f"{archive}: rejected: {exc}") from None
        submission = result.submission
        if not result.created:
            self.stderr.write(f"already ingested as submission {submission.pk}")
        if result.reason:
            self.stdout.write(str(submission.pk))
            raise CommandError(f"{archive}: rejected: {result.reason}")
        self.stderr.write(f"submission {submission.pk} stored (sha256 {submission.archive_sha256})")
        run_or_wait(self, submission=submission, options=options, reported_id=submission.pk)
        self.stdout.write(str(submission.pk))
