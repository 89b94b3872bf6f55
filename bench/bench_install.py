"""Installing a hand-in's dependencies: the same 20-package lock, cold and warm.

Baseline, in the same run: `uv pip install -r lock` into a fresh venv of the sandbox's
interpreter with an empty uv cache (bare uv: resolve, download, install in one go). Ours:
`submissions.deps.prepare.dependencies()` on a hand-in holding that lock (a `uv.lock`), cold (empty
resolution, wheel and environment caches: resolve with uv, fetch the wheels by hash,
install in the sandbox with the network off) and warm (a second hand-in with the same lock).
Targets: cold ≤ 1.5 × bare uv; warm < 1 s and < 0.2 × cold (medians). Needs the package
index and the sandbox.

    .venv/bin/python bench/bench_install.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402

# Every package pinned, transitive ones too: 20 packages, each with a cp311 or pure wheel.
LOCK = """\
attrs==24.2.0
certifi==2024.8.30
charset-normalizer==3.4.0
click==8.1.7
idna==3.10
jinja2==3.1.4
markdown-it-py==3.0.0
markupsafe==3.0.2
mdurl==0.1.2
orjson==3.10.11
pygments==2.18.0
python-dateutil==2.9.0.post0
requests==2.32.3
rich==13.9.4
six==1.16.0
structlog==24.4.0
tabulate==0.9.0
tenacity==9.0.0
toolz==1.0.0
urllib3==2.2.3
"""


def _bare_uv(uv: str, python: str, index: str, work: Path) -> float:
    """Seconds for a fresh venv plus `uv pip install` of the lock, empty cache."""
    venv, cache = work / "venv", work / "uv-cache"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    (work / "lock.txt").write_text(LOCK)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "SSL_CERT_FILE")}
    env["UV_NO_PROGRESS"] = "1"
    started = time.perf_counter()
    for argv in (
        [uv, "venv", "--python", python, "--no-config", "-q", str(venv)],
        [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "-r",
         str(work / "lock.txt"), "--index-url", index, "--cache-dir", str(cache),
         "--no-config", "-q", "--only-binary", ":all:"],
    ):  # fmt: skip
        subprocess.run(argv, check=True, env=env)
    return time.perf_counter() - started


def _handin(uv: str, python: str, index: str, work: Path) -> Path:
    """A hand-in locked by `uv lock` (not timed): a pyproject on the 20 pins and its uv.lock."""
    tree = work / "handin"
    tree.mkdir()
    deps = ", ".join(f'"{line}"' for line in LOCK.split())
    (tree / "pyproject.toml").write_text(
        f'[project]\nname = "handin"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        f"dependencies = [{deps}]\n"
    )
    subprocess.run(
        [uv, "lock", "-q", "--no-config", "--index-url", index, "--python", python,
         "--cache-dir", str(work / "lock-cache")],
        cwd=tree, check=True,
    )  # fmt: skip
    shutil.rmtree(work / "lock-cache")
    return tree


def _ours(tree: Path) -> tuple[float, str, bool]:
    from submissions.deps.prepare import dependencies
    from submissions.sandbox.slots import sandbox_slot

    started = time.perf_counter()
    with sandbox_slot() as slot, dependencies(tree, slot, lambda _: None) as prepared:
        seconds = time.perf_counter() - started
        if prepared.env is None:
            raise SystemExit(f"install failed: {prepared.stage}: {prepared.cause}")
        return seconds, prepared.state, prepared.env.cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        work = Path(tmp)
        os.environ["DATA_DIR"] = str(work / "data")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
        import django

        django.setup()
        from django.conf import settings

        from submissions.sandbox.slots import sandbox_problems
        from submissions.sandbox.types import runtime_python

        problems = sandbox_problems()
        if problems:
            print("sandbox unavailable: " + "; ".join(problems), file=sys.stderr)
            return 2
        uv = str(Path(sys.executable).with_name("uv"))
        python = runtime_python(Path(settings.SANDBOX_RUNTIME))
        tree = _handin(uv, python, settings.PACKAGE_INDEX_URL, work)
        deps_root = Path("/var/tmp") / f"cr-bench-install-{os.getpid()}"
        bare, cold, warm = [], [], []
        try:
            for run in range(args.runs):
                bare.append(_bare_uv(uv, python, settings.PACKAGE_INDEX_URL, work))
                # Cold: every cache of ours empty (resolutions, wheels, environments).
                settings.DEPS_DIR = deps_root / f"run-{run}"
                settings.DEPS_CACHE_DIR = work / f"deps-cache-{run}"
                settings.DEPS_DIR.mkdir(parents=True, mode=0o711)
                deps_root.chmod(0o711)
                seconds, _, cached = _ours(tree)
                assert not cached
                cold.append(seconds)
                for _ in range(3):
                    seconds, _, cached = _ours(tree)
                    assert cached
                    warm.append(seconds)
        finally:
            shutil.rmtree(deps_root, ignore_errors=True)
    b, c, w = statistics.median(bare), statistics.median(cold), statistics.median(warm)
    print(f"bare uv {b:.2f} s, ours cold {c:.2f} s, ours warm {w * 1000:.0f} ms (medians)")
    ok_cold = c <= 1.5 * b
    ok_warm = w < 1.0 and w < 0.2 * c
    code = emit(Row("install 20 pinned packages, cold", f"{c:.2f} s", f"{b:.2f} s (bare uv)",
                    f"{c / b:.2f}x", "<= 1.5x", ok_cold))  # fmt: skip
    code |= emit(Row("install 20 pinned packages, warm", f"{w * 1000:.0f} ms",
                     f"{c:.2f} s (ours cold)", f"{w / c:.3f}x", "< 1 s and < 0.2x cold",
                     ok_warm))  # fmt: skip
    return code


if __name__ == "__main__":
    raise SystemExit(main())
