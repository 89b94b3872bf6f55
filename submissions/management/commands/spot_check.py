"""manage.py spot_check SUBMISSION_ID [--endpoint NAME] [--recording PATH]: re-ask live."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from submissions.checks.spot_check import cassettes_live_spot_check
from submissions.models import Submission


class Command(BaseCommand):
    help = (
        "Re-ask one recorded chat exchange of a submission against a team model endpoint "
        "(SPOT_CHECK_ENDPOINTS), within its caps, and store the live spot check's result. "
        "Prints the status and summary; exits non-zero when the check could not run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission", type=int, help="the submission's id")
        parser.add_argument("--endpoint", help="the endpoint's name (default: the first)")
        parser.add_argument("--recording", help="the recording's path (default: sampled)")

    def handle(self, *args: Any, **options: Any) -> None:
        submission = Submission.objects.filter(pk=options["submission"]).first()
        if submission is None:
            raise CommandError(f"no submission with id {options['submission']}")
        outcome = cassettes_live_spot_check(
            submission=submission, endpoint=options["endpoint"], recording=options["recording"]
        )
        for item in outcome.evidence[1:]:
            self.stderr.write(item["message"])
        self.stdout.write(f"{outcome.status}: {outcome.summary}")
        if outcome.status == "error":
            raise CommandError(outcome.summary)
