"""A hand-in's own dependencies, ready for its sandboxed runs: read, resolve, fetch, install.

    with dependencies(tree, slot, note) as prepared:
        slot = slot.with_site(prepared.site)    # None: the hand-in declares nothing
        if prepared.blocker: ...                # the suite cannot be judged; say why

Phase 1 (host, network to the index only, no candidate code): `declared.py` reads what the
hand-in declares, `resolve.py` pins it with uv for the sandbox's interpreter (cached by the
declaration), `fetch.py` brings the wheels into the shared cache. Phase 2 (sandbox, network
off): `envs.py` installs exactly those wheels, cached by the resolved set. What the
hand-in declares wins over the runtime's packages; what it does not declare (pytest, say)
still comes from the runtime.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from django.conf import settings
from packaging.markers import default_environment
from packaging.specifiers import SpecifierSet

from cassettes_app.checks import counted
from submissions.deps.declared import DeclarationError, Declared, declared_dependencies
from submissions.deps.envs import (
    EnvCache,
    Environment,
    InstallFailed,
    install_binds,
    install_command,
    install_failure,
    install_plan,
)
from submissions.deps.fetch import Fetched, FetchLimits, choose_wheel, fetch, sandbox_tags
from submissions.deps.lookup import NotJson, locked_pins, lookup
from submissions.deps.resolve import DepsFailed, Pin, Resolved, WheelRef, resolve
from submissions.sandbox.slots import Slot
from submissions.sandbox.types import SYSTEM_RUNTIME


@dataclass
class Prepared:
    """What happened to the hand-in's dependencies, for the check and the runs."""

    state: str = "none"  # none | installed | failed | error
    declared: Declared = field(default_factory=Declared)
    cause: str = ""  # the exact cause when failed or error
    stage: str = ""  # declare | resolve | fetch | install
    env: Environment | None = None
    resolved: Resolved | None = None
    fetched: list[Fetched] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    python: str = ""
    python_refused: str = ""  # requires-python not met and the setting says skip
    seconds: float = 0.0

    @property
    def site(self) -> Path | None:
        return self.env.site if self.env else None

    @property
    def blocker(self) -> str | None:
        """Why the suite cannot be judged in this environment, or None."""
        if self.state in ("failed", "error"):
            return f"dependencies could not be installed ({self.stage}: {self.cause})"
        return None


@functools.lru_cache(maxsize=8)
def sandbox_python(runtime: str) -> tuple[int, int, int]:
    """The sandbox interpreter's version: from the runtime venv's pyvenv.cfg, else asked."""
    cfg = Path(runtime) / "pyvenv.cfg"
    if Path(runtime) != SYSTEM_RUNTIME and cfg.is_file():
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):
                parts = value.strip().split(".")[:3]
                if len(parts) == 3 and all(p.isdigit() for p in parts):
                    return int(parts[0]), int(parts[1]), int(parts[2])
    done = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print(*sys.version_info[:3])"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    major, minor, micro = (int(x) for x in done.stdout.split())
    return major, minor, micro


def marker_environment(python: tuple[int, int, int]) -> dict[str, str]:
    """PEP 508 marker values inside the sandbox: this host's platform, the sandbox's Python."""
    env = {key: str(value) for key, value in default_environment().items()}
    env["python_full_version"] = ".".join(map(str, python))
    env["python_version"] = f"{python[0]}.{python[1]}"
    env["implementation_version"] = env["python_full_version"]
    return env


def env_cache() -> EnvCache:
    return EnvCache(Path(settings.DEPS_DIR), settings.DEPS_ENV_CACHE_BYTES)


def _fatal_refusals(declared: Declared) -> list[str]:
    return [
        f"{r.path}{f':{r.line}' if r.line else ''}: {r.message}"
        for r in declared.refused
        if not r.message.startswith("option ")
    ]


def _pins_json(resolved: Resolved) -> str:
    return json.dumps(
        [
            {
                "name": p.name,
                "version": p.version,
                "wheels": [dataclasses.asdict(w) for w in p.wheels],
            }
            for p in resolved.pins
        ]
    )


def _pins_from_json(text: str) -> list[Pin]:
    return [
        Pin(item["name"], item["version"], tuple(WheelRef(**w) for w in item["wheels"]))
        for item in json.loads(text)
    ]


def _resolve(declared: Declared, python: tuple[int, int, int]) -> Resolved:
    """A lock's pins looked up on the index's JSON pages; anything else resolved by uv."""
    pins = locked_pins(declared.requirements) if declared.locked else None
    if pins:
        try:
            return lookup(
                pins,
                index_url=settings.PACKAGE_INDEX_URL,
                timeout=settings.DEPS_RESOLVE_TIMEOUT_SECONDS,
                python=".".join(map(str, python)),
            )
        except NotJson:
            pass  # an index without PEP 691: uv reads its HTML pages
    return resolve(
        declared,
        index_url=settings.PACKAGE_INDEX_URL,
        cache_dir=Path(settings.DEPS_CACHE_DIR) / "uv",
        python_version=".".join(map(str, python)),
        timeout=settings.DEPS_RESOLVE_TIMEOUT_SECONDS,
        no_deps=declared.locked,  # a lock is already the whole set: look its pins up
    )


def resolve_cached(declared: Declared, python: tuple[int, int, int]) -> Resolved:
    """Resolve once per declaration, index and interpreter: a re-run sees the same pins."""
    version = f"{python[0]}.{python[1]}"
    ident = json.dumps(
        [sorted(declared.requirements), version, declared.locked, settings.PACKAGE_INDEX_URL],
        sort_keys=True,
    )
    name = hashlib.sha256(ident.encode()).hexdigest()
    path = Path(settings.DEPS_CACHE_DIR) / "resolutions" / f"{name}.json"
    try:
        pins = _pins_from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        pins = None
    if pins is not None:
        return Resolved(pins, 0.0, cached=True)
    resolved = _resolve(declared, python)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(_pins_json(resolved))
    os.replace(tmp, path)
    return resolved


def _check_python(prepared: Prepared, python: tuple[int, int, int]) -> None:
    wanted = prepared.declared.requires_python
    prepared.python = ".".join(map(str, python))
    if not wanted or SpecifierSet(wanted).contains(prepared.python, prereleases=True):
        return
    said = f"the hand-in requires Python {wanted}; the sandbox runs {prepared.python}"
    if settings.DEPS_PYTHON_MISMATCH == "skip":
        prepared.python_refused = said
    else:
        prepared.warnings.append(f"{said}: the run goes on")


def environment_key(resolved: Resolved, python: tuple[int, int, int], runtime: Path) -> str:
    """What an environment is cached by: the interpreter it was built for and the very wheels
    installed in it (a lock lists every platform's; the sandbox takes one of each)."""
    tags = sandbox_tags(python[:2])
    chosen = sorted(f"{p.name.lower()} {choose_wheel(p, tags).sha256}" for p in resolved.pins)
    ident = json.dumps([".".join(map(str, python)), str(runtime), chosen])
    return hashlib.sha256(ident.encode()).hexdigest()


def _install(
    slot: Slot, cache: EnvCache, key: str, fetched: list[Fetched], runtime: Path
) -> Environment:
    """Build the environment in the sandbox (network off) unless another job just did."""
    started = time.monotonic()
    with cache.building(key) as build:
        done = cache.lookup(key)
        if done is not None:
            return done
        (build / "rw").mkdir()
        os.chown(build / "rw", slot.uid, slot.uid)
        os.chmod(build, 0o711)  # noqa: S103 - the sandbox uid traverses it to its two folders
        wheels = install_plan(build, fetched)
        binds = install_binds(build, wheels, cache.uv_binary())
        with tempfile.TemporaryDirectory() as empty, slot.workspace(Path(empty)) as workspace:
            result = slot.with_site(None).run(
                install_command(runtime),
                workspace=workspace,
                binds=binds,
                env={"UV_NO_PROGRESS": "1", "UV_PYTHON_DOWNLOADS": "never"},
            )
        failure = install_failure(result)
        if failure:
            # Killed by a limit of ours (time, memory, file size): not the hand-in's fault.
            limited = bool(result.killed_reason or result.timed_out)
            raise InstallFailed(failure, infrastructure=limited)
        packages = [f"{f.pin.name}=={f.pin.version}" for f in fetched]
        env = cache.publish(key, build, packages)
    cache.evict(keep=key)
    return dataclasses.replace(env, seconds=time.monotonic() - started)


def _prepare(tree: Path, slot: Slot, note: Callable[[str], None], prepared: Prepared) -> None:
    """Fill `prepared` stage by stage; a stage that fails says so and the rest is not tried."""
    prepared.stage = "declare"
    runtime = Path(settings.SANDBOX_RUNTIME)
    python = sandbox_python(str(runtime))
    try:
        prepared.declared = declared_dependencies(tree, marker_environment(python))
    except DeclarationError as exc:
        prepared.state, prepared.cause = "failed", str(exc)
        return
    _check_python(prepared, python)
    refused = _fatal_refusals(prepared.declared)
    if refused:
        prepared.state = "failed"
        prepared.cause = "refused: " + "; ".join(refused[:5])
        return
    if not prepared.declared.requirements or prepared.python_refused:
        return
    prepared.stage = "resolve"
    note("resolving dependencies")
    prepared.resolved = resolve_cached(prepared.declared, python)
    prepared.stage = "fetch"
    limits = FetchLimits(
        settings.DEPS_MAX_DOWNLOAD_BYTES,
        settings.DEPS_MAX_UNPACKED_BYTES,
        settings.DEPS_RESOLVE_TIMEOUT_SECONDS,
    )
    cache = env_cache()
    key = environment_key(prepared.resolved, python, runtime)
    prepared.env = cache.lookup(key)
    if prepared.env is not None:
        note("dependencies: environment cached")
        prepared.state = "installed"
        return
    prepared.fetched = fetch(
        prepared.resolved, cache.wheels, python_version=python[:2], limits=limits, on_step=note
    )
    prepared.stage = "install"
    note(f"installing {counted(len(prepared.fetched), 'package')}")
    prepared.env = _install(slot, cache, key, prepared.fetched, runtime)
    prepared.state = "installed"


@contextlib.contextmanager
def dependencies(tree: Path, slot: Slot, note: Callable[[str], None]) -> Iterator[Prepared]:
    """Prepare the hand-in's dependencies and hold their environment while the block runs.

    Never raises for the hand-in's own faults or the index's: `state` and `cause` say what
    happened (the sandbox being unavailable still raises SandboxUnavailable).
    """
    started = time.monotonic()
    prepared = Prepared()
    try:
        _prepare(Path(tree), slot, note, prepared)
    except DepsFailed as exc:
        prepared.state = "error" if exc.infrastructure else "failed"
        prepared.cause, prepared.env = str(exc), None
    except (httpx.HTTPError, OSError) as exc:
        prepared.state, prepared.cause, prepared.env = "error", f"{type(exc).__name__}: {exc}", None
    prepared.seconds = time.monotonic() - started
    if prepared.env is None:
        yield prepared
        return
    with env_cache().held(prepared.env.key):
        if not prepared.env.site.is_dir():  # evicted between lookup and hold: build again
            prepared.env = None
            prepared.state = "error"
            prepared.cause = "the cached environment was evicted meanwhile; run again"
        yield prepared
