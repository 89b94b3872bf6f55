"""One sandboxed run: the bwrap command line, its environment and /etc, the audit log, `run`."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path, PurePosixPath

from submissions.sandbox.libc import memfd
from submissions.sandbox.preflight import static_problems
from submissions.sandbox.supervise import Capture, signal_reason, supervise
from submissions.sandbox.types import (
    AUDIT_FILE,
    AUDIT_MAX_EVENTS,
    AUDIT_MOUNT,
    AUDIT_READ_BYTES,
    DEFAULT_BWRAP,
    DEFAULT_RUNTIME,
    ENV_NAME,
    HOOKS_MOUNT,
    HOST_ENV,
    PRLIMIT,
    SANDBOX_HOME,
    SANDBOX_SHM,
    SANDBOX_TMP,
    SANDBOX_UID_BASE,
    SETPRIV,
    SITE_MOUNT,
    SITECUSTOMIZE,
    SYSTEM_PATH,
    SYSTEM_RUNTIME,
    WORK_MOUNT,
    Bind,
    RunResult,
    SandboxLimits,
    SandboxUnavailable,
    log,
)
from submissions.sandbox.uids import gid_of, slot_lock, slot_uid, sweep_uid
from submissions.sandbox.workspace import read_output_file


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
    runtime: Path,
    env: dict[str, str] | None,
    audit_watch: Iterable[str],
    site: Path | None = None,
) -> dict[str, str]:
    """Return the whole environment inside the sandbox: the allowlist plus the caller's extras."""
    path = SYSTEM_PATH if runtime == SYSTEM_RUNTIME else f"{runtime}/bin:{SYSTEM_PATH}"
    if site is not None:
        # The site's scripts come after the runtime's (a package's own `python3` must not
        # replace the interpreter); its packages are put on sys.path by the hooks'
        # sitecustomize, after the standard library and before the runtime's packages.
        first, _, rest = path.partition(":")
        path = f"{first}:{SITE_MOUNT}/bin:{rest}"
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
    if site is not None:
        out["CR_SITE"] = SITE_MOUNT  # its .pth files are read by the hooks' sitecustomize
    for key, value in (env or {}).items():
        if not ENV_NAME.match(key) or "\0" in value:
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
    binds: Sequence[Bind] = (),
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
    for bind in binds:
        a += ["--bind" if bind.writable else "--ro-bind", str(bind.source), bind.dest]
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


@functools.lru_cache(maxsize=4)
def _hook_bytecode(source: bytes) -> tuple[str, bytes]:
    """The audit hook compiled once, as the name and bytes of its __pycache__ file.

    Every Python process in the sandbox imports the hook; without bytecode beside it (the
    mount is read-only, and PYTHONDONTWRITEBYTECODE is set) each one compiled it anew, about
    2 ms. A checked hash-based pyc: the interpreter verifies it against the source it
    mounts, and one of another Python version (another magic number) is ignored for the
    source, so it can only be used when it is exactly this source's code.
    """
    code = compile(source, f"{HOOKS_MOUNT}/sitecustomize.py", "exec", dont_inherit=True)
    # What py_compile writes for a checked hash-based pyc, without a file in between.
    make_pyc = importlib._bootstrap_external._code_to_hash_pyc  # type: ignore[attr-defined]  # private: not in the stubs
    pyc = make_pyc(code, importlib.util.source_hash(source), checked=True)
    return f"sitecustomize.{sys.implementation.cache_tag}.pyc", bytes(pyc)


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
    site: Path | None = None,
    binds: Sequence[Bind] = (),
    cancel_fd: int | None = None,
) -> RunResult:
    """Run command in the sandbox, workspace at /work; raise SandboxUnavailable if it cannot start.

    `site` is a host folder of installed packages, mounted read-only at SITE_MOUNT and put
    first on sys.path and PATH (after the hooks); `binds` are further folders mounted in.
    Once `cancel_fd` (a pipe's read end) is readable, the run is killed: its result says
    killed_reason "cancelled" (the caller no longer needs it).
    Never falls back to running unsandboxed unless allow_unsandboxed=True (the loudly
    named SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED setting); the result then says sandboxed=False.
    """
    argv = _check_command(command)
    cwd = _check_cwd(cwd_in_sandbox)
    runtime = Path(runtime) if runtime else DEFAULT_RUNTIME
    uid = slot_uid(slot, uid_base)
    sandbox_env = _sandbox_env(runtime, env, audit_watch, site)
    mounts = [*binds, *([Bind(Path(site), SITE_MOUNT)] if site is not None else [])]
    problems = static_problems(bwrap, runtime, [uid])
    if not problems:
        with slot_lock(uid):
            return _run_sandboxed(
                argv,
                Path(workspace),
                limits,
                uid,
                runtime,
                sandbox_env,
                cwd,
                bwrap,
                mounts,
                cancel_fd,
            )
    cause = "; ".join(problems)
    if not allow_unsandboxed:
        raise SandboxUnavailable(cause)
    if mounts:
        # The mounts' paths exist only inside the sandbox; nothing else would see them.
        raise SandboxUnavailable(f"{cause} (a hand-in's dependencies install only in the sandbox)")
    # Only when the host lacks the sandbox; a run that failed to start is never retried bare.
    log.warning("SANDBOX UNAVAILABLE (%s): RUNNING CANDIDATE CODE UNSANDBOXED (dev setting)", cause)
    return _run_unsandboxed(
        argv, Path(workspace), limits, runtime, sandbox_env, cwd, cause, cancel_fd
    )


def _run_sandboxed(
    argv: list[str],
    workspace: Path,
    limits: SandboxLimits,
    uid: int,
    runtime: Path,
    sandbox_env: dict[str, str],
    cwd: str,
    bwrap: str,
    binds: Sequence[Bind] = (),
    cancel_fd: int | None = None,
) -> RunResult:
    """Run argv under setpriv + prlimit + bwrap and collect the outcome."""
    gid = gid_of(uid)
    st = os.lstat(workspace)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise ValueError(
            f"workspace {workspace} must be a directory owned by uid {uid} (see prepare_workspace)"
        )
    # Leftovers of a crashed run on this slot would count against RLIMIT_NPROC.
    pre_swept = sweep_uid(uid)
    audit_dir = _prepare_audit_dir(workspace.parent, uid, gid)
    fds: list[int] = []
    try:
        data_fds = {dest: memfd(dest, data) for dest, data in _etc_files(uid, gid).items()}
        hook = SITECUSTOMIZE.read_bytes()
        data_fds[f"{HOOKS_MOUNT}/sitecustomize.py"] = memfd("sitecustomize", hook)
        pyc_name, pyc = _hook_bytecode(hook)
        data_fds[f"{HOOKS_MOUNT}/__pycache__/{pyc_name}"] = memfd("sitecustomize.pyc", pyc)
        fds += data_fds.values()
        status_r, status_w = os.pipe()
        fds += [status_r, status_w]
        cmd = _drop_privileges(uid, gid, limits)
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
            binds,
        )[1:]
        # Options go through --args: bwrap's pid 1 stays in the sandbox, and its command
        # line (host paths, env values) would be readable there and in the host's `ps`.
        args_fd = memfd("bwrap-args", b"".join(os.fsencode(o) + b"\0" for o in options))
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
            env=HOST_ENV,
            pass_fds=(status_w, *data_fds.values()),
            start_new_session=True,
        )
        for fd in (status_w, *data_fds.values()):
            os.close(fd)
            fds.remove(fd)
        out, err, status_raw, killed, returncode = supervise(
            proc, limits, started, status_r, cancel_fd
        )
        duration = time.monotonic() - started
        post_swept = sweep_uid(uid)
        audit_events = _read_audit(audit_dir, uid)
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(audit_dir, ignore_errors=True)

    exit_code, killed = _exit_of(status_raw, killed, returncode, err.value())
    layers = _layers(uid, limits, workspace, runtime, pre_swept, post_swept)
    return _result(out, err, duration, audit_events, exit_code, killed, limits, True, layers)


def _drop_privileges(uid: int, gid: int, limits: SandboxLimits) -> list[str]:
    """setpriv (the slot uid, no capabilities, no new privileges), then prlimit's limits."""
    cmd = [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    cmd += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    cmd += [PRLIMIT, f"--nproc={limits.processes}", f"--as={limits.address_space_bytes}"]
    cmd += [f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}", "--core=0"]
    # soft < hard: SIGXCPU (reported as "cpu time") comes before the hard SIGKILL.
    cmd += [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", "--"]
    return cmd


def _exit_of(
    status_raw: bytes, killed: str | None, returncode: int | None, stderr: bytes
) -> tuple[int | None, str | None]:
    """The command's exit code from bwrap's --json-status-fd, or why there is none."""
    status = {}
    for line in status_raw.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                status.update(item)
    if killed is None and "exit-code" not in status and (returncode or 0) >= 0:
        # bwrap never reported an exit code: setup failed before the command ran (S-27).
        tail = stderr[-600:].decode(errors="replace").strip()
        raise SandboxUnavailable(f"sandbox failed to start: {tail or f'bwrap exit {returncode}'}")
    if killed is not None:
        return None, killed
    if "exit-code" in status:
        return int(status["exit-code"]), None
    reason = (
        f"signal {signal.Signals(-returncode).name}" if returncode and returncode < 0 else "unknown"
    )
    return None, reason


def _layers(
    uid: int, limits: SandboxLimits, workspace: Path, runtime: Path, pre: int, post: int
) -> dict[str, object]:
    """What isolated this run, for the evidence (phase 2 layers say False)."""
    return {
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
        "leftovers_killed_before": pre,
        "leftovers_killed_after": post,
    }


def _result(
    out: Capture,
    err: Capture,
    duration: float,
    audit_events: list[dict],
    exit_code: int | None,
    killed: str | None,
    limits: SandboxLimits,
    sandboxed: bool,
    layers: dict[str, object],
) -> RunResult:
    return RunResult(
        exit_code=exit_code,
        timed_out=killed == "wall time",
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_s=duration,
        audit_events=audit_events,
        sandboxed=sandboxed,
        killed_reason=killed or signal_reason(exit_code),
        limits=asdict(limits),
        layers=layers,
    )


def _run_unsandboxed(
    argv: list[str],
    workspace: Path,
    limits: SandboxLimits,
    runtime: Path,
    sandbox_env: dict[str, str],
    cwd: str,
    cause: str,
    cancel_fd: int | None = None,
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
            env["PATH"] = SYSTEM_PATH
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
        out, err, _, killed, returncode = supervise(proc, limits, started, None, cancel_fd)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # best effort: a setsid'd daemon escapes this
        duration = time.monotonic() - started
        audit_events = _read_audit(Path(tmp) / "audit", None)
    exit_code = None if killed else returncode
    layers = {
        "sandboxed": False,
        "unavailable_because": cause,
        "rlimits": rlimits,
        "netns": False,
        "uid": os.geteuid(),
    }
    return _result(out, err, duration, audit_events, exit_code, killed, limits, False, layers)
