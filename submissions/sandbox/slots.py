"""The one door every sandboxed job uses, with the limits and paths from Django settings.

    with sandbox_slot() as slot:            # SandboxUnavailable, or JobError when all are busy
        with slot.workspace(tree) as ws:    # a fresh copy owned by the slot's uid
            result = slot.run(command, workspace=ws)

A job catches SandboxUnavailable around the whole block: the sandbox may turn out to be
unusable only when bwrap starts, long after the self-check passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

from django.conf import settings

from submissions.jobs.types import JobError
from submissions.sandbox.bwrap import run
from submissions.sandbox.selfcheck import self_check
from submissions.sandbox.types import (
    LOCK_DIR,
    Bind,
    RunResult,
    SandboxBusy,
    SandboxLimits,
    SandboxUnavailable,
    runtime_python,
)
from submissions.sandbox.uids import slot_uid
from submissions.sandbox.workspace import prepare_workspace, remove_workspace

BUSY_WAIT_SECONDS = 60


def sandbox_limits() -> SandboxLimits:
    """The sandbox limits in force, from settings."""
    return SandboxLimits(
        wall_seconds=settings.SANDBOX_WALL_SECONDS,
        cpu_seconds=settings.SANDBOX_CPU_SECONDS,
        address_space_bytes=settings.SANDBOX_MEMORY_BYTES,
        processes=settings.SANDBOX_PROCESSES,
        file_size_bytes=settings.SANDBOX_FILE_BYTES,
        open_files=settings.SANDBOX_OPEN_FILES,
        tmpfs_bytes=settings.SANDBOX_TMPFS_BYTES,
        output_bytes=settings.SANDBOX_OUTPUT_BYTES,
    )


class _Host(TypedDict):
    bwrap: str
    runtime: Path
    uid_base: int


class RunOptions(TypedDict, total=False):
    """What a job may set on one sandboxed run (the rest comes from settings and the slot)."""

    env: dict[str, str] | None
    audit_watch: Sequence[str]
    cwd_in_sandbox: str
    site: Path | None
    binds: Sequence[Bind]
    cancel_fd: int | None


def _host() -> _Host:
    """Where bwrap and the runtime are, and the first sandbox uid, from settings."""
    return {
        "bwrap": settings.SANDBOX_BWRAP,
        "runtime": Path(settings.SANDBOX_RUNTIME),
        "uid_base": settings.SANDBOX_UID_BASE,
    }


def sandbox_problems(*, probe: bool = False) -> list[str]:
    """What stops the sandbox here (empty when it can run). The static checks (bwrap, the
    tools, the users, the runtime) are cheap; `probe` also starts one real sandbox, which
    is what finds a container that refuses user namespaces or a fresh /proc."""
    return self_check(slots=range(settings.SANDBOX_SLOTS), probe=probe, **_host())


def work_parent() -> Path:
    """The folder workspaces are made in; the sandbox uids must be able to traverse it."""
    parent = Path(settings.SANDBOX_WORK_DIR)
    parent.mkdir(parents=True, exist_ok=True)
    os.chmod(parent, 0o711)  # noqa: S103 - traversable, not listable, by the sandbox uids
    return parent


@dataclass(frozen=True)
class Slot:
    """A sandbox slot this process holds exclusively: its number, its uid, the limits."""

    number: int
    uid: int
    limits: SandboxLimits
    site: Path | None = None  # the hand-in's installed dependencies, when it declares any

    @property
    def trusted_python(self) -> list[str]:
        """argv start for our own drivers: the runtime's interpreter by absolute path, isolated
        (-I: no PYTHONPATH, no working folder on sys.path), so nothing the hand-in ships (a
        `json.py` in its tree, a package's `python3` script or `.pth` file) runs in them."""
        return [runtime_python(Path(settings.SANDBOX_RUNTIME)), "-I"]

    def with_site(self, site: Path | None) -> Slot:
        """This slot, its runs seeing `site`'s packages first (see bwrap.run)."""
        return dataclasses.replace(self, site=site)

    def workspace_make(self, tree: Path) -> Path:
        """A fresh copy of `tree` owned by this slot's uid; the caller removes it
        (remove_workspace) before this slot runs anything else."""
        # Named by slot: a workspace a killed run left behind is known by its slot, and
        # removed at the next worker start once no process holds that slot (leftovers_remove).
        return prepare_workspace(tree, work_parent(), self.uid, prefix=f"ws-{self.number}-")

    @contextlib.contextmanager
    def workspace(self, tree: Path) -> Iterator[Path]:
        """A fresh copy of `tree` owned by this slot's uid, removed afterwards."""
        path = self.workspace_make(tree)
        try:
            yield path
        finally:
            remove_workspace(path)

    def run(
        self, command: str | list[str], *, workspace: Path, **kwargs: Unpack[RunOptions]
    ) -> RunResult:
        """Run in this slot, waiting out a slot uid another process holds for a short run."""
        deadline = time.monotonic() + BUSY_WAIT_SECONDS
        options: RunOptions = {"site": self.site, **kwargs}
        while True:
            try:
                return run(
                    command,
                    workspace=workspace,
                    limits=self.limits,
                    slot=self.number,
                    allow_unsandboxed=settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
                    **_host(),
                    **options,
                )
            except SandboxBusy:
                if time.monotonic() > deadline:
                    raise JobError(
                        f"the sandbox slot stayed busy for {BUSY_WAIT_SECONDS} s"
                    ) from None
                time.sleep(0.2)


@contextlib.contextmanager
def sandbox_slot() -> Iterator[Slot]:
    """Check that the sandbox can run here, then hold a free slot for this process.

    Raises SandboxUnavailable with every problem found (unless the loudly-labelled
    development setting runs candidate code unsandboxed), JobError when all slots are busy.
    """
    problems = sandbox_problems()
    if problems and not settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED:
        raise SandboxUnavailable("; ".join(problems))
    count = settings.SANDBOX_SLOTS
    start = os.getpid() % count
    for i in range(count):
        number = (start + i) % count
        fd = _slot_lock(number)
        if fd is None:
            continue
        try:
            yield Slot(number, slot_uid(number, settings.SANDBOX_UID_BASE), sandbox_limits())
        finally:
            os.close(fd)
        return
    raise JobError(f"all {count} sandbox slots are busy")


def parallel_runs() -> int:
    """How many sandboxed runs one job may have going at once: the setting, at most the
    host's cores (SANDBOX_PARALLEL_RUNS; 1 runs them one after another)."""
    return max(1, min(settings.SANDBOX_PARALLEL_RUNS, os.cpu_count() or 1))


@contextlib.contextmanager
def spare_slots(slot: Slot, most: int, lock_dir: Path | None = None) -> Iterator[list[Slot]]:
    """Up to `most` further free slots beside `slot` (held by this process), for runs of one
    job that may go at once; none when fewer are free. One free slot is always left for a
    job starting meanwhile: borrowing never makes another job find every slot busy."""
    count = settings.SANDBOX_SLOTS
    held: list[tuple[int, int]] = []  # (slot number, lock fd)
    try:
        if most > 0:
            for i in range(1, count):
                number = (slot.number + i) % count
                fd = _slot_lock(number, lock_dir)
                if fd is not None:
                    held.append((number, fd))
                if len(held) > most:
                    break
            # The last one found stays free for others.
            if held:
                os.close(held.pop()[1])
        yield [
            dataclasses.replace(slot, number=n, uid=slot_uid(n, settings.SANDBOX_UID_BASE))
            for n, _ in held
        ]
    finally:
        for _, fd in held:
            os.close(fd)


def _slot_lock(number: int, lock_dir: Path | None = None) -> int | None:
    """The fd holding job slot `number`'s lock, or None when another process holds it."""
    lock = Path(lock_dir or LOCK_DIR) / f"job-slot-{number}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


_LEFTOVER = re.compile(r"ws-(\d+)-.+")


def leftovers_remove(lock_dir: Path | None = None) -> list[Path]:
    """Workspaces of killed runs, removed (at worker start): each one in SANDBOX_WORK_DIR
    whose slot no process of this host holds now. A held slot's workspace is in use."""
    parent = Path(settings.SANDBOX_WORK_DIR)
    try:
        names = sorted(os.listdir(parent))
    except FileNotFoundError:
        return []
    gone = []
    for name in names:
        match = _LEFTOVER.fullmatch(name)
        if match is None:
            continue
        fd = _slot_lock(int(match.group(1)), lock_dir)
        if fd is None:
            continue
        try:  # the slot is ours while its workspace goes: no job can take it meanwhile
            remove_workspace(parent / name)
            gone.append(parent / name)
        finally:
            os.close(fd)
    return gone
