"""Resolve what a hand-in declares into pinned wheels for the sandbox's interpreter.

Host side, network to the package index only, and no candidate code: `uv pip compile` with
`--only-binary :all:` never builds a source distribution, reads metadata from wheels, and
is told the sandbox's Python version and platform (the sandbox runs the host's /usr).
Requirements reach uv on its standard input, never as arguments, and only after
`declared.py` accepted each as a name from the index.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from submissions.deps.declared import Declared

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")
_ERROR_CHARS = 2000


class ResolveFailed(RuntimeError):
    """The declared set could not be resolved; the message carries the index's answer."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...]


@dataclass
class Resolved:
    """The resolved set: every package pinned, with the hashes of its allowed wheels."""

    pins: list[Pin] = field(default_factory=list)
    text: str = ""  # uv's output, a hash-pinned requirements file
    seconds: float = 0.0

    @property
    def key(self) -> str:
        """Content address of the resolved set (environments are cached by it)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    def summary(self) -> str:
        return ", ".join(f"{p.name}=={p.version}" for p in self.pins)


def sandbox_platform() -> str:
    """uv's name for this machine's platform, as the sandbox (host /usr) sees it."""
    machine = platform.machine() or "x86_64"
    libc, version = platform.libc_ver()
    if libc == "glibc" and re.fullmatch(r"\d+\.\d+", version or ""):
        major, minor = version.split(".")
        return f"{machine}-manylinux_{major}_{minor}"
    return f"{machine}-unknown-linux-gnu"


def _uv() -> str:
    """The pinned uv beside this interpreter (requirements.txt), else one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else "uv"


def parse_compiled(text: str) -> list[Pin]:
    """The pins of a `uv pip compile --generate-hashes` output."""
    pins: list[Pin] = []
    name = version = None
    hashes: list[str] = []
    for line in text.splitlines():
        if match := _PIN.match(line):
            if name:
                pins.append(Pin(name, version or "", tuple(hashes)))
            name, version, hashes = match.group(1), match.group(2), []
        hashes += _HASH.findall(line)
    if name:
        pins.append(Pin(name, version or "", tuple(hashes)))
    return pins


def resolve(
    declared: Declared,
    *,
    index_url: str,
    cache_dir: Path,
    python_version: str = f"{sys.version_info.major}.{sys.version_info.minor}",
    python_platform: str | None = None,
    timeout: float = 120.0,
) -> Resolved:
    """Pin the declared requirements to wheels from `index_url`; ResolveFailed says why not."""
    if not declared.requirements:
        return Resolved()
    cache_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        _uv(),
        "pip",
        "compile",
        "-",
        "--only-binary",
        ":all:",
        "--python-version",
        python_version,
        "--python-platform",
        python_platform or sandbox_platform(),
        "--generate-hashes",
        "--no-header",
        "--no-annotate",
        "--index-url",
        index_url,
        "--cache-dir",
        str(cache_dir),
        "--no-config",
        "--quiet",
    ]
    # No credentials or proxy settings of ours reach uv; the index URL is the one setting.
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "SSL_CERT_FILE", "LANG")}
    env["UV_NO_PROGRESS"] = "1"
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            input="\n".join(declared.requirements) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ResolveFailed(f"resolving took longer than {timeout:g} s ({index_url})") from None
    except OSError as exc:
        raise ResolveFailed(f"uv could not start: {exc}") from None
    if done.returncode != 0:
        answer = (done.stderr or done.stdout).strip()[-_ERROR_CHARS:]
        raise ResolveFailed(answer or f"uv exited {done.returncode}")
    return Resolved(parse_compiled(done.stdout), done.stdout, time.monotonic() - started)
