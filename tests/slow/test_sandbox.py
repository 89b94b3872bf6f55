"""The real bubblewrap sandbox against hostile candidate code (security reference §1.3, S-01..S-27).

Every test starts the real sandbox as a dedicated uid; nothing is mocked. The users are
created on first use (scripts/sandbox-setup.sh --users-only, as root, like the worker).
The runtime is the built one at /opt/cassette-review/sandbox-runtime when present (CI
runs `make sandbox-runtime` first), else Debian's own python3 from /usr: the escape
cases need nothing more. No test aims at any address outside loopback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from submissions import sandbox
from submissions.sandbox import (
    SYSTEM_RUNTIME,
    OutputFileRefused,
    RunResult,
    SandboxBusy,
    SandboxLimits,
    SandboxUnavailable,
    WorkspaceError,
    prepare_workspace,
    read_output_file,
    remove_workspace,
)
from submissions.sandbox.types import DEFAULT_RUNTIME
from submissions.sandbox.uids import slot_lock, uid_pids
from tests.paths import ROOT

pytestmark = [pytest.mark.sandbox, pytest.mark.xdist_group("sandbox")]


def _xdist_index() -> int:
    """Return this pytest-xdist worker's number (0 without xdist)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name[2:].isdigit() else 0


# One slot per xdist worker, from the top (7, 6, ...): slots are exclusive (the lock), and
# xdist_group alone does not keep these tests together under pytest 9.2 + xdist 3.8.
SLOT = sandbox.SANDBOX_SLOTS - 1 - _xdist_index() % 4
UID = sandbox.slot_uid(SLOT)
OTHER_UID = sandbox.slot_uid(0)  # only owns "another submission's" files; never runs here
FAST = SandboxLimits(wall_seconds=20)

PROBE_PY = """\
import socket
import subprocess


def main():
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)  # CONNECT
    except OSError:
        pass
    with open("cassettes/a.yaml") as fh:  # OPEN
        fh.read()
    subprocess.run(["true", "a", "b", "c", "d"], check=False)


main()
"""

SUBMISSION = {
    "main.py": "print('hello from the submission')\n",
    "cassettes/a.yaml": "interactions: []\n",
    "tests/test_ok.py": "def test_ok():\n    assert 1 + 1 == 2\n",
    "probe.py": PROBE_PY,
    # A candidate's own sitecustomize must not replace the audit hook.
    "sitecustomize.py": "print('SHADOWED')\n",
}


def _line_of(marker: str) -> int:
    """Return the 1-based line of PROBE_PY that carries marker."""
    return next(i for i, line in enumerate(PROBE_PY.splitlines(), 1) if marker in line)


def _uid_exists(uid: int) -> bool:
    """Whether uid has a passwd entry."""
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write files under root and return root."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="session")
def sandbox_users() -> None:
    """Create the sandbox users when missing (root, idempotent)."""
    if not (_uid_exists(UID) and _uid_exists(OTHER_UID)):
        script = ROOT / "scripts" / "sandbox-setup.sh"
        subprocess.run(["bash", str(script), "--users-only"], check=True, timeout=120)


@pytest.fixture(scope="session")
def runtime() -> Path:
    """The built sandbox runtime, or Debian's python3 when it has not been built."""
    return DEFAULT_RUNTIME if (DEFAULT_RUNTIME / "bin" / "python3").exists() else SYSTEM_RUNTIME


@pytest.fixture(scope="session")
def area(sandbox_users: None) -> Iterator[Path]:
    """A host folder the sandbox uids can traverse (pytest's tmp_path is 0700 root)."""
    path = Path(tempfile.mkdtemp(prefix="cr-sandbox-test-"))
    path.chmod(0o711)
    yield path
    for child in path.iterdir():
        remove_workspace(child)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def src(area: Path) -> Path:
    """A small extracted submission tree on the host."""
    return _write_tree(Path(tempfile.mkdtemp(prefix="src-", dir=area)), SUBMISSION)


@pytest.fixture
def ws(src: Path, area: Path) -> Iterator[Path]:
    """A fresh workspace for slot SLOT, removed afterwards."""
    path = prepare_workspace(src, area, UID)
    yield path
    remove_workspace(path)


Runner = Callable[..., RunResult]


@pytest.fixture
def sbx(ws: Path, runtime: Path, src: Path, area: Path) -> Iterator[Runner]:
    """Run in the sandbox on SLOT; afterwards check the worker is healthy and nothing is left."""

    def runner(command: str | list[str], **kwargs: object) -> RunResult:
        kwargs.setdefault("workspace", ws)
        kwargs.setdefault("limits", FAST)
        kwargs.setdefault("slot", SLOT)
        kwargs.setdefault("runtime", runtime)
        return sandbox.run(command, **kwargs)  # type: ignore[arg-type]

    yield runner
    # After every hostile run: no process of the uid survives, and a normal run works.
    assert uid_pids(UID) == []
    fresh = prepare_workspace(src, area, UID)
    try:
        res = sandbox.run(
            ["python3", "main.py"], workspace=fresh, limits=FAST, slot=SLOT, runtime=runtime
        )
    finally:
        remove_workspace(fresh)
    assert (res.exit_code, res.stdout) == (0, b"hello from the submission\n")


def py(source: str) -> list[str]:
    """Return argv running Python source in the sandbox."""
    return ["python3", "-c", textwrap.dedent(source)]


def inside(run: Runner, source: str, **kwargs: object) -> dict:
    """Run Python source that prints one JSON object; return it."""
    res = run(py(source), **kwargs)
    assert res.exit_code == 0, res.stderr.decode(errors="replace")
    return json.loads(res.stdout.decode().strip().splitlines()[-1])


# --------------------------------------------------------------------------- network


def test_network_namespace_has_only_loopback_no_route_and_no_dns(sbx: Runner) -> None:
    """S-01/S-03: no interface but lo, no IPv4 route, names do not resolve."""
    got = inside(
        sbx,
        """
        import json, os, socket
        ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
        routes = open("/proc/net/route").read().splitlines()[1:]
        try:
            socket.getaddrinfo("api.openai.com", 443)
            dns = "resolved"
        except socket.gaierror:
            dns = "failed"
        local = socket.getaddrinfo("localhost", 80)[0][4][0]
        print(json.dumps({"ifaces": ifaces, "routes": routes, "dns": dns, "local": local,
                          "resolv": os.path.exists("/etc/resolv.conf")}))
        """,
    )
    assert got == {
        "ifaces": ["lo"],
        "routes": [],
        "dns": "failed",
        "local": "127.0.0.1",
        "resolv": False,
    }


def test_host_redis_postgres_and_unix_sockets_are_out_of_reach(sbx: Runner) -> None:
    """S-02/S-04: the namespace's loopback is not the host's; no host unix sockets."""
    name = f"cr-sbx-test-{os.getpid()}"
    host_abstract = socket.socket(socket.AF_UNIX)
    host_abstract.bind("\0" + name)
    host_abstract.listen()
    try:
        got = inside(
            sbx,
            f"""
            import json, os, socket
            out = {{}}
            for port in (6379, 5432):
                s = socket.socket()
                out[str(port)] = s.connect_ex(("127.0.0.1", port))
            u = socket.socket(socket.AF_UNIX)
            try:
                u.connect("\\0{name}")
                out["abstract"] = "connected"
            except OSError as exc:
                out["abstract"] = exc.errno
            out["paths"] = [p for p in ("/run/postgresql", "/var/run/redis", "/run/redis",
                            "/var/run/docker.sock", "/run/docker.sock") if os.path.exists(p)]
            print(json.dumps(out))
            """,
        )
    finally:
        host_abstract.close()
    refused = errno.ECONNREFUSED
    assert got == {"6379": refused, "5432": refused, "abstract": refused, "paths": []}


# --------------------------------------------------------------------------- filesystem


def test_host_secrets_other_workspaces_and_worker_env_are_invisible(
    sbx: Runner, area: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S-05/S-07/S-25: shadow, the app's db and key, another submission, worker env: none inside."""
    secrets = area / "host-secrets"
    secrets.mkdir(exist_ok=True)
    # World-readable on purpose: only the mount namespace may hide them, not file modes.
    (secrets / "db.sqlite3").write_text("HOST-DB-CONTENT")
    (secrets / "secret_key").write_text("HOST-SECRET-KEY")
    secrets.chmod(0o755)
    for f in secrets.iterdir():
        f.chmod(0o644)
    other = prepare_workspace(src, area, OTHER_UID)
    (other / "other-candidate.txt").write_text("OTHER")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-leak-1")
    monkeypatch.setenv("DATABASE_URL", "postgres://leak-2@127.0.0.1/db")
    monkeypatch.setenv("SECRET_KEY", "django-leak-3")
    try:
        probes = [
            "/etc/shadow",
            "/root",
            str(secrets / "db.sqlite3"),
            str(secrets / "secret_key"),
            str(other / "other-candidate.txt"),
            str(ROOT / "reviewer" / "settings.py"),
        ]
        got = inside(
            sbx,
            f"""
            import json, os
            found = {{}}
            for p in {probes!r}:
                try:
                    open(p).read() if not os.path.isdir(p) else os.listdir(p)
                    found[p] = "READ"
                except OSError as exc:
                    found[p] = exc.errno
            hits = []
            for top in ("/etc", "/opt", "/run", "/tmp", "/work", "/var"):
                for d, _, files in os.walk(top):
                    hits += [f for f in files if f in ("db.sqlite3", "secret_key", "other-candidate.txt")]
            print(json.dumps({{"found": found, "hits": hits, "env": dict(os.environ),
                              "pid1": open("/proc/1/environ", "rb").read().decode(),
                              "procs": [p for p in os.listdir("/proc") if p.isdigit()]}}))
            """,
            env={"CR_EXTRA": "given-by-caller"},
        )
    finally:
        remove_workspace(other)
    assert all(v in (errno.ENOENT, errno.EACCES) for v in got["found"].values()), got["found"]
    assert got["hits"] == []
    allowed = set(sandbox.ENV_ALLOWLIST) | {"PYTHONDONTWRITEBYTECODE", "TMPDIR", "PYTHONPATH"}
    allowed |= {
        "CR_AUDIT_LOG",
        "CR_AUDIT_ROOT",
        "CR_AUDIT_WATCH",
        "CR_EXTRA",
        "PWD",
    }  # PWD: --chdir
    assert set(got["env"]) <= allowed
    assert got["env"]["CR_EXTRA"] == "given-by-caller"
    everything = json.dumps(got["env"]) + got["pid1"]
    for leak in ("sk-test-leak-1", "leak-2", "django-leak-3"):
        assert leak not in everything
    assert len(got["procs"]) <= 3  # S-21: bwrap's pid 1, python (and nothing of the host)


def test_writes_succeed_only_in_workspace_and_tmp(sbx: Runner, runtime: Path) -> None:
    """S-06: everything outside /work, /tmp and /dev/shm is read-only or absent."""
    outside = ["/usr/x", "/etc/x", "/x", "/opt/x", "/run/x", "/dev/x", "/proc/x", f"{runtime}/x"]
    got = inside(
        sbx,
        f"""
        import json
        out = {{}}
        for p in {[*outside, "/work/ok", "/tmp/ok", "/tmp/home/ok", "/dev/shm/ok"]!r}:
            try:
                open(p, "w").write("x")
                out[p] = "ok"
            except OSError as exc:
                out[p] = exc.errno
        print(json.dumps(out))
        """,
    )
    for p in outside:
        assert got[p] in (errno.EROFS, errno.ENOENT, errno.EACCES), (p, got[p])
    assert [got[p] for p in ("/work/ok", "/tmp/ok", "/tmp/home/ok", "/dev/shm/ok")] == ["ok"] * 4


def test_identity_is_the_slot_uid_without_tty_or_nested_userns(sbx: Runner) -> None:
    """S-08/S-19/S-20: the slot uid (never 0), unshare refused, no controlling terminal."""
    res = sbx(
        "id -u; cat /proc/self/uid_map; hostname; "
        "unshare -U true 2>/dev/null && echo UNSHARE-OK || echo unshare-refused; "
        "(: </dev/tty) 2>/dev/null && echo TTY || echo no-tty"
    )
    lines = res.stdout.decode().split("\n")
    assert lines[0] == str(UID)
    inner, _outer, count = lines[1].split()
    assert (inner, count) == (str(UID), "1")  # one uid mapped: no root inside
    assert lines[2:5] == ["sandbox", "unshare-refused", "no-tty"]
    assert res.layers["uid"] == UID and res.layers["netns"] and res.sandboxed


def test_candidate_cannot_forge_its_exit_status_through_bwraps_pid1(sbx: Runner) -> None:
    """bwrap's pid 1 reports the exit code through an eventfd: the candidate cannot open it."""
    got = inside(
        sbx,
        """
        import json, os, struct
        out = {}
        for fd in os.listdir("/proc/1/fd"):
            if os.readlink(f"/proc/1/fd/{fd}") == "/dev/null":
                continue
            try:
                f = os.open(f"/proc/1/fd/{fd}", os.O_WRONLY)
                os.write(f, struct.pack("Q", 1))  # would read as "exit 0" to bwrap
                out[fd] = "WROTE"
            except OSError as exc:
                out[fd] = exc.errno
        print(json.dumps({"fds": out}))
        """,
    )
    assert got["fds"] and set(got["fds"].values()) == {errno.EACCES}  # the eventfd among them
    res = sbx("exit 3")
    assert res.exit_code == 3 and res.killed_reason is None


# --------------------------------------------------------------------------- resource limits


def test_fork_bomb_stops_at_the_process_cap(sbx: Runner) -> None:
    """S-09: Python and shell fork bombs hit EAGAIN / the wall clock; the host stays fine."""
    limits = SandboxLimits(wall_seconds=20, processes=40)
    got = inside(
        sbx,
        """
        import json, os, time
        n = 0
        try:
            while n < 1000:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                n += 1
        except BlockingIOError:
            print(json.dumps({"eagain": True, "forked": n}))
        """,
        limits=limits,
    )
    assert got["eagain"] and got["forked"] < 40
    start = time.monotonic()
    res = sbx(
        "bomb() { bomb | bomb & }; bomb; sleep 10",
        limits=SandboxLimits(wall_seconds=2, processes=40),
    )
    assert res.duration_s < 6 and time.monotonic() - start < 8


def test_allocating_4gb_fails_with_memory_error(sbx: Runner) -> None:
    """S-10: RLIMIT_AS turns a 4 GB allocation into MemoryError."""
    res = sbx(py("b = bytearray(4 * 2**30)"))
    assert res.exit_code == 1 and b"MemoryError" in res.stderr


def test_writing_a_1gb_file_stops_at_the_file_size_cap(sbx: Runner) -> None:
    """S-11: EFBIG at the cap for Python; SIGXFSZ for a tool that does not ignore it."""
    limits = SandboxLimits(wall_seconds=20, file_size_bytes=2**20)
    got = inside(
        sbx,
        """
        import json, os
        written, err = 0, None
        with open("/work/big", "wb", buffering=0) as fh:
            try:
                while written < 2**30:
                    written += fh.write(b"\\0" * 2**16)
            except OSError as exc:
                err = exc.errno
        print(json.dumps({"err": err, "size": os.path.getsize("/work/big")}))
        """,
        limits=limits,
    )
    assert got == {"err": errno.EFBIG, "size": 2**20}
    res = sbx(["dd", "if=/dev/zero", "of=/work/big2", "bs=1M", "count=1024"], limits=limits)
    assert res.exit_code == 128 + signal.SIGXFSZ and res.killed_reason == "file size"


def test_filling_tmp_and_shm_gives_enospc(sbx: Runner) -> None:
    """S-12: /tmp and /dev/shm are capped tmpfs mounts."""
    got = inside(
        sbx,
        """
        import json
        out = {}
        for d in ("/tmp", "/dev/shm"):
            written = 0
            try:
                with open(d + "/fill", "wb", buffering=0) as fh:
                    while written < 2**28:
                        written += fh.write(b"\\0" * 2**16)
            except OSError as exc:
                out[d] = [exc.errno, written]
        print(json.dumps(out))
        """,
        limits=SandboxLimits(wall_seconds=20, tmpfs_bytes=4 * 2**20),
    )
    for d in ("/tmp", "/dev/shm"):
        assert got[d][0] == errno.ENOSPC and got[d][1] <= 4 * 2**20


def test_printing_200mb_is_truncated_with_a_marker_and_killed_fast(sbx: Runner) -> None:
    """S-13: capture is capped, the run is killed past 16x the cap, quickly."""
    cap = 256 * 1024
    source = "import sys\nfor _ in range(200): sys.stdout.buffer.write(b'x' * 2**20)\n"
    res = sbx(py(source), limits=SandboxLimits(wall_seconds=20, output_bytes=cap))
    assert res.killed_reason == "output limit" and res.exit_code is None and not res.timed_out
    assert res.stdout_truncated and f"[… output truncated at {cap} bytes …]".encode() in res.stdout
    assert len(res.stdout) <= cap + 300 and res.duration_s < 5


def test_output_a_little_over_the_cap_keeps_head_and_tail(sbx: Runner) -> None:
    """The head, the marker line and the tail (pytest's summary lives there) are kept."""
    cap = 64 * 1024
    res = sbx(
        "echo START; head -c 200000 /dev/zero | tr '\\0' y; echo; echo END",
        limits=SandboxLimits(output_bytes=cap),
    )
    assert res.exit_code == 0 and res.killed_reason is None and res.stdout_truncated
    assert res.stdout.startswith(b"START\n") and res.stdout.endswith(b"\nEND\n")
    assert f"[… output truncated at {cap} bytes …]".encode() in res.stdout
    assert not res.stderr_truncated


def test_a_cancelled_run_is_killed_at_once_with_its_group(sbx: Runner) -> None:
    """A run its caller no longer needs (a probe made moot) is killed as soon as the cancel
    pipe is written, children included; the sbx fixture checks nothing of the uid is left."""
    r, w = os.pipe()
    try:
        timer = threading.Timer(0.5, os.write, (w, b"x"))
        timer.start()
        res = sbx("sleep 1000 & python3 -c 'import time; time.sleep(10**6)'", cancel_fd=r)
        timer.join()
    finally:
        os.close(r)
        os.close(w)
    assert res.killed_reason == "cancelled" and res.exit_code is None and not res.timed_out
    assert res.duration_s < 5


def test_sleeping_forever_is_ended_by_the_wall_clock(sbx: Runner) -> None:
    """S-14: the wall clock kills it; stdin is /dev/null so input() cannot block."""
    res = sbx(py("import time; time.sleep(10**6)"), limits=SandboxLimits(wall_seconds=1))
    assert res.timed_out and res.exit_code is None and res.killed_reason == "wall time"
    assert 1 <= res.duration_s < 3
    res = sbx(py("input()"))
    assert res.exit_code == 1 and b"EOFError" in res.stderr and res.duration_s < 5


def test_busy_loop_is_stopped_by_the_cpu_limit(sbx: Runner) -> None:
    """S-15: SIGXCPU at the soft CPU limit, reported as 'cpu time'."""
    res = sbx(py("while True: pass"), limits=SandboxLimits(wall_seconds=20, cpu_seconds=1))
    assert res.exit_code == 128 + signal.SIGXCPU and res.killed_reason == "cpu time"


# --------------------------------------------------------------------------- process lifetime


def _marker_pids(marker: str) -> list[str]:
    """Return host pids whose command line holds marker."""
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return out.stdout.split()


def test_daemonised_children_are_gone_after_the_run(sbx: Runner) -> None:
    """S-16: setsid, nohup and a double fork all die with the sandbox."""
    marker = f"crmarker{os.getpid()}x{time.monotonic_ns()}"
    # The marker travels in $M so that only the sleepers' own argv carries it.
    sleeper = "python3 -c 'import time; time.sleep(1000)' \"$M\""
    double_fork = (
        "import os\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
        "  os.execvp('python3', ['python3', '-c', 'import time; time.sleep(1000)', os.environ['M']])"
    )
    res = sbx(
        f"setsid {sleeper} >/dev/null 2>&1 & nohup {sleeper} >/dev/null 2>&1 & "
        f'python3 -c "{double_fork}"; sleep 0.3; pgrep -c -f "$M"',
        env={"M": marker},
    )
    assert res.exit_code == 0 and res.stdout == b"3\n", res.stderr  # really running inside
    assert _marker_pids(marker) == []


def test_killing_the_worker_kills_the_sandbox(area: Path, ws: Path, runtime: Path) -> None:
    """S-17: SIGKILL of the calling process takes every sandbox process with it (die-with-parent)."""
    marker = f"crparent{os.getpid()}x{time.monotonic_ns()}"
    # The marker travels in the environment: only the sandboxed sleeper's argv carries it.
    code = (
        f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\nfrom submissions import sandbox\n"
        "sleeper = ['python3', '-c', 'import time; time.sleep(1000)', os.environ['M']]\n"
        f"sandbox.run(sleeper, workspace=Path({str(ws)!r}),"
        f" limits=sandbox.SandboxLimits(wall_seconds=60), slot={SLOT}, runtime=Path({str(runtime)!r}))\n"
    )
    # The slot can be held for a moment by another test's run (SandboxBusy in the child):
    # that is not what this test is about, so it starts again; any other early exit fails
    # with the child's own error.
    for _attempt in range(5):
        parent = subprocess.Popen(
            [sys.executable, "-c", code], env={**os.environ, "M": marker},
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not _marker_pids(marker) and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if _marker_pids(marker) or parent.poll() is None:
            break
        error = parent.stderr.read()
        assert "SandboxBusy" in error, f"the sandboxed sleep never started: {error[-2000:]}"
        time.sleep(1)
    try:
        assert _marker_pids(marker), "the sandboxed sleep never started"
        # S-08 from the host's side: the sandboxed process belongs to the slot uid.
        assert {os.stat(f"/proc/{pid}").st_uid for pid in _marker_pids(marker)} == {UID}
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 3
        while _marker_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marker_pids(marker) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            parent.kill()
    assert uid_pids(UID) == []


def test_a_slot_serves_one_run_at_a_time(sbx: Runner) -> None:
    """One uid per concurrent run: a second run on a held slot is refused, not interleaved."""
    with slot_lock(UID), pytest.raises(SandboxBusy):
        sbx("true")


# --------------------------------------------------------------------------- reading results back


def test_outputs_read_back_in_one_child_as_read_output_file_would(
    sbx: Runner, ws: Path, area: Path
) -> None:
    """The stamps and reads of a run's outputs, taken in one child as the uid, say what
    output_file_stamp and read_output_file say one path at a time: links, FIFOs, 0000 and
    oversized files refused, an output the run left alone not read."""
    (ws / "kept.json").write_text("committed")  # the run never touches it
    os.chown(ws / "kept.json", UID, sandbox.gid_of(UID))
    (ws / "rewritten.json").write_text("old")
    os.chown(ws / "rewritten.json", UID, sandbox.gid_of(UID))
    paths = [
        "kept.json", "rewritten.json", "out/ok.json", "out/link.json", "out/pipe.json",
        "out/big.json", "out/locked.json", "out/missing.json", "out/etc/passwd",
    ]  # fmt: skip
    before = sandbox.fresh_file_stamps(ws, paths)
    assert before == {p: sandbox.output_file_stamp(ws, p, UID) for p in paths}
    assert before["kept.json"] is not None and before["out/ok.json"] is None
    res = sbx(
        "mkdir out && echo new > rewritten.json && echo '{\"ok\": 1}' > out/ok.json"
        " && ln -s /etc/shadow out/link.json && ln -s /etc out/etc && mkfifo out/pipe.json"
        " && head -c 5000 /dev/zero > out/big.json && echo x > out/locked.json"
        " && chmod 000 out/locked.json"
    )
    assert res.exit_code == 0, res.stderr
    back = sandbox.outputs_read_back(ws, paths, before, 4096, UID)
    for rel in paths:
        stamp, content = back[rel]
        assert stamp == sandbox.output_file_stamp(ws, rel, UID), rel
        if rel == "kept.json":
            assert stamp == before[rel] and content is None
            continue
        try:
            expected: bytes | type[OSError] = read_output_file(ws, rel, 4096, UID)
        except OSError as exc:
            expected = type(exc)
        if isinstance(expected, bytes):
            assert content == expected, rel
        else:
            assert type(content) is expected, rel
    assert back["rewritten.json"][1] == b"new\n" and back["out/ok.json"][1] == b'{"ok": 1}\n'
    assert isinstance(back["out/locked.json"][1], OutputFileRefused)
    assert "permission denied" in str(back["out/locked.json"][1])  # read as the uid
    assert isinstance(back["out/missing.json"][1], FileNotFoundError)


def test_read_output_file_refuses_links_fifos_and_reads_as_the_uid(
    sbx: Runner, ws: Path, area: Path
) -> None:
    """S-22/S-24: planted symlinks and FIFOs are refused without blocking; reads run as the uid."""
    host_secret = area / "host-secret.txt"
    host_secret.write_text("HOST SECRET")
    res = sbx(
        f"mkdir out && ln -s /etc/shadow out/answers.json && ln -s {host_secret} out/secret.json"
        " && ln -s /etc out/etc && mkfifo out/pipe.json && echo '{\"ok\": 1}' > out/ok.json"
        " && head -c 5000 /dev/zero > out/big.json && echo locked > out/locked.json"
        " && chmod 000 out/locked.json"
    )
    assert res.exit_code == 0, res.stderr
    for rel in ("out/answers.json", "out/secret.json", "out/etc/passwd", "out/pipe.json", "out"):
        start = time.monotonic()
        with pytest.raises(OutputFileRefused):
            read_output_file(ws, rel, 4096, UID)
        assert time.monotonic() - start < 2, rel
    assert read_output_file(ws, "out/ok.json", 4096, UID) == b'{"ok": 1}\n'
    assert read_output_file(ws, "./out/ok.json", 4096, UID) == b'{"ok": 1}\n'
    with pytest.raises(OutputFileRefused, match="larger than"):
        read_output_file(ws, "out/big.json", 4096, UID)
    assert read_output_file(ws, "out/big.json", 4096, UID, truncate=True) == b"\0" * 4096
    # Root could read a 0000 file; the sandbox uid cannot: proof the read ran as the uid.
    with pytest.raises(OutputFileRefused, match="permission denied"):
        read_output_file(ws, "out/locked.json", 4096, UID)
    with pytest.raises(FileNotFoundError):
        read_output_file(ws, "out/missing.json", 4096, UID)
    for bad in ("../x", "/etc/passwd", "out/../../x", ""):
        with pytest.raises(ValueError):
            read_output_file(ws, bad, 4096, UID)
    assert host_secret.read_text() == "HOST SECRET"


# --------------------------------------------------------------------------- audit hook


def test_audit_hook_records_connect_open_and_spawn_with_caller(sbx: Runner) -> None:
    """Evidence for replay.no_network_attempts / recordings_used, with the candidate's file:line."""
    res = sbx(["python3", "probe.py"], audit_watch=["cassettes"])
    assert res.exit_code == 0, res.stderr
    assert b"SHADOWED" not in res.stdout  # the candidate's sitecustomize.py did not replace ours
    by_event: dict[str, list[dict]] = {}
    for event in res.audit_events:
        by_event.setdefault(event["event"], []).append(event)
    connect = by_event["socket.connect"][0]
    assert connect["address"] == ["127.0.0.1", 9]
    assert connect["caller"] == f"probe.py:{_line_of('CONNECT')}"
    assert by_event["socket.getaddrinfo"][0]["host"] == "127.0.0.1"
    opened = [e for e in by_event["open"] if e["path"] == "cassettes/a.yaml"]
    assert (
        opened
        and opened[0]["mode"] == "r"
        and opened[0]["caller"] == f"probe.py:{_line_of('OPEN')}"
    )
    assert by_event["subprocess.Popen"][0]["argv"] == ["true", "a", "b", "c"]


def test_the_audit_hook_is_loaded_from_its_checked_bytecode(sbx: Runner) -> None:
    """Every Python process imports the hook: from the bytecode mounted beside it (checked
    against the source), not compiled anew each time; and it still records."""
    res = sbx(py("import sitecustomize; print(sitecustomize.__file__)"), audit_watch=["x"])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == b"/opt/cr-hooks/sitecustomize.py"
    res = sbx(["python3", "-v", "-c", "open('x/y', 'a')"], audit_watch=["x"])
    loaded = [line for line in res.stderr.decode().splitlines() if "sitecustomize" in line]
    assert any("code object from '/opt/cr-hooks/__pycache__/sitecustomize." in s for s in loaded)
    assert [e["path"] for e in res.audit_events if e["event"] == "open"] == ["x/y"]


def test_audit_log_cannot_be_removed_or_replaced_by_the_candidate(sbx: Runner) -> None:
    """The log folder is root-owned: no delete, rename, symlink or FIFO; lines are still recorded."""
    res = sbx(
        "rm -f /run/cr-audit/audit.jsonl; mv /run/cr-audit/audit.jsonl /run/cr-audit/x;"
        " ln -s /etc/hostname /run/cr-audit/evil; mkfifo /run/cr-audit/fifo;"
        " python3 -c 'import socket; socket.socket().connect_ex((\"127.0.0.1\", 9))'",
    )
    assert res.stderr.count(b"Permission denied") >= 3
    assert [e["event"] for e in res.audit_events] == ["socket.connect"]


# --------------------------------------------------------------------------- self-check and failures


def test_self_check_passes_on_this_host(runtime: Path, sandbox_users: None) -> None:
    """The worker's start-up check (with a real probe run) finds nothing wrong here."""
    assert sandbox.self_check(runtime=runtime, slots=[SLOT]) == []


def test_self_check_names_a_missing_bwrap_and_run_refuses(ws: Path, runtime: Path) -> None:
    """S-26: no bwrap means a clear cause, and no unsandboxed fallback."""
    bad = "/nonexistent/bwrap"
    problems = sandbox.self_check(bwrap=bad, runtime=runtime, slots=[SLOT])
    assert problems == [f"bubblewrap not found at {bad} (apt-get install bubblewrap)"]
    with pytest.raises(SandboxUnavailable) as info:
        sandbox.ensure_ready(bwrap=bad, runtime=runtime, slots=[SLOT])
    assert "bubblewrap not found" in info.value.cause
    with pytest.raises(SandboxUnavailable, match="bubblewrap not found"):
        sandbox.run(
            ["touch", "ran"], workspace=ws, limits=FAST, slot=SLOT, runtime=runtime, bwrap=bad
        )
    assert not (ws / "ran").exists()


def test_self_check_names_a_missing_uid(runtime: Path) -> None:
    """S-26: a missing sandbox user is named with the fix."""
    base = next(b for b in range(61000, 64000, 10) if not any(_uid_exists(b + i) for i in range(8)))
    problems = sandbox.self_check(runtime=runtime, slots=[0], uid_base=base)
    assert problems == [f"sandbox uid {base} is missing: run scripts/sandbox-setup.sh --users-only"]


def test_self_check_names_a_missing_runtime() -> None:
    """S-26: a runtime that was never built is named with the fix."""
    problems = sandbox.self_check(runtime=Path("/nonexistent/runtime"), slots=[SLOT])
    assert problems == ["sandbox runtime missing at /nonexistent/runtime: run make sandbox-runtime"]


def test_bwrap_setup_failure_is_an_error_not_a_failed_run(ws: Path, area: Path) -> None:
    """S-27: bwrap cannot bind a source the uid cannot read: SandboxUnavailable, never a result."""
    # bwrap looks the source up as the uid: a 0700 root parent makes that fail.
    private = Path(tempfile.mkdtemp(prefix="private-", dir=area)) / "runtime"
    (private / "bin").mkdir(parents=True)
    (private / "bin" / "python3").symlink_to("/usr/bin/python3")
    with pytest.raises(
        SandboxUnavailable, match="sandbox failed to start: bwrap: Can't find source path"
    ):
        sandbox.run(["true"], workspace=ws, limits=FAST, slot=SLOT, runtime=private)


def test_unsandboxed_only_with_the_loud_dev_setting(ws: Path) -> None:
    """allow_unsandboxed runs without bwrap and says so in the result."""
    res = sandbox.run(
        ["sh", "-c", "echo ran; pwd"],
        workspace=ws,
        limits=FAST,
        slot=SLOT,
        bwrap="/nonexistent/bwrap",
        allow_unsandboxed=True,
    )
    assert res.sandboxed is False and res.layers["sandboxed"] is False
    assert "bubblewrap not found" in res.layers["unavailable_because"]
    assert res.stdout == f"ran\n{ws}\n".encode()


# --------------------------------------------------------------------------- workspaces


def test_prepare_workspace_copies_as_the_uid_and_refuses_links(area: Path, src: Path) -> None:
    """The copy is owned by the uid with tame modes; a symlink or FIFO in the source is refused."""
    (src / "main.py").chmod(0o4755)  # setuid bit must not survive
    path = prepare_workspace(src, area, UID)
    try:
        entries = [path, *path.rglob("*")]
        assert {os.lstat(p).st_uid for p in entries} == {UID}
        assert stat.S_IMODE(os.lstat(path / "main.py").st_mode) == 0o755
        assert stat.S_IMODE(os.lstat(path / "tests" / "test_ok.py").st_mode) == 0o644
        assert (path / "cassettes" / "a.yaml").read_text() == SUBMISSION["cassettes/a.yaml"]
    finally:
        remove_workspace(path)
    before = set(area.iterdir())
    (src / "tests" / "link").symlink_to("/etc/passwd")
    with pytest.raises(WorkspaceError, match="refusing symlink in submission source: tests/link"):
        prepare_workspace(src, area, UID)
    (src / "tests" / "link").unlink()
    os.mkfifo(src / "fifo")
    with pytest.raises(WorkspaceError, match="refusing special file"):
        prepare_workspace(src, area, UID)
    assert set(area.iterdir()) == before  # the half-made copy was removed


def test_remove_workspace_survives_hostile_trees_without_touching_the_host(
    sbx: Runner, ws: Path, area: Path
) -> None:
    """S-23: 0000 dirs, deep nesting, links to host files and dirs, FIFOs: removed, host intact."""
    keep = area / "keep"
    keep.mkdir(exist_ok=True)
    (keep / "precious.txt").write_text("PRECIOUS")
    keep.chmod(0o755)
    res = sbx(
        f"ln -s {keep} hostdir && ln -s {keep / 'precious.txt'} hostfile && mkfifo fifo"
        " && mkdir -p locked/inner && touch locked/inner/f && chmod 000 locked/inner locked"
        ' && python3 -c \'import os\nfor _ in range(300):\n os.mkdir("d")\n os.chdir("d")\''
        " && chmod 000 ."
    )
    assert res.exit_code == 0, res.stderr
    remove_workspace(ws)
    assert not ws.exists()
    assert (keep / "precious.txt").read_text() == "PRECIOUS"
    remove_workspace(ws)  # idempotent


def test_quota_workspace_bounds_what_the_candidate_writes(
    sbx: Runner, src: Path, area: Path
) -> None:
    """A tmpfs workspace caps bytes written to /work (host disk untouched); removal unmounts it."""
    path = prepare_workspace(src, area, UID, quota_bytes=8 * 2**20)
    try:
        assert os.path.ismount(path)
        got = inside(
            sbx,
            """
            import json
            written = 0
            try:
                with open("/work/fill", "wb", buffering=0) as fh:
                    while written < 2**26:
                        written += fh.write(b"\\0" * 2**16)
            except OSError as exc:
                print(json.dumps({"err": exc.errno, "written": written}))
            """,
            workspace=path,
        )
        assert got["err"] == errno.ENOSPC and got["written"] <= 8 * 2**20
    finally:
        remove_workspace(path)
    assert not path.exists()


# --------------------------------------------------------------------------- the runtime


def test_the_runtime_runs_pytest_offline(sbx: Runner, runtime: Path) -> None:
    """The pinned runtime runs a candidate's pytest suite, with a safe vcrpy."""
    if runtime == SYSTEM_RUNTIME:
        pytest.skip("sandbox runtime not built here: run `make sandbox-runtime`")
    res = sbx(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
    assert res.exit_code == 0 and b"1 passed" in res.stdout, res.stdout + res.stderr
    got = inside(
        sbx,
        """
        import json, vcr, yaml, httpx, fastapi, openai, anthropic
        print(json.dumps({"vcr": vcr.__version__}))
        """,
    )
    assert tuple(int(x) for x in got["vcr"].split(".")[:3]) >= (8, 2, 1)
