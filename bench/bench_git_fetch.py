"""Fetch a ~20 MB repository from git's own smart-HTTP server on loopback, against
`git clone --depth 1` of the same URL in the same run.

The repository is built here with git: many files in folders (base64 text that compresses
as source and recordings do) and some history (commits that rewrite a share of the files),
packed by `git gc`, served bare by `git http-backend` behind a loopback WSGI server (the one
the tests use). Both sides fetch through the same server, in turns, three times each; the
medians are compared.

Ours: `fetch_bundle` (dulwich's smart-HTTP client through the outbound guard, the pack
held under its byte cap and written as a bundle) and the pack guard (`scan_pack`: every
entry measured before anything is inflated), which is what intake does before the tree.
It fetches the ref's whole history (provenance reads it); the baseline fetches one commit
and checks it out.

    .venv/bin/python bench/bench_git_fetch.py [--mb 20] [--profile DIR]

Target: ours <= 1.5x `git clone --depth 1`.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")

import django  # noqa: E402

django.setup()

from bench.common import Row, emit  # noqa: E402
from submissions.intake.git.fetch import fetch_bundle  # noqa: E402
from submissions.intake.git.objects import _header, read_bundle  # noqa: E402
from submissions.intake.git.pack import GitLimits, scan_pack  # noqa: E402
from tests.git_factories import git, serve_git_http  # noqa: E402

TARGET = 1.5
RUNS = 3
FILE_BYTES = 12_000


def build(root: Path, megabytes: float, seed: int = 11) -> tuple[Path, int]:
    """A bare repository of about `megabytes` of pack under `root`; returns it and its
    pack size. Files of base64 text in 30 folders; then 10 commits each rewriting 2% of
    the files (history the fetch carries)."""
    rng = random.Random(seed)
    work = root / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    # base64 of random bytes packs to about 3/4 of its size
    count = int(megabytes * 2**20 / (FILE_BYTES * 0.76 * 1.2))
    names = [f"pkg{i % 30:02d}/mod_{i:05d}.py" for i in range(count)]

    def text() -> str:
        raw = base64.b64encode(rng.randbytes(FILE_BYTES * 3 // 4)).decode()
        return "\n".join(raw[i : i + 76] for i in range(0, len(raw), 76)) + "\n"

    for name in names:
        path = work / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text())
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "start")
    for n in range(10):
        for name in rng.sample(names, max(1, count // 50)):
            (work / name).write_text(text())
        git(work, "commit", "-q", "-am", f"change {n}")
    served = root / "served"
    served.mkdir()
    git(root, "clone", "-q", "--bare", str(work), str(served / "r.git"))
    git(served / "r.git", "gc", "-q")
    pack = sum(p.stat().st_size for p in (served / "r.git" / "objects" / "pack").glob("*.pack"))
    return served, pack


LIMITS = GitLimits(max_pack_bytes=500 * 2**20, max_inflated_bytes=2 * 2**30)


def ours(url: str, scratch: Path, *, inflate: bool = False) -> float:
    """Fetch and guard; with `inflate`, also read every object of the history (what the
    bundle path does next, for information)."""
    dest = scratch / "r.bundle"
    started = time.perf_counter()
    fetch_bundle(url, dest, ref="main", allow=["127.0.0.0/8"], limits=LIMITS)
    data = dest.read_bytes()
    if inflate:
        read_bundle(data, LIMITS)
    else:
        _, start = _header(data)
        scan_pack(data[start:], LIMITS)
    took = time.perf_counter() - started
    dest.unlink()
    return took


def baseline(url: str, scratch: Path) -> float:
    dest = scratch / "clone"
    started = time.perf_counter()
    git(scratch, "clone", "-q", "--depth", "1", url, str(dest))
    took = time.perf_counter() - started
    shutil.rmtree(dest)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=20.0, help="pack size to build, MB")
    parser.add_argument("--profile", type=Path, help="write a pyinstrument profile of ours here")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bench-git-"))
    try:
        served, pack = build(work, args.mb)
        files = int(git(work / "work", "ls-files", "-z").count("\0"))
        with serve_git_http(served) as base:
            url = f"{base}/r.git"
            ours(url, work)  # warm: imports, the server's first answer
            mine, theirs = [], []
            for _ in range(RUNS):
                theirs.append(baseline(url, work))
                mine.append(ours(url, work))
            inflated = statistics.median(ours(url, work, inflate=True) for _ in range(RUNS))
            if args.profile is not None:
                from pyinstrument import Profiler

                args.profile.mkdir(parents=True, exist_ok=True)
                profiler = Profiler(interval=0.001)
                profiler.start()
                ours(url, work)
                profiler.stop()
                (args.profile / "git-fetch.txt").write_text(
                    profiler.output_text(unicode=True, color=False)
                )
        print(
            f"(information) fetch + every object of the history read: {inflated:.2f} s, "
            f"{inflated / statistics.median(theirs):.2f}x the shallow clone"
        )
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        ours_s, base_s = statistics.median(mine), statistics.median(theirs)
        ratio = ours_s / base_s
        return emit(
            Row(
                what=f"fetch a {pack / 2**20:.1f} MB repository ({files} files, 11 commits) "
                f"from git http-backend on loopback; load {load}",
                ours=f"fetch + pack guard {ours_s:.2f} s "
                f"(runs {', '.join(f'{m:.2f}' for m in mine)})",
                baseline=f"git clone --depth 1 {base_s:.2f} s "
                f"(runs {', '.join(f'{t:.2f}' for t in theirs)})",
                ratio=f"{ratio:.2f}x",
                target=f"<= {TARGET}x",
                ok=ratio <= TARGET,
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
