"""SQLite's one writer at a time: a write that meets a locked database waits and tries again.

The embedded default (SQLite, WAL, a busy timeout, immediate transactions) keeps writers in
line; a writer that still waits past the busy timeout gets `database is locked`. Where a job
claims, ends or settles, that is worth a few more tries with backoff: raised, it would leave
the job queued or running until a reconciler came by.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

log = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS = 6
FIRST_WAIT = 0.25
MAX_WAIT = 8.0


def is_locked(exc: BaseException) -> bool:
    """Whether `exc` is SQLite saying another writer holds the database."""
    text = str(exc).lower()
    return isinstance(exc, OperationalError) and (
        "database is locked" in text or "database table is locked" in text
    )


def retry_locked(
    fn: Callable[[], T], *, attempts: int = ATTEMPTS, sleep: Callable[[float], None] = time.sleep
) -> T:
    """fn(), tried again with backoff while the database is locked; other errors go up."""
    wait = FIRST_WAIT
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except OperationalError as exc:
            if not is_locked(exc) or attempt == attempts:
                raise
            log.info("database busy (attempt %s of %s); waiting %.2f s", attempt, attempts, wait)
            sleep(wait)
            wait = min(wait * 2, MAX_WAIT)
    raise AssertionError("unreachable")
