"""What a job handler sees and returns: its progress, its outcome, the errors it may raise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from submissions.models import Job
from submissions.redact import redact_text


@dataclass
class Outcome:
    """What a job handler returns: the final state and a one-line summary."""

    state: str
    summary: str = ""
    internal: bool = False  # a fault of ours, not of the hand-in or the environment


class JobFailed(Exception):
    """A handler's way to end its job `failed` (the submission was judged, and failed)."""


class JobError(Exception):
    """A handler's way to end its job `error` with a reason (the check could not run)."""


Handler = Callable[[Job, "Progress"], Outcome | None]


class Progress:
    """Moves a running job's progress bar and appends to its capped, redacted log."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def step(self, label: str, percent: int) -> None:
        """Enter a named step at `percent`."""
        self.job.step = label[:100]
        self.job.progress = max(0, min(100, percent))
        self.job.heartbeat_at = timezone.now()
        Job.objects.filter(pk=self.job.pk).update(
            step=self.job.step, progress=self.job.progress, heartbeat_at=self.job.heartbeat_at
        )

    def log(self, text: str) -> None:
        """Append redacted text to the job log, keeping it under JOB_LOG_MAX_BYTES."""
        self.job.log = cap_log(self.job.log + redact_text(text).rstrip("\n") + "\n")
        Job.objects.filter(pk=self.job.pk).update(log=self.job.log)


def cap_log(text: str, limit: int | None = None) -> str:
    """Keep the head and tail of a log that outgrew its cap, with a marker between."""
    limit = limit or settings.JOB_LOG_MAX_BYTES
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f"\n[… {len(data) - limit} bytes of log dropped …]\n".encode()
    keep = (limit - len(marker)) // 2
    head = data[:keep].decode(errors="ignore")
    tail = data[len(data) - keep :].decode(errors="ignore")
    return head + marker.decode() + tail
