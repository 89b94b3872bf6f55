"""The sandbox's constants, limits, results and errors (no Django, no Celery)."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)


DEFAULT_BWRAP = "/usr/bin/bwrap"


SETPRIV = "/usr/bin/setpriv"


PRLIMIT = "/usr/bin/prlimit"


DEFAULT_RUNTIME = Path("/opt/cassette-review/sandbox-runtime")


# Passing runtime=SYSTEM_RUNTIME runs Debian's own python3 from /usr (no venv): used by the
# tests when the real runtime has not been built.
SYSTEM_RUNTIME = Path("/usr")

# The sandbox's PATH after the runtime's bin: the host's /usr, mounted read-only (/bin is a
# link to usr/bin inside). What else the sandbox can run is read from it (deps.ecosystems).
SYSTEM_PATH = "/usr/bin:/bin"


SANDBOX_UID_BASE = 64000


SANDBOX_SLOTS = 8


RUNTIME_FILES = Path(__file__).resolve().with_name("runtime")
SITECUSTOMIZE = RUNTIME_FILES / "sitecustomize.py"


# Where the slot and uid locks live: one folder per host, shared by every process of the host
# that uses the same sandbox uids (a setting for hosts whose /run is not writable or shared).
LOCK_DIR = Path(os.environ.get("SANDBOX_LOCK_DIR") or "/run/cassette-review")


WORK_MOUNT = "/work"


HOOKS_MOUNT = "/opt/cr-hooks"


AUDIT_MOUNT = "/run/cr-audit"


# A hand-in's own dependencies (a `--target` install, read-only): first on sys.path after
# the hooks, its bin/ first on PATH. The runtime's packages stay importable after it.
SITE_MOUNT = "/opt/cr-site"


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


CHUNK = 1 << 16


HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


MS_NOSUID, MS_NODEV = 2, 4


MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8


@dataclass(frozen=True)
class Bind:
    """A host folder mounted into the sandbox at `dest` (read-only unless `writable`)."""

    source: Path
    dest: str
    writable: bool = False


def runtime_python(runtime: Path) -> str:
    """The interpreter the sandbox runs: the runtime venv's, or Debian's own."""
    return "/usr/bin/python3" if Path(runtime) == SYSTEM_RUNTIME else f"{runtime}/bin/python"


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
