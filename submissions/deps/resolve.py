"""Resolve what a hand-in declares into pinned wheels for the sandbox's interpreter.

Host side, network to the package index only, and no candidate code: `uv pip compile` with
`--only-binary :all:` never builds a source distribution, reads metadata from wheels, and
is told the sandbox's Python version and platform (the sandbox runs the host's /usr).
Requirements reach uv on its standard input, never as arguments, and only after
`declared.py` accepted each as a name from the index.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from submissions.deps.declared import Declared

_ERROR_CHARS = 2000


class DepsFailed(RuntimeError):
    """A stage of the install failed. `infrastructure`: the index, the network or our own
    limits were at fault, not the hand-in (the check says error, not fail)."""

    def __init__(self, message: str, *, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.infrastructure = infrastructure


class ResolveFailed(DepsFailed):
    """The declared set could not be resolved; the message carries the index's answer."""


# uv's own words for a failure on the way to the index. Phrases of several words: a
# package's name (which the hand-in chooses) cannot contain a space.
_INFRA_PHRASES = (
    "failed to fetch",
    "error sending request",
    "tcp connect error",
    "dns error",
    "operation timed out",
    "connection refused",
    "request failed after",
    "connection reset",
    "too many requests",
    "internal server error",
    "bad gateway",
    "service unavailable",
    "gateway timeout",
)


def infrastructure_answer(text: str) -> bool:
    """Whether uv's answer says the index could not be reached or answered 5xx/429."""
    lowered = text.lower()
    return any(phrase in lowered for phrase in _INFRA_PHRASES)


@dataclass(frozen=True)
class WheelRef:
    """One wheel the index offers for a pin: where, how big, its sha256."""

    filename: str
    url: str
    size: int | None
    sha256: str


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    wheels: tuple[WheelRef, ...] = ()

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(f"sha256:{w.sha256}" for w in self.wheels)


@dataclass
class Resolved:
    """The resolved set: every package pinned, with the wheels the index offers for it."""

    pins: list[Pin] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False  # read from the resolution cache, not from the index


_SHA256 = re.compile(r"[0-9a-f]{64}")


def parse_pylock(text: str) -> list[Pin]:
    """The pins of a pylock.toml that `uv pip compile` wrote; ResolveFailed on anything odd."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ResolveFailed(f"uv wrote an unreadable lock: {exc}") from None
    pins: list[Pin] = []
    for package in data.get("packages") or []:
        name, version = package.get("name"), package.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            raise ResolveFailed(f"uv's lock has a package without name and version: {package!r}")
        wheels = []
        for wheel in package.get("wheels") or []:
            url = wheel.get("url") or ""
            sha = (wheel.get("hashes") or {}).get("sha256") or ""
            filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
            if not _SHA256.fullmatch(sha) or not filename.endswith(".whl"):
                continue
            size = wheel.get("size")
            wheels.append(WheelRef(filename, url, size if isinstance(size, int) else None, sha))
        pins.append(Pin(name, version, tuple(wheels)))
    return pins


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


def resolve(
    declared: Declared,
    *,
    index_url: str,
    cache_dir: Path,
    python_version: str = f"{sys.version_info.major}.{sys.version_info.minor}",
    python_platform: str | None = None,
    timeout: float = 120.0,
    no_deps: bool = False,
) -> Resolved:
    """Pin the declared requirements to wheels from `index_url`; ResolveFailed says why not.

    A lock's pins are requirements `name==version` here, so the candidate's pins win; with
    `no_deps` (a lock, which is already the whole set) they are only looked up, not resolved.
    """
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
        "--format",
        "pylock.toml",
        "--no-header",
        "--index-url",
        index_url,
        "--cache-dir",
        str(cache_dir),
        "--no-config",
        "--quiet",
        *(["--no-deps"] if no_deps else []),
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
        raise ResolveFailed(
            f"resolving took longer than {timeout:g} s ({index_url})", infrastructure=True
        ) from None
    except OSError as exc:
        raise ResolveFailed(f"uv could not start: {exc}", infrastructure=True) from None
    if done.returncode != 0:
        answer = (done.stderr or done.stdout).strip()[-_ERROR_CHARS:]
        answer = answer or f"uv exited {done.returncode}"
        raise ResolveFailed(answer, infrastructure=infrastructure_answer(answer))
    return Resolved(parse_pylock(done.stdout), time.monotonic() - started)
