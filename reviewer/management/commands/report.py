"""manage.py report ID --format json."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.review.submission_report import report_build
from submissions.models import Submission


class Command(BaseCommand):
    help = "Print a submission's report (checks, findings, recordings, jobs, scores)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission_id", type=int)
        parser.add_argument("--format", choices=["json"], default="json")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            submission = Submission.objects.select_related("candidate", "assignment").get(
                pk=options["submission_id"]
            )
        except Submission.DoesNotExist:
            raise CommandError(f"no submission {options['submission_id']}") from None
        report = report_build(submission)
        self.stdout.write(json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False))
