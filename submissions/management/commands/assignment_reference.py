"""manage.py assignment_reference SLUG [SUBMISSION_ID] [--every-days N]: name the hand-in
whose recordings are spot-checked on a schedule (none: clear it)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from submissions.checks.spot_schedule import ReferenceRefused, assignment_reference_set
from submissions.models import Assignment, Submission


class Command(BaseCommand):
    help = (
        "Name an assignment's reference hand-in (its demo, a sample solution) whose "
        "recordings the scheduler spot-checks live every N days (SPOT_CHECK_ENDPOINTS' first "
        "endpoint, within its caps); the assignment page shows the drift since the last check. "
        "Without a submission id, the reference is cleared."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("submission", type=int, nargs="?")
        parser.add_argument("--every-days", type=int, default=7)

    def handle(self, *args: Any, **options: Any) -> None:
        assignment = Assignment.objects.filter(slug=options["slug"]).first()
        if assignment is None:
            raise CommandError(f"no assignment {options['slug']!r}")
        submission = None
        if options["submission"] is not None:
            submission = Submission.objects.filter(pk=options["submission"]).first()
            if submission is None:
                raise CommandError(f"no submission with id {options['submission']}")
        every = options["every_days"] if submission is not None else 0
        try:
            assignment_reference_set(assignment=assignment, submission=submission, every_days=every)
        except ReferenceRefused as exc:
            raise CommandError(str(exc)) from None
        if submission is None:
            self.stdout.write(f"{assignment.slug}: no reference")
        else:
            self.stdout.write(f"{assignment.slug}: reference {submission.pk}, every {every} days")
