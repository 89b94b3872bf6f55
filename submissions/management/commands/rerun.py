"""manage.py rerun SUBMISSION_ID [--kind all|replay|trace|probe] [--wait | --inline]."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from submissions.jobs.rerun import RERUN_KINDS, RerunRefused, submission_rerun
from submissions.management.commands._jobs import run_or_wait
from submissions.models import Job, Submission


class Command(BaseCommand):
    help = (
        "Run a submission's jobs again: every job (analysis first, which queues the rest) or "
        "one kind. For a demo judged before the sandbox was installed, after the assignment "
        "changed, or after a failure outside the hand-in. The last line of stdout is the "
        "submission's id; a refusal exits non-zero with the reason on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission", type=int, help="the submission's id")
        parser.add_argument("--kind", choices=list(RERUN_KINDS), default="all")
        parser.add_argument("--wait", action="store_true", help="return when the jobs end")
        parser.add_argument(
            "--timeout", type=float, default=1800, help="seconds --wait waits for a worker"
        )
        parser.add_argument(
            "--inline", action="store_true", help="run the jobs in this process, not on a worker"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        submission = Submission.objects.filter(pk=options["submission"]).first()
        if submission is None:
            raise CommandError(f"no submission with id {options['submission']}")
        try:
            job = submission_rerun(submission=submission, what=str(options["kind"]))
        except RerunRefused as exc:
            raise CommandError(f"submission {submission.pk}: {exc}") from None
        self.stderr.write(f"queued {job.kind} job {job.pk}")
        run_or_wait(self, submission=submission, options=options, reported_id=submission.pk)
        for ended in submission.jobs.filter(pk__gte=job.pk).order_by("pk"):
            note = f": {ended.error}" if ended.error else ""
            self.stderr.write(f"{ended.kind} job {ended.pk}: {ended.state}{note}")
        if (
            options["inline"]
            and submission.jobs.filter(
                pk__gte=job.pk, state__in=[Job.State.ERROR, Job.State.TIMED_OUT]
            ).exists()
        ):
            self.stderr.write("some jobs could not run; see their errors above")
        self.stdout.write(str(submission.pk))
