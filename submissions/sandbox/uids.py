"""One unprivileged uid per slot: running as it, finding and killing its processes, its lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from submissions.sandbox.types import (
    CHUNK,
    LOCK_DIR,
    SANDBOX_SLOTS,
    SANDBOX_UID_BASE,
    SandboxBusy,
    SandboxUnavailable,
)


def slot_uid(slot: int, uid_base: int = SANDBOX_UID_BASE) -> int:
    """Return the dedicated uid of a worker slot."""
    if not 0 <= slot < SANDBOX_SLOTS:
        raise ValueError(f"slot must be in 0..{SANDBOX_SLOTS - 1}, got {slot}")
    return uid_base + slot


def gid_of(uid: int) -> int:
    """Return the primary gid of uid, or raise SandboxUnavailable naming the missing uid."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        raise SandboxUnavailable(
            f"sandbox uid {uid} is missing: run scripts/sandbox-setup.sh --users-only"
        ) from None


def searchable_by(path: Path, uid: int, gid: int) -> Path | None:
    """Return the first of path and its parents that uid cannot traverse, else None."""
    for p in (path, *path.parents):
        st = os.stat(p)
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return p
    return None


def as_uid(uid: int | None, fn: Callable[[int], int], out_limit: int) -> tuple[int, bytes]:
    """Run fn(write_fd) in a forked child that dropped to uid; return (exit code, bytes written).

    Why fork and not a helper program: the child needs no interpreter readable by the
    sandbox uid (the worker's venv may live under /root), starts in microseconds, and runs
    only os.* syscalls of ours, never candidate code, before os._exit. Dropping to the uid
    first means a traversal mistake can only reach what the candidate could reach anyway.
    """
    drop = uid is not None and uid != os.geteuid()
    gid = gid_of(uid) if drop and uid is not None else 0  # no NSS lookups after fork
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        code = 70
        try:
            os.close(r)
            if drop and uid is not None:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
            code = fn(w)
        except BaseException:  # report through the exit code only
            code = 71
        finally:
            os._exit(code)
    os.close(w)
    chunks: list[bytes] = []
    size = 0
    try:
        while data := os.read(r, CHUNK):
            if size < out_limit:
                chunks.append(data[: out_limit - size])
            size += len(data)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


def uid_pids(uid: int) -> list[int]:
    """Return the live (non-zombie) host pids owned by uid."""
    pids = []
    with os.scandir("/proc") as it:
        for entry in it:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    state = fh.read().rpartition(b")")[2].split()[0]
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                pids.append(int(entry.name))
    return pids


def sweep_uid(uid: int) -> int:
    """Kill every process of uid (the slot is locked: all are leftovers); return how many."""
    found = len(uid_pids(uid))
    if not found or os.geteuid() != 0:
        return found

    def kill_all(_w: int) -> int:
        # kill(-1) as the uid reaches exactly that uid's processes: no pid-reuse race.
        os.kill(-1, signal.SIGKILL)
        return 0

    as_uid(uid, kill_all, 0)
    deadline = time.monotonic() + 2
    # Most often one process, already exiting (bwrap's pid 1): gone within a millisecond.
    while uid_pids(uid) and time.monotonic() < deadline:
        time.sleep(0.001)
    return found


@contextlib.contextmanager
def slot_lock(uid: int) -> Iterator[None]:
    """Hold an exclusive lock on uid's slot for the run (released if the worker dies)."""
    LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(LOCK_DIR)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise SandboxUnavailable(f"{LOCK_DIR} is not a directory owned by the worker")
    fd = os.open(
        LOCK_DIR / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SandboxBusy(f"sandbox uid {uid} is in use by another run") from None
        yield
    finally:
        os.close(fd)
