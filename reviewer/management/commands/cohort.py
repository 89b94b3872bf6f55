"""manage.py cohort SLUG --format json: the cohort, its agreement and calibration, as JSON."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.cohort.cohort import cohort_for
from submissions.models import Assignment


class Command(BaseCommand):
    help = (
        "Print one assignment's candidates with every submitted review, and the reviewers' "
        "agreement (Krippendorff's alpha, ordinal; quadratic-weighted kappa per pair) and "
        "calibration, as JSON with sorted keys."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--format", choices=["json"], default="json")

    def handle(self, *args: object, **options: object) -> None:
        assignment = Assignment.objects.filter(slug=options["slug"]).first()
        if assignment is None:
            raise CommandError(f"no assignment {options['slug']!r}")
        self.stdout.write(json.dumps(cohort_for(assignment).as_json(), sort_keys=True, indent=2))
