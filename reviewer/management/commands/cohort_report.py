"""manage.py cohort_report SLUG --output FILE.html [--submission PK]: the committee's report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.cohort.committee_report import cohort_report_html, submission_report_html
from submissions.models import Assignment, Submission


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, then rename it
    over: a reader never sees half a report, and a failed write leaves the old file."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class Command(BaseCommand):
    help = (
        "Write one assignment's committee report (every candidate's verdict, each "
        "reviewer's scores with their evidence, agreement, flagged disagreements, the audit "
        "trail; redacted) as one self-contained HTML file that opens offline. With "
        "--submission, one submission's report instead. The file is readable by its owner "
        "only (it is confidential to the committee)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--output", "-o", required=True, help="the HTML file to write")
        parser.add_argument(
            "--submission", type=int, help="one submission of this assignment, by id"
        )

    def handle(self, *args: object, **options: Any) -> None:
        slug = str(options["slug"])
        assignment = Assignment.objects.filter(slug=slug).first()
        if assignment is None:
            raise CommandError(f"no assignment {slug!r}")
        path = Path(str(options["output"])).expanduser().absolute()
        if path.is_dir():
            raise CommandError(f"cannot write {path}: it is a folder; name a file")
        if not path.parent.is_dir():
            raise CommandError(f"cannot write {path}: no folder {path.parent}")
        pk = options.get("submission")
        if pk is None:
            html = cohort_report_html(assignment, generated_by="manage.py cohort_report")
        else:
            submission = (
                Submission.objects.filter(pk=pk, assignment=assignment)
                .select_related("candidate", "assignment")
                .first()
            )
            if submission is None:
                raise CommandError(f"no submission {pk} in assignment {slug!r}")
            html = submission_report_html(submission, generated_by="manage.py cohort_report")
        data = html.encode("utf-8")
        try:
            write_atomically(path, data)
        except OSError as e:
            raise CommandError(f"cannot write {path}: {e.strerror or e}") from None
        self.stdout.write(f"{path} ({len(data):,} bytes)")
