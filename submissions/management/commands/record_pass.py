"""manage.py record_pass SUBMISSION_ID [--endpoint NAME] [--wait | --inline]."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from submissions.intake.record_pass import RecordPassRefused, record_pass_queue
from submissions.management.commands._jobs import run_or_wait
from submissions.models import Job, Submission


class Command(BaseCommand):
    help = (
        "Run the assignment's record_command on a submission in the sandbox, its only "
        "network a relay to the host-side model proxy (placeholder key swapped for the team "
        "endpoint's, one path allowed, calls and tokens capped), and compare what it wrote "
        "with the committed recordings as a re-record. Prints the job's summary."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission", type=int, help="the submission's id")
        parser.add_argument("--endpoint", help="the endpoint's name (default: the first)")
        parser.add_argument("--wait", action="store_true", help="return when the pass ends")
        parser.add_argument("--timeout", type=float, default=1800)
        parser.add_argument("--inline", action="store_true", help="run here, not on a worker")

    def handle(self, *args: Any, **options: Any) -> None:
        submission = Submission.objects.filter(pk=options["submission"]).first()
        if submission is None:
            raise CommandError(f"no submission with id {options['submission']}")
        try:
            job = record_pass_queue(submission=submission, endpoint=options["endpoint"])
        except RecordPassRefused as exc:
            raise CommandError(str(exc)) from None
        run_or_wait(self, submission=submission, options=options, reported_id=job.pk)
        job.refresh_from_db()
        lines = job.log.strip().splitlines()
        self.stdout.write(f"{job.state}: {job.error or (lines[-1] if lines else '')}")
        if job.state != Job.State.PASSED:
            raise CommandError(job.error or job.state)
