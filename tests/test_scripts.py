"""The shell scripts `make run` calls, run for real in a scratch copy of the project."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT


@pytest.fixture
def scratch() -> Iterator[Path]:
    """scripts/ copied where any user can read it, with no .venv (the check then fails)."""
    root = Path(tempfile.mkdtemp(prefix="cr-scripts-"))
    root.chmod(0o755)
    shutil.copytree(ROOT / "scripts", root / "scripts")
    yield root
    shutil.rmtree(root)


def _run(scratch: Path, *, as_nobody: bool = False, **env: str) -> subprocess.CompletedProcess:
    argv = [str(scratch / "scripts" / "sandbox-ensure.sh")]
    if as_nobody:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    base = {"PATH": "/usr/bin:/bin", "SANDBOX_RUNTIME": "/nonexistent/runtime"}
    return subprocess.run(
        argv, env={**base, **env}, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_without_root_make_run_says_the_one_command_and_goes_on(scratch: Path) -> None:
    done = _run(scratch, as_nobody=True)
    assert done.returncode == 0
    assert "sudo make sandbox-runtime" in done.stdout
    assert "static checks" in done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the set-up branch is the root one")
def test_as_root_make_run_sets_the_sandbox_up_first(scratch: Path) -> None:
    stub = scratch / "setup-stub.sh"
    stub.write_text('#!/bin/sh\necho "setup called with $1"\n')
    stub.chmod(0o755)
    done = _run(scratch, CR_SANDBOX_SETUP=str(stub))
    assert done.returncode == 0
    assert "setup called with /nonexistent/runtime" in done.stdout
    assert "sudo make" not in done.stdout
