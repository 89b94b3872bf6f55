"""The Celery app; tasks live in each app's tasks.py and stay thin."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")

app = Celery("reviewer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(**_: object) -> None:
    """Treat each task as Django treats a request: drop a connection that errored or outlived
    CONN_MAX_AGE; a kept one is pinged before its first query (CONN_HEALTH_CHECKS), so one a
    soft time limit interrupted mid-query is replaced, not reused."""
    from django.db import close_old_connections

    close_old_connections()


@worker_ready.connect
def _reconcile_at_start(**_: object) -> None:
    """Jobs orphaned while no worker ran are picked up as soon as one starts."""
    import logging

    from submissions.jobs.queue import jobs_reconcile
    from submissions.jobs.workers import worker_beat
    from submissions.sandbox.slots import leftovers_remove, sandbox_problems

    # One real sandbox started: a container without user namespaces, a seccomp profile that
    # refuses them or a masked /proc shows here, not first in a candidate's replay.
    problems = sandbox_problems(probe=True)
    for problem in problems:
        # Replay jobs will end `error` with this cause; say it once, loudly, at start.
        logging.getLogger(__name__).error("sandbox unavailable: %s", problem)
    if not problems:
        logging.getLogger(__name__).info("sandbox ready: a probe run started and ended cleanly")
    try:
        for path in leftovers_remove():
            logging.getLogger(__name__).info("removed a killed run's workspace: %s", path)
    except OSError:
        logging.getLogger(__name__).exception("could not remove leftover workspaces")
    worker_beat(sandbox_problems=problems)
    _start_beating()
    jobs_reconcile()
    # Pool children are forked from this thread: they inherit no open connection of it.
    from django.db import connections

    connections.close_all()


def _start_beating() -> None:
    """Publish this worker's heartbeat every WORKER_BEAT_SECONDS until the process ends (a
    daemon thread of the worker's main process: it outlives no worker)."""
    import logging
    import threading

    from django.conf import settings
    from django.db import connections

    from submissions.jobs.workers import no_fork, worker_beat

    def beat() -> None:
        stop = threading.Event()
        while not stop.wait(settings.WORKER_BEAT_SECONDS):
            # The main thread forks pool children (a killed one is replaced at once): a
            # child forked mid-beat would inherit the beat's SQLite write lock, held forever
            # in its copy (see no_fork). The beat opens, writes and closes in between forks.
            with no_fork():
                try:
                    worker_beat()
                except Exception:  # a missed beat is harmless; the next one retries
                    logging.getLogger(__name__).exception("worker heartbeat failed")
                finally:
                    connections.close_all()

    threading.Thread(target=beat, name="worker-heartbeat", daemon=True).start()
