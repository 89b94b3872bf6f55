"""Run a candidate's (hostile) code offline in a bubblewrap sandbox as a dedicated unprivileged uid.

Layers, outermost first (security reference §1.2):

1. a dedicated uid per worker slot (64000 + slot), entered with `setpriv` *before* bwrap:
   as root, RLIMIT_NPROC is never enforced and bwrap reads every bind source as root;
2. rlimits set by `prlimit` (processes, address space, file size, open files, CPU, no core);
3. bwrap namespaces: user (nested ones disabled), pid, net (its own empty loopback), ipc,
   uts, cgroup, mount; `--new-session` (no TIOCSTI into our tty), `--die-with-parent`;
4. a small filesystem view: /usr and the runtime read-only, synthetic /etc files, the
   submission copy read-write at /work, capped tmpfs /tmp and /dev/shm, everything else
   (the root, /dev) remounted read-only;
5. in this process: a wall clock, capped output capture, a per-slot lock, and a sweep that
   kills anything of the slot uid still alive after the run.

`setpriv` and `prlimit` exec in place, so bwrap's parent is the calling (Celery pool)
process and `--die-with-parent` fires if it dies. Not here yet (phase 2): seccomp and a
cgroup for whole-job memory; `layers` in each RunResult says what was active.

No Django or Celery imports: a Celery task calls `run()` and maps the outcome to a Job.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import pwd
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

DEFAULT_BWRAP = "/usr/bin/bwrap"
SETPRIV = "/usr/bin/setpriv"
PRLIMIT = "/usr/bin/prlimit"
DEFAULT_RUNTIME = Path("/opt/cassette-review/sandbox-runtime")
# Passing runtime=SYSTEM_RUNTIME runs Debian's own python3 from /usr (no venv): used by the
# tests when the real runtime has not been built.
SYSTEM_RUNTIME = Path("/usr")
SANDBOX_UID_BASE = 64000
SANDBOX_SLOTS = 8
SITECUSTOMIZE = Path(__file__).resolve().with_name("sandbox_runtime") / "sitecustomize.py"
LOCK_DIR = Path("/run/cassette-review")

WORK_MOUNT = "/work"
HOOKS_MOUNT = "/opt/cr-hooks"
AUDIT_MOUNT = "/run/cr-audit"
AUDIT_FILE = "audit.jsonl"
# Paths inside the sandbox (its own capped tmpfs mounts), not the host's /tmp.
SANDBOX_TMP = "/tmp"  # noqa: S108
SANDBOX_SHM = "/dev/shm"  # noqa: S108
SANDBOX_HOME = "/tmp/home"  # noqa: S108
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONHASHSEED")

# Output past OUTPUT_KILL_FACTOR x the capture cap (both streams together) kills the run:
# `yes` must not keep a worker busy until the wall clock.
OUTPUT_KILL_FACTOR = 16
AUDIT_READ_BYTES = 1 << 20
AUDIT_MAX_EVENTS = 2000
DRAIN_GRACE_S = 2.0
_CHUNK = 1 << 16
_HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 8


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; `cause` says why and the job ends `error` with it."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class SandboxBusy(RuntimeError):
    """Another run holds this slot's uid; one uid must never serve two runs at once."""


class WorkspaceError(RuntimeError):
    """A workspace could not be prepared safely."""


class OutputFileRefused(OSError):
    """read_output_file refused a path: a link, FIFO, device, directory or oversized file."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run (filled from Django settings by the caller)."""

    wall_seconds: float = 300
    cpu_seconds: int = 300
    address_space_bytes: int = 2 * 2**30
    processes: int = 128
    file_size_bytes: int = 100 * 2**20
    open_files: int = 256
    tmpfs_bytes: int = 64 * 2**20
    output_bytes: int = 1 * 2**20

    def __post_init__(self) -> None:
        """Refuse zero or negative limits: a zero here would mean 'unlimited' to some tools."""
        for name, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {value!r}")


@dataclass
class RunResult:
    """Outcome of one run; `layers` records which protections were active."""

    exit_code: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration_s: float
    audit_events: list[dict]
    sandboxed: bool
    killed_reason: str | None
    limits: dict
    layers: dict


# --------------------------------------------------------------------------- helpers


def slot_uid(slot: int, uid_base: int = SANDBOX_UID_BASE) -> int:
    """Return the dedicated uid of a worker slot."""
    if not 0 <= slot < SANDBOX_SLOTS:
        raise ValueError(f"slot must be in 0..{SANDBOX_SLOTS - 1}, got {slot}")
    return uid_base + slot


def _gid_of(uid: int) -> int:
    """Return the primary gid of uid, or raise SandboxUnavailable naming the missing uid."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        raise SandboxUnavailable(
            f"sandbox uid {uid} is missing: run scripts/sandbox-setup.sh --users-only"
        ) from None


def _searchable_by(path: Path, uid: int, gid: int) -> Path | None:
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


def _as_uid(uid: int | None, fn: Callable[[int], int], out_limit: int) -> tuple[int, bytes]:
    """Run fn(write_fd) in a forked child that dropped to uid; return (exit code, bytes written).

    Why fork and not a helper program: the child needs no interpreter readable by the
    sandbox uid (the worker's venv may live under /root), starts in microseconds, and runs
    only os.* syscalls of ours, never candidate code, before os._exit. Dropping to the uid
    first means a traversal mistake can only reach what the candidate could reach anyway.
    """
    drop = uid is not None and uid != os.geteuid()
    gid = _gid_of(uid) if drop and uid is not None else 0  # no NSS lookups after fork
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
        while data := os.read(r, _CHUNK):
            if size < out_limit:
                chunks.append(data[: out_limit - size])
            size += len(data)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


def _uid_pids(uid: int) -> list[int]:
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


def _sweep_uid(uid: int) -> int:
    """Kill every process of uid (the slot is locked: all are leftovers); return how many."""
    found = len(_uid_pids(uid))
    if not found or os.geteuid() != 0:
        return found

    def kill_all(_w: int) -> int:
        # kill(-1) as the uid reaches exactly that uid's processes: no pid-reuse race.
        os.kill(-1, signal.SIGKILL)
        return 0

    _as_uid(uid, kill_all, 0)
    deadline = time.monotonic() + 2
    while _uid_pids(uid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


@contextlib.contextmanager
def _slot_lock(uid: int) -> Iterator[None]:
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


def _memfd(name: str, data: bytes) -> int:
    """Return a memfd holding data, for bwrap's --ro-bind-data (no host path needed)."""
    fd = os.memfd_create(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _libc() -> ctypes.CDLL:
    """Return libc for mount(2)/umount2(2)."""
    return ctypes.CDLL(None, use_errno=True)


# --------------------------------------------------------------------------- self-check


def _static_problems(bwrap: str, runtime: Path, uids: Iterable[int]) -> list[str]:
    """Return problems found without starting anything (cheap enough for every run)."""
    problems = []
    if os.geteuid() != 0:
        problems.append(
            "worker is not root: it cannot drop to the dedicated sandbox uids (setpriv)"
        )
    if not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)):
        problems.append(f"bubblewrap not found at {bwrap} (apt-get install bubblewrap)")
    for tool in (SETPRIV, PRLIMIT):
        if not os.access(tool, os.X_OK):
            problems.append(f"{tool} not found (apt-get install util-linux)")
    for path, bad, why in (
        (
            "/proc/sys/user/max_user_namespaces",
            "0",
            "user namespaces are disabled (user.max_user_namespaces=0)",
        ),
        (
            "/proc/sys/kernel/unprivileged_userns_clone",
            "0",
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)",
        ),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "AppArmor restricts unprivileged user namespaces"
            " (kernel.apparmor_restrict_unprivileged_userns=1)",
        ),
    ):
        with contextlib.suppress(OSError):
            if Path(path).read_text().strip() == bad:
                problems.append(why)
    for uid in uids:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            problems.append(
                f"sandbox uid {uid} is missing: run scripts/sandbox-setup.sh --users-only"
            )
    if runtime != SYSTEM_RUNTIME:
        python = runtime / "bin" / "python3"
        if not python.exists():
            problems.append(f"sandbox runtime missing at {runtime}: run make sandbox-runtime")
    if not SITECUSTOMIZE.is_file():
        problems.append(f"audit hook missing at {SITECUSTOMIZE}")
    return problems


def self_check(
    *,
    bwrap: str = DEFAULT_BWRAP,
    runtime: Path | None = None,
    slots: Iterable[int] | None = None,
    uid_base: int = SANDBOX_UID_BASE,
    probe: bool = True,
) -> list[str]:
    """Return what stops the sandbox from running here (empty when ready)."""
    runtime = runtime or DEFAULT_RUNTIME
    slot_list = list(range(SANDBOX_SLOTS) if slots is None else slots)
    uids = [slot_uid(s, uid_base) for s in slot_list]
    problems = _static_problems(bwrap, runtime, uids)
    if problems or not probe:
        return problems
    # Start a real sandbox once: proves user namespaces work here, the uid can read the
    # runtime and the hook, and the network namespace holds nothing but loopback.
    probe_src = (
        "import sitecustomize, sys\n"
        "names = [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]\n"
        "print('cr-probe', sys.version_info[0], ','.join(names))\n"
    )
    with tempfile.TemporaryDirectory(prefix="cr-probe-") as tmp:
        os.chmod(tmp, 0o711)  # noqa: S103 - bwrap resolves the bind source as the sandbox uid
        for slot in slot_list:
            uid = slot_uid(slot, uid_base)
            ws = Path(tmp) / f"ws-{slot}"
            ws.mkdir(mode=0o700)
            os.chown(ws, uid, _gid_of(uid))
            try:
                res = run(
                    ["python3", "-c", probe_src],
                    workspace=ws,
                    limits=SandboxLimits(wall_seconds=30, output_bytes=4096),
                    slot=slot,
                    runtime=runtime,
                    bwrap=bwrap,
                    uid_base=uid_base,
                )
            except SandboxBusy:
                continue  # a run is using this slot right now: try the next one
            except SandboxUnavailable as exc:
                return [f"bwrap cannot start as uid {uid}: {exc.cause}"]
            out = res.stdout.decode(errors="replace").split()
            if res.exit_code != 0 or out[:2] != ["cr-probe", "3"]:
                tail = res.stderr[-300:].decode(errors="replace").strip()
                return [f"sandbox probe failed (exit {res.exit_code}): {tail}"]
            if out[2:] != ["lo"]:
                return [f"sandbox network namespace is not empty: interfaces {out[2:]}"]
            return []
    return []  # every slot busy: the sandbox is evidently in use, nothing to report


def ensure_ready(**kwargs: object) -> None:
    """Raise SandboxUnavailable with the cause unless self_check() finds nothing wrong."""
    problems = self_check(**kwargs)  # type: ignore[arg-type]
    if problems:
        raise SandboxUnavailable("; ".join(problems))


# --------------------------------------------------------------------------- workspaces


def prepare_workspace(
    src: Path,
    dest_parent: Path,
    uid: int,
    *,
    quota_bytes: int | None = None,
    quota_inodes: int = 200_000,
) -> Path:
    """Copy a validated submission tree into a fresh directory owned by uid; return its path.

    Nothing is followed: the source is walked through directory fds with O_NOFOLLOW and any
    symlink, FIFO or device in it is refused (the intake validator should already have
    dropped them). Files are created with O_EXCL in a root-only directory and chowned
    through their fds, so nothing can redirect a write or a chown. With quota_bytes the
    directory is a tmpfs mount (size and inode capped, nosuid, nodev) that bounds what the
    candidate can write in /work; remove_workspace() unmounts it.
    """
    gid = _gid_of(uid)
    dest_parent = Path(dest_parent).resolve()
    blocked = _searchable_by(dest_parent, uid, gid)
    if blocked is not None:
        # bwrap resolves bind sources as the sandbox uid, so it must traverse the path.
        raise WorkspaceError(f"{blocked} is not searchable by sandbox uid {uid}: chmod o+x it")
    dest = Path(tempfile.mkdtemp(prefix="ws-", dir=dest_parent))
    try:
        if quota_bytes is not None:
            opts = f"size={quota_bytes},nr_inodes={quota_inodes},mode=0700"
            libc = _libc()
            if (
                libc.mount(
                    b"tmpfs", os.fsencode(dest), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()
                )
                != 0
            ):
                err = ctypes.get_errno()
                raise WorkspaceError(f"cannot mount the workspace tmpfs: {os.strerror(err)}")
        src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        dst_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _copy_tree(src_fd, dst_fd, uid, gid, PurePosixPath("."))
            # Handed to the uid last: until now nobody but root could write in it.
            os.fchown(dst_fd, uid, gid)
            os.fchmod(dst_fd, 0o700)
        finally:
            os.close(src_fd)
            os.close(dst_fd)
    except BaseException:
        remove_workspace(dest)
        raise
    return dest


def _copy_tree(sfd: int, dfd: int, uid: int, gid: int, rel: PurePosixPath) -> None:
    """Copy the directory at sfd into dfd, refusing anything but regular files and directories."""
    with os.scandir(sfd) as it:
        entries = sorted(e.name for e in it)
    for name in entries:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(name, 0o700, dir_fd=dfd)
            nsfd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd
            )
            ndfd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
            )
            try:
                _copy_tree(nsfd, ndfd, uid, gid, rel / name)
                os.fchown(ndfd, uid, gid)
                os.fchmod(ndfd, 0o755)
                os.utime(ndfd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(nsfd)
                os.close(ndfd)
        elif stat.S_ISREG(st.st_mode):
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            in_fd = os.open(name, flags, dir_fd=sfd)
            try:
                fst = os.fstat(in_fd)
                if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (
                    st.st_dev,
                    st.st_ino,
                ):
                    raise WorkspaceError(f"submission source changed while copying: {rel / name}")
                out_fd = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=dfd,
                )
                try:
                    remaining = fst.st_size
                    while remaining > 0:
                        sent = os.sendfile(out_fd, in_fd, None, min(remaining, 1 << 24))
                        if sent == 0:
                            break
                        remaining -= sent
                    os.fchown(out_fd, uid, gid)
                    # Normalised modes: no setuid/setgid/sticky, no group/other write.
                    os.fchmod(out_fd, 0o755 if st.st_mode & 0o111 else 0o644)
                    os.utime(out_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                finally:
                    os.close(out_fd)
            finally:
                os.close(in_fd)
        else:
            kind = "symlink" if stat.S_ISLNK(st.st_mode) else "special file"
            raise WorkspaceError(f"refusing {kind} in submission source: {rel / name}")


def remove_workspace(path: Path) -> None:
    """Remove a workspace the candidate had write access to, never following its links.

    First pass as the owning (sandbox) uid, so a traversal mistake can only touch what that
    uid owns; it chmods directories back to 0700 as it goes (the candidate may have left
    0000 ones) and hoists very deep trees to the top instead of holding an fd per level.
    Then root removes what is left with shutil.rmtree, which works through directory fds
    and never follows links. A tmpfs workspace is simply unmounted.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # a link or file where the workspace was: remove the entry, not its target
        return
    if os.path.ismount(path):
        if _libc().umount2(os.fsencode(path), _MNT_DETACH | _UMOUNT_NOFOLLOW) != 0:
            raise OSError(ctypes.get_errno(), "cannot unmount workspace", str(path))
        os.rmdir(path)
        return
    if st.st_uid != 0 and st.st_uid != os.geteuid() and os.geteuid() == 0:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _as_uid(st.st_uid, lambda _w: _purge_as_owner(top), 0)
        finally:
            os.close(top)
    shutil.rmtree(path)


def _purge_as_owner(top: int) -> int:
    """Delete everything below the directory fd top (runs in the uid child of _as_uid)."""
    os.fchmod(top, 0o700)
    while True:  # each pass deletes entries or hoists deep directories to the top
        with os.scandir(top) as it:
            before = {e.name for e in it}
        if not before:
            return 0
        _purge_dir(top, top, 0)
        with os.scandir(top) as it:
            if {e.name for e in it} == before:
                return 1  # stuck: root's pass takes over


def _purge_dir(top: int, dfd: int, depth: int) -> None:
    """Delete entries of dfd; below depth 32, move subdirectories up to top instead."""
    with os.scandir(dfd) as it:
        names = [e.name for e in it]
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dfd)  # files, links, FIFOs: the entry itself
                continue
            if depth >= 32:
                os.rename(name, f".cr-purge-{os.urandom(8).hex()}", src_dir_fd=dfd, dst_dir_fd=top)
                continue
            # O_PATH opens even a 0000 directory; chmod goes through /proc to that very inode.
            pfd = os.open(
                name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
            )
            try:
                os.chmod(f"/proc/self/fd/{pfd}", 0o700)
                sub = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pfd)
            finally:
                os.close(pfd)
            try:
                _purge_dir(top, sub, depth + 1)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dfd)
        except OSError:
            continue  # root's pass removes what we could not


# --------------------------------------------------------------------------- reading results


def read_output_file(
    workspace: Path, relpath: str, max_bytes: int, uid: int | None, *, truncate: bool = False
) -> bytes:
    """Read a file the candidate wrote, as uid, refusing links, FIFOs and devices without blocking.

    Each component is opened relative to the previous directory fd with O_NOFOLLOW, the
    final one is lstat'ed first (a FIFO or device is refused before any open) and then
    opened O_NONBLOCK|O_NOFOLLOW and checked to be the same regular file. The reading
    happens in a forked child that dropped to uid (see _as_uid), so even a bug here reads
    nothing the candidate could not. Raises FileNotFoundError when absent and
    OutputFileRefused otherwise; a file over max_bytes is refused unless truncate=True.
    """
    parts = [p for p in PurePosixPath(relpath).parts if p != "."]
    if not parts or PurePosixPath(relpath).is_absolute() or ".." in parts or "\0" in relpath:
        raise ValueError(f"relpath must be a relative path inside the workspace: {relpath!r}")
    base = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def child(w: int) -> int:
        status, payload = _read_in_child(base, parts, max_bytes, truncate)
        view = memoryview(status + payload)
        while view:
            view = view[os.write(w, view) :]
        return 0

    try:
        code, out = _as_uid(uid, child, max_bytes + 4096)
    finally:
        os.close(base)
    if code != 0 or not out:
        raise OutputFileRefused(errno.EIO, f"reader failed (exit {code})", relpath)
    status, payload = out[:1], out[1:]
    if status == b"O":
        return payload
    if status == b"N":
        raise FileNotFoundError(errno.ENOENT, payload.decode(), relpath)
    raise OutputFileRefused(errno.EPERM, payload.decode(), relpath)


def _read_in_child(
    base: int, parts: list[str], max_bytes: int, truncate: bool
) -> tuple[bytes, bytes]:
    """Return (status, payload): b'O' + data, b'N' + reason (absent) or b'R' + reason (refused)."""
    fds: list[int] = []
    try:
        dfd = base
        for i, name in enumerate(parts):
            where = "/".join(parts[: i + 1])
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                return b"N", f"no such file: {where}".encode()
            except PermissionError:
                return b"R", f"permission denied (as the sandbox uid): {where}".encode()
            last = i == len(parts) - 1
            if stat.S_ISLNK(st.st_mode):
                return b"R", f"refusing symlink: {where}".encode()
            if not last:
                if not stat.S_ISDIR(st.st_mode):
                    return b"R", f"not a directory: {where}".encode()
                dfd = os.open(
                    name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
                )
                fds.append(dfd)
                continue
            if not stat.S_ISREG(st.st_mode):
                kind = (
                    "FIFO"
                    if stat.S_ISFIFO(st.st_mode)
                    else "directory"
                    if stat.S_ISDIR(st.st_mode)
                    else "special file"
                )
                return b"R", f"refusing {kind}: {where}".encode()
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=dfd)
            except PermissionError:
                return b"R", f"permission denied (as the sandbox uid): {where}".encode()
            except OSError as exc:
                return b"R", f"cannot open {where}: {exc.strerror}".encode()
            fds.append(fd)
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                return b"R", f"file changed while opening: {where}".encode()
            chunks, size = [], 0
            while size <= max_bytes:
                data = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
                if not data:
                    break
                chunks.append(data)
                size += len(data)
            if size > max_bytes and not truncate:
                return b"R", f"larger than {max_bytes} bytes: {where}".encode()
            return b"O", b"".join(chunks)[:max_bytes]
        return b"R", b"empty path"
    finally:
        for fd in fds:
            os.close(fd)


# --------------------------------------------------------------------------- running


class _Capture:
    """Keep the head and tail of one output stream within a byte cap, counting the rest."""

    def __init__(self, cap: int) -> None:
        """Start empty."""
        self.cap = cap
        self.tail_keep = min(cap // 8, 64 * 1024)
        self.head = bytearray()
        self.ring = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk, never holding much more than cap bytes."""
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.ring += data
            if len(self.ring) > 2 * self.tail_keep + _CHUNK:
                del self.ring[: len(self.ring) - self.tail_keep]

    @property
    def truncated(self) -> bool:
        """Whether output went past the cap."""
        return self.total > self.cap

    def value(self) -> bytes:
        """Return the captured bytes, with the truncation marker lines when over the cap."""
        if not self.truncated:
            return bytes(self.head)
        kept = self.cap - self.tail_keep
        tail = (
            (bytes(self.head[kept:]) + bytes(self.ring))[-self.tail_keep :]
            if self.tail_keep
            else b""
        )
        omitted = self.total - kept - len(tail)
        marker = (
            f"\n[… output truncated at {self.cap} bytes …]\n"
            f"[… {omitted} bytes omitted of {self.total}; the last {len(tail)} bytes follow …]\n"
        )
        return bytes(self.head[:kept]) + marker.encode() + tail


def _check_command(command: str | Sequence[str]) -> list[str]:
    """Return the argv for command (a string runs via /bin/sh -c)."""
    argv = (
        ["/bin/sh", "-c", command] if isinstance(command, str) else [os.fspath(a) for a in command]
    )
    if not argv or any("\0" in a for a in argv):
        raise ValueError("command must be non-empty and contain no NUL")
    return argv


def _check_cwd(cwd: str) -> str:
    """Return cwd if it is /work or below it, else raise ValueError."""
    p = PurePosixPath(cwd)
    if (
        not p.is_absolute()
        or ".." in p.parts
        or not (p == PurePosixPath(WORK_MOUNT) or WORK_MOUNT in map(str, p.parents))
    ):
        raise ValueError(f"cwd_in_sandbox must be {WORK_MOUNT} or below it: {cwd!r}")
    return str(p)


def _sandbox_env(
    runtime: Path, env: dict[str, str] | None, audit_watch: Iterable[str]
) -> dict[str, str]:
    """Return the whole environment inside the sandbox: the allowlist plus the caller's extras."""
    path = "/usr/bin:/bin" if runtime == SYSTEM_RUNTIME else f"{runtime}/bin:/usr/bin:/bin"
    out = {
        "PATH": path,
        "HOME": SANDBOX_HOME,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": SANDBOX_TMP,
        "PYTHONPATH": HOOKS_MOUNT,
        "CR_AUDIT_LOG": f"{AUDIT_MOUNT}/{AUDIT_FILE}",
        "CR_AUDIT_ROOT": WORK_MOUNT,
        "CR_AUDIT_WATCH": ":".join(w.strip("/") for w in audit_watch),
    }
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(key) or "\0" in value:
            raise ValueError(f"bad environment variable {key!r}")
        out[key] = value
    return out


def _etc_files(uid: int, gid: int) -> dict[str, bytes]:
    """Return the synthetic /etc files: no host passwd, hosts, resolv.conf or settings leak in."""
    return {
        "/etc/passwd": (
            f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{SANDBOX_HOME}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n".encode(),
        # localhost resolves (candidates' loopback stubs); with `hosts: files` and no
        # resolv.conf every other name fails at once instead of trying a DNS server.
        "/etc/hosts": b"127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n",
        "/etc/nsswitch.conf": b"passwd: files\ngroup: files\nhosts: files\nnetworks: files\n",
    }


def _bwrap_argv(
    bwrap: str,
    runtime: Path,
    env: dict[str, str],
    workspace: Path,
    audit_dir: Path,
    cwd: str,
    data_fds: dict[str, int],
    status_fd: int,
    tmpfs_bytes: int,
) -> list[str]:
    """Return the bwrap argv up to (not including) the command."""
    a = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
    # --unshare-all only *tries* the user namespace; --disable-userns needs it explicit.
    a += [
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for key, value in env.items():
        a += ["--setenv", key, value]
    a += ["--ro-bind", "/usr", "/usr"]
    for link, target in (
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ):
        a += ["--symlink", target, link]
    # Only harmless, world-readable bits of /etc; never /etc wholesale (settings, env files).
    for path in (
        "/etc/alternatives",
        "/etc/ssl/certs",
        "/etc/ld.so.cache",
        "/etc/services",
        "/etc/protocols",
    ):
        a += ["--ro-bind-try", path, path]
    for dest, fd in data_fds.items():
        a += ["--perms", "0444", "--ro-bind-data", str(fd), dest]
    if runtime != SYSTEM_RUNTIME:
        # Same path inside: a venv's scripts carry its absolute path in their shebangs.
        a += ["--ro-bind", str(runtime), str(runtime)]
    a += ["--proc", "/proc", "--dev", "/dev"]
    a += ["--size", str(tmpfs_bytes), "--tmpfs", SANDBOX_SHM]
    a += ["--size", str(tmpfs_bytes), "--tmpfs", SANDBOX_TMP, "--dir", SANDBOX_HOME]
    a += ["--symlink", "../tmp", "/var/tmp"]  # noqa: S108
    a += ["--bind", str(audit_dir), AUDIT_MOUNT, "--bind", str(workspace), WORK_MOUNT]
    # Everything else bwrap created (the root, /dev, /etc, /run) becomes read-only: the
    # tmpfs under them is uncapped, so writes there could eat host memory.
    a += ["--remount-ro", "/dev", "--remount-ro", "/"]
    a += ["--chdir", cwd, "--json-status-fd", str(status_fd)]
    return a


def _prepare_audit_dir(parent: Path, uid: int, gid: int) -> Path:
    """Create a run's audit folder: root-owned (no planting or deleting), one uid-writable log."""
    audit_dir = Path(tempfile.mkdtemp(prefix=".cr-audit-", dir=parent))
    os.chmod(audit_dir, 0o755)  # noqa: S103 - traversable, but only root may add entries
    fd = os.open(
        audit_dir / AUDIT_FILE,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
    return audit_dir


def _read_audit(audit_dir: Path, uid: int | None) -> list[dict]:
    """Return the audit events the hook wrote (bounded; junk lines skipped)."""
    try:
        raw = read_output_file(audit_dir, AUDIT_FILE, AUDIT_READ_BYTES, uid, truncate=True)
    except OSError as exc:
        return [{"event": "cr.audit.unreadable", "reason": str(exc)}]
    events = []
    for line in raw.splitlines()[:AUDIT_MAX_EVENTS]:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            events.append(item)
    return events


def _signal_reason(exit_code: int | None) -> str | None:
    """Name the limit or signal behind an exit status of 128+N (inferred, not proven)."""
    if exit_code is None or exit_code <= 128:
        return None
    sig = exit_code - 128
    if sig == signal.SIGXCPU:
        return "cpu time"
    if sig == signal.SIGXFSZ:
        return "file size"
    try:
        return f"signal {signal.Signals(sig).name}"
    except ValueError:
        return None


def run(
    command: str | list[str],
    *,
    workspace: Path,
    limits: SandboxLimits,
    slot: int = 0,
    env: dict[str, str] | None = None,
    runtime: Path | None = None,
    audit_watch: Sequence[str] = (),
    allow_unsandboxed: bool = False,
    cwd_in_sandbox: str = WORK_MOUNT,
    bwrap: str = DEFAULT_BWRAP,
    uid_base: int = SANDBOX_UID_BASE,
) -> RunResult:
    """Run command in the sandbox, workspace at /work; raise SandboxUnavailable if it cannot start.

    Never falls back to running unsandboxed unless allow_unsandboxed=True (the loudly
    named SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED setting); the result then says sandboxed=False.
    """
    argv = _check_command(command)
    cwd = _check_cwd(cwd_in_sandbox)
    runtime = Path(runtime) if runtime else DEFAULT_RUNTIME
    uid = slot_uid(slot, uid_base)
    sandbox_env = _sandbox_env(runtime, env, audit_watch)
    problems = _static_problems(bwrap, runtime, [uid])
    if not problems:
        with _slot_lock(uid):
            return _run_sandboxed(
                argv, Path(workspace), limits, uid, runtime, sandbox_env, cwd, bwrap
            )
    cause = "; ".join(problems)
    if not allow_unsandboxed:
        raise SandboxUnavailable(cause)
    # Only when the host lacks the sandbox; a run that failed to start is never retried bare.
    log.warning("SANDBOX UNAVAILABLE (%s): RUNNING CANDIDATE CODE UNSANDBOXED (dev setting)", cause)
    return _run_unsandboxed(argv, Path(workspace), limits, runtime, sandbox_env, cwd, cause)


def _run_sandboxed(
    argv: list[str],
    workspace: Path,
    limits: SandboxLimits,
    uid: int,
    runtime: Path,
    sandbox_env: dict[str, str],
    cwd: str,
    bwrap: str,
) -> RunResult:
    """Run argv under setpriv + prlimit + bwrap and collect the outcome."""
    gid = _gid_of(uid)
    st = os.lstat(workspace)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise ValueError(
            f"workspace {workspace} must be a directory owned by uid {uid} (see prepare_workspace)"
        )
    # Leftovers of a crashed run on this slot would count against RLIMIT_NPROC.
    pre_swept = _sweep_uid(uid)
    audit_dir = _prepare_audit_dir(workspace.parent, uid, gid)
    fds: list[int] = []
    try:
        data_fds = {dest: _memfd(dest, data) for dest, data in _etc_files(uid, gid).items()}
        data_fds[f"{HOOKS_MOUNT}/sitecustomize.py"] = _memfd(
            "sitecustomize", SITECUSTOMIZE.read_bytes()
        )
        fds += data_fds.values()
        status_r, status_w = os.pipe()
        fds += [status_r, status_w]
        cmd = [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        cmd += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        cmd += [PRLIMIT, f"--nproc={limits.processes}", f"--as={limits.address_space_bytes}"]
        cmd += [f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}", "--core=0"]
        # soft < hard: SIGXCPU (reported as "cpu time") comes before the hard SIGKILL.
        cmd += [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", "--"]
        options = _bwrap_argv(
            bwrap,
            runtime,
            sandbox_env,
            workspace,
            audit_dir,
            cwd,
            data_fds,
            status_w,
            limits.tmpfs_bytes,
        )[1:]
        # Options go through --args: bwrap's pid 1 stays in the sandbox, and its command
        # line (host paths, env values) would be readable there and in the host's `ps`.
        args_fd = _memfd("bwrap-args", b"".join(os.fsencode(o) + b"\0" for o in options))
        fds.append(args_fd)
        data_fds["--args"] = args_fd
        cmd += [bwrap, "--args", str(args_fd), "--", *argv]
        # The host-side env is minimal too: bwrap's own pid 1 inside the sandbox keeps the
        # environment it was started with, readable as /proc/1/environ.
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_HOST_ENV,
            pass_fds=(status_w, *data_fds.values()),
            start_new_session=True,
        )
        for fd in (status_w, *data_fds.values()):
            os.close(fd)
            fds.remove(fd)
        out, err, status_raw, killed, returncode = _supervise(proc, limits, started, status_r)
        duration = time.monotonic() - started
        post_swept = _sweep_uid(uid)
        audit_events = _read_audit(audit_dir, uid)
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(audit_dir, ignore_errors=True)

    status = {}
    for line in status_raw.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                status.update(item)
    if killed is None and "exit-code" not in status and (returncode or 0) >= 0:
        # bwrap never reported an exit code: setup failed before the command ran (S-27).
        tail = err.value()[-600:].decode(errors="replace").strip()
        raise SandboxUnavailable(f"sandbox failed to start: {tail or f'bwrap exit {returncode}'}")
    if killed is not None:
        exit_code = None
    elif "exit-code" in status:
        exit_code = int(status["exit-code"])
    else:
        exit_code = None
        killed = (
            f"signal {signal.Signals(-returncode).name}"
            if returncode and returncode < 0
            else "unknown"
        )
    layers = {
        "uid": uid,
        "rlimits": True,
        "userns": True,
        "nested_userns": False,
        "pidns": True,
        "netns": True,
        "ipcns": True,
        "mountns": True,
        "new_session": True,
        "die_with_parent": True,
        "tmpfs_tmp_bytes": limits.tmpfs_bytes,
        "workspace_quota": os.path.ismount(workspace),
        "readonly_root": True,
        "runtime": str(runtime),
        "audit_hook": "evidence only",
        "cgroup": False,
        "seccomp": False,
        "leftovers_killed_before": pre_swept,
        "leftovers_killed_after": post_swept,
    }
    return RunResult(
        exit_code=exit_code,
        timed_out=killed == "wall time",
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_s=duration,
        audit_events=audit_events,
        sandboxed=True,
        killed_reason=killed or _signal_reason(exit_code),
        limits=asdict(limits),
        layers=layers,
    )


def _supervise(
    proc: subprocess.Popen[bytes], limits: SandboxLimits, started: float, status_fd: int | None
) -> tuple[_Capture, _Capture, bytes, str | None, int | None]:
    """Read output and status concurrently under the wall clock; kill the group on a limit."""
    out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
    status = bytearray()
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    if status_fd is not None:
        sel.register(status_fd, selectors.EVENT_READ, status)
    try:
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):
        pidfd = None
    deadline = started + limits.wall_seconds
    kill_at_output = OUTPUT_KILL_FACTOR * limits.output_bytes
    killed: str | None = None
    exited_at: float | None = None
    returncode: int | None = None

    def kill(reason: str) -> None:
        nonlocal killed
        if killed is None and returncode is None:
            killed = reason
            # The group holds setpriv->prlimit->bwrap (one exec'd process); bwrap's pid 1
            # inside dies by PDEATHSIG, and with it every process of the pid namespace.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def reap() -> None:
        nonlocal returncode, exited_at
        # No rusage here: bwrap's outer process learns the exit status from its pid 1
        # without reaping it, so wait4() would only show bwrap's own few milliseconds.
        if proc.poll() is not None:
            returncode = proc.returncode
            exited_at = time.monotonic()

    try:
        while True:
            streams_open = any(not isinstance(k.data, str) for k in sel.get_map().values())
            if returncode is not None and not streams_open:
                break
            now = time.monotonic()
            if now >= deadline and killed is None:
                kill("wall time")
            if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
                break  # something still holds a pipe; the uid sweep ends it
            if returncode is None and pidfd is None:
                reap()
                timeout = 0.05
            else:
                timeout = max(0.0, min(deadline - now, 1.0)) if killed is None else 0.2
            for key, _ in sel.select(timeout=timeout):
                if isinstance(key.data, str):  # the pidfd: bwrap exited
                    sel.unregister(key.fd)
                    reap()
                    continue
                data = os.read(key.fd, _CHUNK)
                if not data:
                    sel.unregister(key.fd)
                    continue
                if isinstance(key.data, _Capture):
                    key.data.feed(data)
                    if out.total + err.total > kill_at_output:
                        kill("output limit")
                elif len(key.data) < 65536:
                    key.data.extend(data)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        if returncode is None:
            kill("supervisor error")
            proc.wait()
            returncode = proc.returncode
        proc.stdout.close()
        proc.stderr.close()
    return out, err, bytes(status), killed, returncode


def _run_unsandboxed(
    argv: list[str],
    workspace: Path,
    limits: SandboxLimits,
    runtime: Path,
    sandbox_env: dict[str, str],
    cwd: str,
    cause: str,
) -> RunResult:
    """DEV ONLY: run without bwrap or uid drop (wall clock, rlimits when prlimit exists, caps)."""
    with tempfile.TemporaryDirectory(prefix="cr-unsandboxed-") as tmp:
        env = dict(sandbox_env)
        env.update(
            HOME=f"{tmp}/home", TMPDIR=os.path.join(tmp, "tmp"), CR_AUDIT_ROOT=str(workspace)
        )
        env["PYTHONPATH"] = str(SITECUSTOMIZE.parent)
        env["CR_AUDIT_LOG"] = f"{tmp}/audit/{AUDIT_FILE}"
        if runtime == SYSTEM_RUNTIME or not runtime.exists():
            env["PATH"] = "/usr/bin:/bin"
        for sub in ("home", "tmp", "audit"):
            os.mkdir(f"{tmp}/{sub}")
        Path(env["CR_AUDIT_LOG"]).touch()
        cmd = list(argv)
        rlimits = os.access(PRLIMIT, os.X_OK)
        if rlimits:
            cmd = [
                PRLIMIT,
                f"--as={limits.address_space_bytes}",
                f"--fsize={limits.file_size_bytes}",
            ]
            cmd += [
                f"--nofile={limits.open_files}",
                "--core=0",
                f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
            ]
            cmd += ["--", *argv]
        rel = PurePosixPath(cwd).relative_to(WORK_MOUNT)
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=workspace / rel,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        out, err, _, killed, returncode = _supervise(proc, limits, started, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # best effort: a setsid'd daemon escapes this
        duration = time.monotonic() - started
        audit_events = _read_audit(Path(tmp) / "audit", None)
    exit_code = None if killed else returncode
    return RunResult(
        exit_code=exit_code,
        timed_out=killed == "wall time",
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_s=duration,
        audit_events=audit_events,
        sandboxed=False,
        killed_reason=killed or _signal_reason(exit_code),
        limits=asdict(limits),
        layers={
            "sandboxed": False,
            "unavailable_because": cause,
            "rlimits": rlimits,
            "netns": False,
            "uid": os.geteuid(),
        },
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m submissions.sandbox check`: print the self-check result (exit 1 on problems)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["check"]:
        print("usage: python -m submissions.sandbox check [RUNTIME_DIR]", file=sys.stderr)
        return 2
    problems = self_check(runtime=Path(args[1]) if len(args) > 1 else None)
    for problem in problems:
        print(f"sandbox: {problem}")
    if not problems:
        print("sandbox: ready")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
