"""Several "hosts" on one machine: process groups with their own data folders and names.

Each host is a folder under one root (`<root>/<name>`) holding its DATA_DIR (`data`) and
WORK_DIR (`work`), and every process started for it gets HOST_NAME=<name>, those folders and
the shared settings (database, broker, storage), in a session of its own so that killing a
host (`kill`) is one SIGKILL to its process groups. Used by tests/slow/test_hosts.py and by
the benchmarks that run the same layout (bench/bench_hosts.py, bench/bench_host_disk.py).
Plain Python: no pytest here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The moto server takes any credentials; these are what the hosts are given.
S3_KEYS = {"S3_ACCESS_KEY_ID": "test-key-id", "S3_SECRET_ACCESS_KEY": "test-secret"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def s3_server(log_dir: Path) -> Iterator[str]:
    """A moto S3 server in its own process on a free loopback port; its URL, then stopped."""
    port = free_port()
    with (log_dir / "moto.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start: see {log.name}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def s3_bucket(url: str, bucket: str) -> dict[str, str]:
    """Create `bucket` on the server at `url`; the S3_* settings a host needs to use it."""
    import boto3

    boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1",
        aws_access_key_id=S3_KEYS["S3_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_KEYS["S3_SECRET_ACCESS_KEY"],
    ).create_bucket(Bucket=bucket)  # fmt: skip
    return {
        "STORAGE_BACKEND": "s3", "S3_BUCKET": bucket, "S3_ENDPOINT_URL": url,
        "S3_REGION": "us-east-1", "S3_ADDRESSING_STYLE": "path", **S3_KEYS,
    }  # fmt: skip


def worker_argv(queue: str, *, concurrency: int = 1) -> list[str]:
    """A prefork worker as the README's scale-out command runs it (no -B: one beat elsewhere),
    with no gossip, mingle or broker heartbeat (the tests' hosts need none)."""
    return [
        "celery", "-A", "reviewer", "worker", "--pool", "prefork",
        "--concurrency", str(concurrency), "-l", "info", "-Q", queue,
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip


class Hosts:
    """Start and stop processes as named hosts sharing only what `shared` names.

    `data_env` is the variable that sets a host's DATA_DIR: `DATA_DIR` for the real settings,
    `CR_TEST_DATA_DIR` for tests.settings (which reads it before anything else).
    """

    def __init__(self, root: Path, shared: dict[str, str], *, data_env: str = "DATA_DIR") -> None:
        self.root = root
        self.shared = dict(shared)
        self.data_env = data_env
        self.procs: dict[str, list[subprocess.Popen[str]]] = {}
        self.logs: list[Path] = []

    def home(self, name: str) -> Path:
        return self.root / name

    def env(self, name: str, **extra: str) -> dict[str, str]:
        """The environment of a process of host `name`."""
        home = self.home(name)
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
        env.update(self.shared)
        env.update(
            {"HOST_NAME": name, self.data_env: str(home / "data"), "WORK_DIR": str(home / "work")}
        )
        env.update(extra)
        return env

    def start(self, name: str, argv: list[str], **extra: str) -> subprocess.Popen[str]:
        """Run `python -m <argv>` from the repository as a process of host `name`."""
        home = self.home(name)
        home.mkdir(parents=True, exist_ok=True)
        log_path = home / f"{argv[0]}-{len(self.logs)}.log"
        self.logs.append(log_path)
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", *argv], cwd=ROOT, env=self.env(name, **extra),
                stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            )  # fmt: skip
        self.procs.setdefault(name, []).append(proc)
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL every process group of host `name`: the host dies as a machine would."""
        for proc in self.procs.pop(name, []):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def alive(self) -> bool:
        """True while every process started is still running."""
        return all(proc.poll() is None for procs in self.procs.values() for proc in procs)

    def tail(self, chars: int = 2500) -> str:
        """The end of every process's log, for a failure message."""
        return "\n".join(f"== {path}\n" + path.read_text()[-chars:] for path in self.logs)
