"""gunicorn's settings, read from the folder it starts in (the repository, the image's /app).

Command-line flags still set everything else (bind, workers); this file only adds what a
worker does once it has loaded the app, before its first request (reviewer/ops/warmup.py).
"""

from __future__ import annotations

from typing import Any


def post_worker_init(worker: Any) -> None:
    from reviewer.ops.warmup import worker_started

    worker_started(threaded=worker.cfg.threads > 1 or "sync" not in worker.cfg.worker_class_str)
