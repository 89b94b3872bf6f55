"""Run a demo repo's real `shop_stub.py` as a subprocess on loopback, state in a temp dir."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

REPOS = Path(__file__).resolve().parents[2] / "demo" / "repos"
_BANNER = re.compile(r"shop stub on (http://\S+)")


class DemoStub:
    """`python shop_stub.py` from a temp copy; restart() keeps or drops its state file."""

    def __init__(self, repo: str, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        # A copy, so the stub's state files never land in the repository.
        shutil.copy2(REPOS / repo / "shop_stub.py", workdir / "shop_stub.py")
        self.state = workdir / "stub_state.json"
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 10.0) -> DemoStub:
        """Start the stub on an ephemeral port and wait for its banner line."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOST": "127.0.0.1",
            "PORT": "0",
            "STUB_STATE": str(self.state),
            "STUB_QUIET": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "shop_stub.py"],
            cwd=self.workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(timeout)
        match = _BANNER.search(line[0]) if line else None
        if not match:
            self.stop()
            raise RuntimeError(f"demo stub did not start: {line!r}")
        self.url = match.group(1)
        return self

    def stop(self) -> None:
        """Stop this stub process (by its own handle, nothing else)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def restart(self, *, keep_state: bool) -> DemoStub:
        """Stop and start again; without keep_state the stub comes back with no memory."""
        self.stop()
        if not keep_state:
            self.state.unlink(missing_ok=True)
        return self.start()
