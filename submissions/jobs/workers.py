"""Which workers are alive, on which hosts, and what their sandbox can do.

Each worker process publishes a heartbeat row (`WorkerBeat`) at start and every
WORKER_BEAT_SECONDS after (`worker_beat`). A host none of whose workers was seen for
WORKER_STALE_SECONDS is dead, whichever host asks: the reconciler takes its running jobs over
without waiting out their own JOB_STALE_SECONDS. A host that never published a beat is
unknown, and the job's own heartbeat decides, as before.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from submissions.models import WorkerBeat

KEEP_BEATS = timedelta(days=1)  # rows of workers gone longer than this are removed


def worker_beat(*, sandbox_problems: list[str] | None = None) -> None:
    """This process is alive (and, at start, what stops its sandbox)."""
    now = timezone.now()
    values: dict[str, object] = {"seen": now}
    if sandbox_problems is not None:
        values["sandbox_problems"] = list(sandbox_problems)
    WorkerBeat.objects.update_or_create(host=settings.HOST_NAME, pid=os.getpid(), defaults=values)
    WorkerBeat.objects.filter(seen__lt=now - KEEP_BEATS).delete()


def fresh_workers(now: datetime | None = None) -> list[WorkerBeat]:
    """The workers seen within WORKER_STALE_SECONDS, newest first."""
    since = (now or timezone.now()) - timedelta(seconds=settings.WORKER_STALE_SECONDS)
    return list(WorkerBeat.objects.filter(seen__gte=since).order_by("-seen"))


def host_alive(host: str, now: datetime | None = None) -> bool | None:
    """True when a worker of `host` was seen lately, False when all of its workers went
    quiet, None when the host never published a beat (then nothing is known)."""
    beats = WorkerBeat.objects.filter(host=host)
    newest = beats.order_by("-seen").values_list("seen", flat=True).first()
    if newest is None:
        return None
    since = (now or timezone.now()) - timedelta(seconds=settings.WORKER_STALE_SECONDS)
    return newest >= since


def worker_seen_at() -> datetime | None:
    """When any worker last showed life, if ever."""
    return WorkerBeat.objects.order_by("-seen").values_list("seen", flat=True).first()
