"""Run every benchmark under bench/ in turn and print one table; exit 1 when a target is missed.

    .venv/bin/python bench/run_all.py [--only NAME ...]

Each benchmark runs in its own process (so one's memory and imports do not colour the next)
and reports through `bench.common.emit`. A benchmark that crashes or prints no row counts as
missed: a benchmark that cannot fail its target is not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = [
    "bench_ingest",
    "bench_git_fetch",
    "bench_vcr",
    "bench_diff",
    "bench_sandbox",
    "bench_install",
    "bench_pages",
    "bench_workers",
    "bench_hosts",
    "bench_host_disk",
]


def _benchmarks(only: list[str]) -> list[Path]:
    found = {p.stem: p for p in HERE.glob("bench_*.py")}
    names = [n for n in ORDER if n in found] + sorted(set(found) - set(ORDER))
    if only:
        unknown = [n for n in only if n not in found]
        if unknown:
            raise SystemExit(f"no such benchmark: {', '.join(unknown)} (have {', '.join(names)})")
        names = [n for n in names if n in only]
    return [found[n] for n in names]


def _table(rows: list[dict]) -> str:
    head = ["benchmark", "what", "ours", "baseline", "ratio", "target", "verdict"]
    body = [
        [
            r["bench"],
            r["what"],
            r["ours"],
            r["baseline"],
            r["ratio"],
            r["target"],
            "OK" if r["ok"] else "MISSED",
        ]
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [head, *body]) for i in range(len(head))]
    out = [" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out.append("-+-".join("-" * w for w in widths))
    out += [" | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    rows: list[dict] = []
    for path in _benchmarks(args.only):
        print(f"== {path.stem}", flush=True)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(path)], cwd=HERE.parent, capture_output=True, text=True
        )
        seconds = time.perf_counter() - started
        found = []
        for line in done.stdout.splitlines():
            if line.startswith("BENCH "):
                found.append({"bench": path.stem, **json.loads(line[6:])})
            else:
                print(f"   {line}")
        if not found or (done.returncode != 0 and all(r["ok"] for r in found)):
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            found.append(
                {
                    "bench": path.stem,
                    "what": f"crashed (exit {done.returncode}): " + " / ".join(tail)[-300:],
                    "ours": "-",
                    "baseline": "-",
                    "ratio": "-",
                    "target": "a row",
                    "ok": False,
                }
            )
        print(f"   ({seconds:.0f} s)", flush=True)
        rows += found
    print()
    print(_table(rows))
    missed = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(missed)} of {len(rows)} targets hold")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
