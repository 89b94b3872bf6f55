"""What `ingest`, `rerun` and `rerecord` share: `--inline` and `--wait` over a submission's
jobs, with the output contract of every command (progress on stderr; on a wait that runs
out, the id the command reports is still the last line of stdout, then it fails)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from submissions.jobs.inline import JobsPending, jobs_run_inline, jobs_wait
from submissions.models import Submission


def run_or_wait(
    command: BaseCommand, *, submission: Submission, options: dict[str, Any], reported_id: int
) -> None:
    """Run the submission's queued jobs here (`--inline`) or wait for a worker (`--wait`)."""
    if options["inline"]:
        jobs_run_inline(submission=submission, report=command.stderr.write)
    elif options["wait"]:
        try:
            jobs_wait(
                submission=submission,
                timeout=float(options["timeout"]),
                report=command.stderr.write,
            )
        except JobsPending as exc:
            command.stdout.write(str(reported_id))
            raise CommandError(str(exc)) from None
