"""Environments built from cached wheels inside the sandbox, cached by the resolved set.

    DEPS_DIR/wheels/ab/<sha256>/<file>.whl   the wheel cache (fetch.py), shared by all
    DEPS_DIR/envs/<key>/site/                an installed set (`uv pip install --target`)
    DEPS_DIR/envs/<key>/meta.json            what it holds, its size; its mtime = last use
    DEPS_DIR/locks/<key>.lock                shared while in use, exclusive while built

The install runs in the sandbox with the network off: uv, given only the wheels of this set
(read-only, by path, with their hashes), unpacks them into a writable site folder. No
sdist, no build step, no candidate code. The finished folder is handed to root, made
read-only for everyone else, and published by one rename; a crash leaves only a build
folder, swept on the next build. The cache has a size cap and drops the least recently
used environments that nobody holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from submissions.deps.fetch import Fetched
from submissions.deps.resolve import DepsFailed
from submissions.sandbox.types import Bind, RunResult, runtime_python

UV_MOUNT = "/opt/cr-uv"
WHEELS_MOUNT = "/opt/cr-wheels"
BUILD_MOUNT = "/opt/cr-build"  # one mount for the target and uv's cache: hardlinks work
META = "meta.json"
_STALE_BUILD_SECONDS = 6 * 3600


class InstallFailed(DepsFailed):
    """The install in the sandbox failed; the message carries uv's answer."""


@dataclass(frozen=True)
class Environment:
    key: str
    site: Path
    packages: list[str]
    size_bytes: int
    cached: bool
    seconds: float


def _mkdir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def _tree_size(path: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _hand_to_root(path: Path) -> None:
    """Everything under path owned by us, nobody else may write (links are never followed:
    fwalk works through directory fds, and a link is changed as itself, never its target)."""
    uid, gid = os.geteuid(), os.getegid()
    for _, dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
        for name in [*dirs, *files]:
            st = os.lstat(name, dir_fd=dir_fd)
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                mode = (st.st_mode & 0o755) | 0o444 | (0o111 if stat.S_ISDIR(st.st_mode) else 0)
                os.chmod(name, mode, dir_fd=dir_fd)
    os.chmod(path, 0o755, follow_symlinks=False)  # noqa: S103 - public packages, read-only


class EnvCache:
    """The environment and wheel cache under one root the sandbox uids can traverse."""

    def __init__(self, root: Path, cap_bytes: int) -> None:
        self.root = Path(root)
        self.cap_bytes = cap_bytes

    @property
    def wheels(self) -> Path:
        self._check_root()
        return _mkdir(self.root / "wheels")

    def _dir(self, name: str) -> Path:
        self._check_root()
        return _mkdir(self.root / name, 0o711)

    def _check_root(self) -> None:
        """The cache root is ours alone: on a shared host another user could have made it
        first (it defaults under /var/tmp) and would then choose what sandboxes mount."""
        if not os.path.lexists(self.root):
            self.root.mkdir(parents=True, mode=0o711, exist_ok=True)
            os.chmod(self.root, 0o711, follow_symlinks=False)  # noqa: S103 - traversable only
        st = os.lstat(self.root)
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise InstallFailed(
                f"DEPS_DIR {self.root} is not a folder owned by this worker's user and writable "
                "by it alone: refusing to use it",
                infrastructure=True,
            )

    @contextlib.contextmanager
    def _lock(self, key: str, mode: int) -> Iterator[None]:
        path = _mkdir(self.root / "locks", 0o700) / f"{key}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    def lookup(self, key: str) -> Environment | None:
        """The published environment for `key`, marked as just used; None when absent."""
        meta = self._dir("envs") / key / META
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        os.utime(meta)
        return Environment(key, meta.parent / "site", data["packages"], data["size"], True, 0.0)

    @contextlib.contextmanager
    def held(self, key: str) -> Iterator[None]:
        """Hold `key` shared: eviction leaves it alone while a job uses it."""
        with self._lock(key, fcntl.LOCK_SH):
            yield

    @contextlib.contextmanager
    def building(self, key: str) -> Iterator[Path]:
        """An exclusive build folder for `key`; publish() it before leaving."""
        with self._lock(key, fcntl.LOCK_EX):
            self._sweep_builds()
            build = Path(tempfile.mkdtemp(prefix=f"{key[:16]}-", dir=self._dir("builds")))
            try:
                yield build
            finally:
                shutil.rmtree(build, ignore_errors=True)

    def publish(self, key: str, build: Path, packages: list[str]) -> Environment:
        """Make the build folder's site the environment for `key` (one rename)."""
        site = build / "site"
        installed = build / "rw" / "site"
        # The sandbox uid owned rw/: nothing in it is followed. Only a real folder is taken,
        # and it is root's before anything below it is walked.
        try:
            if stat.S_ISDIR(os.lstat(installed).st_mode):
                os.lchown(installed, os.geteuid(), os.getegid())
                os.chmod(installed, 0o700, follow_symlinks=False)
                os.rename(installed, site)
        except FileNotFoundError:
            pass
        try:
            is_folder = stat.S_ISDIR(os.lstat(site).st_mode)
        except FileNotFoundError:
            is_folder = False
        if not is_folder:
            raise InstallFailed("the install left no site folder (or something else in its place)")
        for scratch in ("rw", "wheels"):  # uv's cache and the wheel links stay behind
            shutil.rmtree(build / scratch, ignore_errors=True)
        _hand_to_root(site)
        size = _tree_size(site)
        meta = {"packages": packages, "size": size, "built_at": time.time()}
        (build / META).write_text(json.dumps(meta), encoding="utf-8")
        os.chmod(build / META, 0o644)
        os.chmod(build, 0o755)  # noqa: S103 - public packages, read-only to the sandbox
        target = self._dir("envs") / key
        if target.exists():  # an unpublished leftover of a crash (no meta.json): replace it
            shutil.rmtree(target)
        os.rename(build, target)
        return Environment(key, target / "site", packages, size, False, 0.0)

    def evict(self, keep: str) -> list[str]:
        """Drop least recently used environments nobody holds until the cache fits its cap."""
        envs = self._dir("envs")
        rows = []
        for entry in os.scandir(envs):
            meta = Path(entry.path) / META
            try:
                size = json.loads(meta.read_text(encoding="utf-8"))["size"]
                rows.append((meta.stat().st_mtime, size, entry.name))
            except (OSError, ValueError, KeyError):
                continue
        total = sum(size for _, size, _ in rows)
        dropped = []
        for _, size, key in sorted(rows):
            if total <= self.cap_bytes:
                break
            if key == keep or not self._try_drop(key):
                continue
            total -= size
            dropped.append(key)
        return dropped

    def _try_drop(self, key: str) -> bool:
        path = _mkdir(self.root / "locks", 0o700) / f"{key}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            # meta.json first, then out of the way by one rename: a crash mid-delete leaves
            # a trash folder, never an environment that looks whole and is not.
            target = self.root / "envs" / key
            with contextlib.suppress(FileNotFoundError):
                (target / META).unlink()
            trash = self._dir("builds") / f".trash-{key[:16]}-{os.getpid()}-{time.time_ns()}"
            with contextlib.suppress(FileNotFoundError):
                os.rename(target, trash)
            shutil.rmtree(trash, ignore_errors=True)
            return True
        finally:
            os.close(fd)

    def _sweep_builds(self) -> None:
        cutoff = time.time() - _STALE_BUILD_SECONDS
        for entry in os.scandir(self._dir("builds")):
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)

    def uv_binary(self) -> Path:
        """A copy of our pinned uv where the sandbox uids can read it (not under a home)."""
        source = Path(sys.executable).with_name("uv")
        if not source.exists():
            found = shutil.which("uv")
            if not found:
                raise InstallFailed(
                    "uv is not installed beside the worker's Python", infrastructure=True
                )
            source = Path(found)
        st = source.stat()
        tools = self._dir("tools")
        target = tools / f"uv-{st.st_size}-{int(st.st_mtime)}"
        if not target.exists():
            tmp = Path(tempfile.mkdtemp(dir=tools)) / "uv"
            shutil.copy2(source, tmp)
            os.chmod(tmp, 0o755)  # noqa: S103 - our uv, run by the sandbox uids
            os.rename(tmp, target)
            os.rmdir(tmp.parent)
        return target


def install_plan(build: Path, fetched: list[Fetched]) -> Path:
    """A folder of this set's wheels (links into the cache) and a hash-pinned requirements file."""
    wheels = _mkdir(build / "wheels")
    lines = []
    for item in fetched:
        link = wheels / item.wheel.filename
        try:
            os.link(item.path, link)
        except OSError:
            shutil.copyfile(item.path, link)
        os.chmod(link, 0o644)
        lines.append(f"{WHEELS_MOUNT}/{item.wheel.filename} --hash=sha256:{item.wheel.sha256}")
    (wheels / "requirements.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.chmod(wheels / "requirements.txt", 0o644)
    return wheels


def install_command(runtime: Path) -> list[str]:
    """uv, offline, from the listed wheels only, into the writable site folder."""
    return [
        f"{UV_MOUNT}/uv",
        "pip",
        "install",
        "--offline",
        "--no-index",
        "--no-deps",
        "--require-hashes",
        "--no-config",
        "--link-mode",
        "hardlink",
        "--target",
        f"{BUILD_MOUNT}/site",
        "--python",
        runtime_python(runtime),
        "--cache-dir",
        f"{BUILD_MOUNT}/cache",
        "-r",
        f"{WHEELS_MOUNT}/requirements.txt",
    ]


def install_binds(build: Path, wheels: Path, uv: Path) -> list[Bind]:
    """The wheels and uv read-only; the build's `rw` folder (the uid's) writable."""
    return [
        Bind(wheels, WHEELS_MOUNT),
        Bind(uv, f"{UV_MOUNT}/uv"),
        Bind(build / "rw", BUILD_MOUNT, writable=True),
    ]


def install_failure(result: RunResult) -> str | None:
    """Why the install run failed, from uv's own words; None when it succeeded."""
    if result.exit_code == 0:
        return None
    said = (result.stderr or result.stdout).decode("utf-8", "replace").strip()[-1500:]
    why = f" ({result.killed_reason})" if result.killed_reason else ""
    return f"uv exited {result.exit_code}{why}: {said or 'no output'}"
