"""What the replay's runs wrote: kept per submission so that evidence naming a graded output
or a run log (`out/answers.json`, `out/run.log`) opens in the file viewer as "written by run
1" or "run 2". Capped and redacted like every file the viewer shows; a new replay replaces
them."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction

from submissions.models import Job, RunFile, Submission
from submissions.redact import redact_text


def run_files_keep(
    *, submission: Submission, job: Job | None, runs: Mapping[int, Mapping[str, bytes | None]]
) -> int:
    """Replace the submission's kept run files with what these runs wrote (run number ->
    path -> bytes, None for a file the run did not write). Returns how many were kept."""
    rows = []
    for number, outputs in runs.items():
        for path, data in outputs.items():
            if data is None:
                continue
            head = data[: RunFile.MAX_BYTES]
            binary = b"\x00" in head[:8192]
            text = "" if binary else redact_text(head.decode("utf-8", "replace"))
            rows.append(
                RunFile(
                    submission=submission,
                    job=job,
                    run=number,
                    path=path[:500],
                    text=text,
                    size=len(data),
                    binary=binary,
                )
            )
    with transaction.atomic():
        RunFile.objects.filter(submission=submission).delete()
        RunFile.objects.bulk_create(rows)
    return len(rows)
