"""manage.py assignment_apply FILE [FILE …]: create or update assignments from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.models import RubricTemplate
from submissions.assignments import AssignmentError, assignment_apply, load_assignment_file


class Command(BaseCommand):
    help = "Create or update assignments from YAML files (same validation as the form)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", type=Path)

    def handle(self, *args: object, **options: Any) -> None:
        for path in options["files"]:
            try:
                values = load_assignment_file(path)
            except AssignmentError as exc:
                raise CommandError(f"{path}: {exc}") from None
            if (
                values["rubric"]
                and not RubricTemplate.objects.filter(slug=values["rubric"]).exists()
            ):
                known = ", ".join(RubricTemplate.objects.values_list("slug", flat=True))
                raise CommandError(
                    f"{path}: rubric: no rubric {values['rubric']!r} (known: {known})"
                )
            assignment, changed = assignment_apply(values=values)
            verb = "updated" if changed else "unchanged"
            self.stdout.write(f"{assignment.slug}: {verb}")
