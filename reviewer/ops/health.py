"""The queue health line of the cohorts page, and the banner when the queue is down."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from reviewer.celery import app
from submissions.jobs.workers import worker_seen_at

BROKER_OK_KEY = "cr:broker-ok"


def queue_health() -> dict[str, object]:
    """Worker seen in the last minute, and whether the broker answers (cached for 15 s)."""
    seen = worker_seen_at()
    age = None if seen is None else (timezone.now() - seen).total_seconds()
    reachable = cache.get(BROKER_OK_KEY)
    if reachable is None:
        try:
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=0, timeout=1)
            reachable = True
        except Exception:  # any failure reads as "not reachable" on the health line
            reachable = False
        cache.set(BROKER_OK_KEY, reachable, 15)
    return {
        "worker_seen_s": None if age is None else int(age),
        "worker_ok": age is not None and age < 60,
        "broker_ok": reachable,
    }


def queue_down(user: object) -> dict[str, object] | None:
    """What the one environment banner says of the job queue, for signed-in users."""
    if not getattr(user, "is_authenticated", False) or settings.DEMO_MODE:
        return None
    health = queue_health()
    if not health["broker_ok"]:
        return {"what": "broker", "redis": bool(settings.REDIS_URL)}
    return None
