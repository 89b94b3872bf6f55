"""A worker forks its pool children while its beat thread writes: no child may inherit a lock.

Real SQLite files, a real thread and a real os.fork(): the child tries one write of its own,
as a replacement pool child's first claim does.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from submissions.jobs.workers import no_fork


def _database(tmp_path: Path) -> Path:
    path = tmp_path / "db.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE beat (n INTEGER)")
    return path


def _fork_during_a_write(path: Path, guard: Callable[[], AbstractContextManager]) -> int:
    """A side thread holds the write lock (inside `guard`) while the main thread forks; the
    child opens its own connection and writes once. Returns the child's exit code (0: wrote;
    1: `database is locked`)."""
    holding, forked = threading.Event(), threading.Event()

    def beat() -> None:
        with guard():
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO beat VALUES (1)")
            holding.set()
            forked.wait(0.5)  # the transaction spans the fork unless the fork waits
            db.execute("COMMIT")
            db.close()

    thread = threading.Thread(target=beat)
    thread.start()
    assert holding.wait(10)
    pid = os.fork()
    if pid == 0:  # child: its own connection, one write, never back into pytest
        code = 2
        try:
            db = sqlite3.connect(path, timeout=1.0, isolation_level=None)
            db.execute("INSERT INTO beat VALUES (2)")
            code = 0
        except sqlite3.OperationalError as exc:
            code = 1 if "locked" in str(exc) else 3
        finally:
            os._exit(code)
    forked.set()
    thread.join()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_child_forked_inside_another_threads_write_can_never_write(tmp_path: Path) -> None:
    """The hazard itself: the parent commits at once, yet the child's copy of SQLite's
    process-wide lock table still says the write lock is held, and no thread of the child
    will release it."""
    path = _database(tmp_path)
    started = time.monotonic()
    assert _fork_during_a_write(path, nullcontext) == 1
    assert time.monotonic() - started >= 1.0  # it waited out its busy timeout, then failed


def test_a_fork_waits_until_a_no_fork_block_has_committed_and_closed(tmp_path: Path) -> None:
    path = _database(tmp_path)
    assert _fork_during_a_write(path, no_fork) == 0
    with sqlite3.connect(path) as db:
        assert sorted(n for (n,) in db.execute("SELECT n FROM beat")) == [1, 2]


def test_no_fork_is_usable_again_in_a_forked_child() -> None:
    """The child's copy of the guard was held by the parent's forking thread: it starts free."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with no_fork():
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with no_fork():
        pass
