"""The Celery app; tasks live in each app's tasks.py and stay thin."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")

app = Celery("reviewer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _reconcile_at_start(**_: object) -> None:
    """Jobs orphaned while no worker ran are picked up as soon as one starts."""
    import logging

    from submissions.jobs import jobs_reconcile, worker_seen_now
    from submissions.replay import sandbox_problems

    problems = sandbox_problems()
    if problems:
        # Replay jobs will end `error` with this cause; say it once, loudly, at start.
        logging.getLogger(__name__).error("sandbox unavailable: %s", "; ".join(problems))
    worker_seen_now()
    jobs_reconcile()
