"""Which workers are alive, on which hosts, and what their sandbox can do.

Each worker process publishes a heartbeat row (`WorkerBeat`) at start and every
WORKER_BEAT_SECONDS after (`worker_beat`). A host none of whose workers was seen for
WORKER_STALE_SECONDS is dead, whichever host asks: the reconciler takes its running jobs over
without waiting out their own JOB_STALE_SECONDS. A host that never published a beat is
unknown, and the job's own heartbeat decides, as before.

A beat also lists the worker's pool processes (its live children, read from /proc just after
the beat's time was taken). A job's runner on a live host is then known dead once every
worker of that host beat after the runner last showed life and none of them lists it: a pool
child killed alone (SIGKILL, the kernel's OOM killer) is recognised within one beat from any
host, while a child that is merely slow to write its own heartbeat is never taken for dead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from submissions.models import WorkerBeat

KEEP_BEATS = timedelta(days=1)  # rows of workers gone longer than this are removed

# Held by a side thread of a forking process (the worker's beat) while it has a database
# connection open, and taken by every os.fork() of this process (billiard's pool children),
# so a child is never forked while that thread is inside a transaction.
#
# SQLite keeps the locks of all its connections to one file in process-wide memory, which a
# fork copies. A child forked while the beat held the write lock (BEGIN IMMEDIATE) inherits a
# connection that says "this process holds the write lock" and that no thread of the child
# will ever commit: each of the child's own writes then waits out the busy timeout and fails
# with "database is locked", forever (a pool child replacing a killed one could not even
# claim a job). The kernel's locks are per process and not inherited; SQLite's memory is.
_FORK_GUARD = threading.Lock()


def _fork_guard_reset() -> None:
    global _FORK_GUARD
    _FORK_GUARD = threading.Lock()  # the child's copy was held by the parent's forking thread


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=lambda: _FORK_GUARD.acquire(),
        after_in_parent=lambda: _FORK_GUARD.release(),
        after_in_child=_fork_guard_reset,
    )


@contextmanager
def no_fork() -> Iterator[None]:
    """No os.fork() of this process happens inside the block (forks wait until it ends).

    Wrap a side thread's whole use of the database in it, closing the connection inside:
    a fork then copies no open SQLite connection of that thread, let alone a transaction.
    """
    with _FORK_GUARD:
        yield


def child_pids(parent: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """The live (not zombie) child processes of `parent` (this process by default), from
    /proc; an empty list where /proc cannot be read."""
    parent = os.getpid() if parent is None else parent
    found = []
    try:
        entries = [entry for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended while we looked
            continue
        if len(fields) > 1 and fields[1] == str(parent) and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def worker_beat(*, sandbox_problems: list[str] | None = None) -> None:
    """This process is alive (and, at start, what stops its sandbox), with its pool
    processes."""
    # The time first, the children after: a child missing from a beat was gone at `seen`.
    now = timezone.now()
    values: dict[str, object] = {"seen": now, "children": child_pids()}
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


def process_alive(host: str, pid: int, *, alive_at: datetime) -> bool | None:
    """Whether process `pid` of `host`, known alive at `alive_at` (by that host's clock: its
    last job heartbeat), still runs. True when a fresh beat of the host names it (as the
    worker or one of its pool processes); False when the host went quiet, or when every
    fresh beat of the host was taken after `alive_at` and none names it; None when that
    cannot be told yet (a beat from before `alive_at`, or the host never beat)."""
    beats = list(WorkerBeat.objects.filter(host=host).values_list("pid", "children", "seen"))
    if not beats:
        return None
    since = timezone.now() - timedelta(seconds=settings.WORKER_STALE_SECONDS)
    fresh = [(worker, children, seen) for worker, children, seen in beats if seen >= since]
    if not fresh:
        return False
    if any(pid == worker or pid in (children or []) for worker, children, _ in fresh):
        return True
    if all(seen > alive_at for _, _, seen in fresh):
        return False
    return None


def worker_seen_at() -> datetime | None:
    """When any worker last showed life, if ever."""
    return WorkerBeat.objects.order_by("-seen").values_list("seen", flat=True).first()
