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

The core modules import no Django or Celery; `slots` (the door jobs use) reads the settings.

Modules: `types` (limits, results, errors), `uids`, `workspace`, `preflight` and `selfcheck`,
`bwrap` (one run), `supervise` (its clock and capture), `libc`, `slots` (the job-facing door),
`runtime/` (the files mounted into the sandbox: sitecustomize, the probe and re-drive drivers).
"""

from __future__ import annotations

from submissions.sandbox.bwrap import run
from submissions.sandbox.selfcheck import ensure_ready, self_check
from submissions.sandbox.types import (
    DEFAULT_RUNTIME,
    ENV_ALLOWLIST,
    SANDBOX_SLOTS,
    SYSTEM_RUNTIME,
    WORK_MOUNT,
    OutputFileRefused,
    RunResult,
    SandboxBusy,
    SandboxLimits,
    SandboxUnavailable,
    WorkspaceError,
)
from submissions.sandbox.uids import gid_of, slot_uid
from submissions.sandbox.workspace import (
    fresh_file_stamps,
    output_file_stamp,
    outputs_read_back,
    prepare_workspace,
    read_output_file,
    remove_workspace,
)

__all__ = [
    "DEFAULT_RUNTIME",
    "ENV_ALLOWLIST",
    "SANDBOX_SLOTS",
    "SYSTEM_RUNTIME",
    "WORK_MOUNT",
    "OutputFileRefused",
    "RunResult",
    "SandboxBusy",
    "SandboxLimits",
    "SandboxUnavailable",
    "WorkspaceError",
    "ensure_ready",
    "fresh_file_stamps",
    "gid_of",
    "output_file_stamp",
    "outputs_read_back",
    "prepare_workspace",
    "read_output_file",
    "remove_workspace",
    "run",
    "self_check",
    "slot_uid",
]
