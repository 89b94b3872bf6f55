"""manage.py rerecord SUBMISSION_ID ARCHIVE [--wait | --inline]: compare with a re-record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from submissions.intake.rerecord import rerecord_create
from submissions.intake.upload import UploadRejected
from submissions.management.commands._jobs import run_or_wait
from submissions.models import Rerecord, Submission


class Command(BaseCommand):
    help = (
        "Compare a submission's recordings with their re-recorded versions (an archive of the "
        "same repository with its recordings made again). With --wait or --inline, prints each "
        "pair that differs and where it first diverges; the last line of stdout is the "
        "re-record id. A rejected archive exits non-zero with the reason on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("submission", type=int, help="the submission's id")
        parser.add_argument("archive", type=Path)
        parser.add_argument("--wait", action="store_true", help="return when the comparison ends")
        parser.add_argument(
            "--timeout", type=float, default=1800, help="seconds --wait waits for a worker"
        )
        parser.add_argument(
            "--inline", action="store_true", help="compare in this process, not on a worker"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        archive: Path = options["archive"]
        if not archive.is_file():
            raise CommandError(f"{archive}: no such file")
        submission = Submission.objects.filter(pk=options["submission"]).first()
        if submission is None:
            raise CommandError(f"no submission with id {options['submission']}")
        try:
            with archive.open("rb") as handle:
                rerecord, created = rerecord_create(
                    submission=submission, upload=handle, filename=archive.name
                )
        except UploadRejected as exc:
            raise CommandError(f"{archive}: {exc}") from None
        if not created:
            self.stderr.write(f"already uploaded as re-record {rerecord.pk}")
        run_or_wait(self, submission=submission, options=options, reported_id=rerecord.pk)
        rerecord.refresh_from_db()
        self._summary(rerecord)
        self.stdout.write(str(rerecord.pk))
        if rerecord.status == Rerecord.Status.ERROR:
            raise CommandError(f"the comparison failed: {rerecord.status_reason}")

    def _summary(self, rerecord: Rerecord) -> None:
        if rerecord.status != Rerecord.Status.READY:
            self.stderr.write(f"re-record {rerecord.pk}: {rerecord.get_status_display()}")
            return
        self.stdout.write(
            f"{rerecord.pair_count} paired, {rerecord.changed_count} differ; "
            f"{rerecord.only_original} not re-recorded, {rerecord.only_rerecorded} only in the "
            "re-record"
        )
        pairs = rerecord.pairs.filter(changed=True).exclude(matched_by="")
        for pair in pairs.only("original_path", "rerecorded_path", "first_turn")[:200]:
            where = "turn counts differ" if pair.first_turn is None else f"turn {pair.first_turn}"
            self.stdout.write(f"differs: {pair.original_path} ({where})")
