"""The same batch through one worker host and through two (issue #31's scale-out figure).

A "host" is a process group with its own DATA_DIR, WORK_DIR and HOST_NAME (tests/hosts.py,
the layout tests/slow/test_hosts.py runs), sharing only PostgreSQL, Redis and the archive
storage (one MEDIA_ROOT folder, the README's shared-volume layout; S3 would add a server's
CPU to a 2-core machine). Each worker host runs `celery -A reviewer worker --concurrency 1`;
this process is the web host: it hands every archive to `submission_create` (the upload's
path: spool, check-unpack in its own WORK_DIR, store, intake job), and each worker host
unpacks what it runs from storage into its own WORK_DIR.

Each run starts from nothing (a fresh database `bench_hosts`, Redis db 12 flushed, fresh host
folders); the clock runs from the first archive handed in until every analysis has passed.
Runs alternate (1, 2, 1, 2 ...) and the fastest of each counts. The workload and the CPU
accounting are bench_workers.py's. OK is claimed only when the 1-host run was quiet (other
processes used at most QUIET_CORES): a busy 1-host run inflates the ratio. The load average
before each run goes to stderr and into the row.

    .venv/bin/python bench/bench_hosts.py [--submissions 40] [--files 300] [--repeat 2]

Needs PostgreSQL and Redis on 127.0.0.1 (the hosts share them). Target: 2 worker hosts >=
1.7x the throughput of one on the same batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_workers import (  # noqa: E402
    PG,
    QUIET_CORES,
    REDIS,
    TARGET,
    _CpuMeter,
    _default_work_dir,
    _proc_cpu,
    _up,
    _wait_quiet,
    check_results,
    fresh_services,
    intake_all,
    make_archive,
    run_detail,
    seed,
    wait_analysed,
)
from bench.common import Row, emit  # noqa: E402
from tests.hosts import Hosts, worker_argv  # noqa: E402

PG_DB = "bench_hosts"
REDIS_DB = 12  # dedicated: flushed before each run


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


# ---------------------------------------------------------------- one run (child process)


def _run(archives: Path, hosts_count: int, root: Path) -> dict:
    """Seed, start the worker hosts, intake every archive, wait for the analyses."""
    assignment, paths, candidates = seed(archives)
    from submissions.models import Job, WorkerBeat

    shared = {k: os.environ[k] for k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
                                         "SECRET_KEY", "CELERY_QUEUE", "MEDIA_ROOT", "DEBUG",
                                         "LOG_LEVEL", "PYTHONUNBUFFERED")}  # fmt: skip
    hosts = Hosts(root, shared)
    names = [f"worker-{i + 1}" for i in range(hosts_count)]
    try:
        workers = [hosts.start(name, worker_argv(os.environ["CELERY_QUEUE"])) for name in names]
        deadline = time.monotonic() + 60
        while WorkerBeat.objects.filter(host__in=names).values("host").distinct().count() < len(
            names
        ):
            if not hosts.alive() or time.monotonic() > deadline:
                raise SystemExit(f"worker hosts did not start:\n{hosts.tail()}")
            time.sleep(0.1)

        load = _load()
        meter = _CpuMeter([w.pid for w in workers])
        started = time.perf_counter()
        intake_all(assignment, paths, candidates)
        intake_seconds = time.perf_counter() - started
        intake_cpu = _proc_cpu(os.getpid(), reaped=False) - meter.start["bench"]

        def gone() -> str:
            return "" if hosts.alive() else f"a worker host exited:\n{hosts.tail()}"

        wait_analysed(len(paths), gone, meter.poll)
        wall = time.perf_counter() - started
        cpu = meter.total()
        cpu["bench intake"] = intake_cpu
    finally:
        hosts.stop()
    ran_on = Counter(r.rpartition(":")[0] for r in Job.objects.values_list("runner", flat=True))
    return {
        "wall": wall,
        "intake": intake_seconds,
        "cpu": cpu,
        "jobs": check_results(),
        "ran_on": dict(ran_on),
        "load": load,
    }


# ---------------------------------------------------------------- driver


def _child(args: argparse.Namespace, hosts_count: int, work: Path) -> dict:
    """One run in a fresh child process: the web host, which starts the worker hosts."""
    root = work / f"hosts-{hosts_count}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "shared-media").mkdir(parents=True)
    services = fresh_services(PG_DB, REDIS_DB)
    env = dict(os.environ)
    env.update(services)
    env.update(
        DJANGO_SETTINGS_MODULE="reviewer.settings",
        SECRET_KEY="bench-hosts-" + uuid.uuid4().hex,
        CELERY_QUEUE=f"bench-hosts-{os.getpid()}",
        MEDIA_ROOT=str(root / "shared-media"),
        DEBUG="0",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        HOST_NAME="web",
        DATA_DIR=str(root / "web" / "data"),
        WORK_DIR=str(root / "web" / "work"),
    )
    command = [sys.executable, __file__, "--child", str(hosts_count), "--archives"]
    command += [str(work / "archives"), "--root", str(root)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"run with {hosts_count} worker host(s) failed:\n{result.stderr[-4000:]}"
            f"\n(host folders: {root})"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _describe(hosts_count: int, run: dict) -> None:
    jobs, cpu = run_detail(run)
    print(
        f"  {hosts_count} worker host(s): wall {run['wall']:.1f} s (intake on the web host "
        f"{run['intake']:.1f} s); jobs {jobs}; ran on {run['ran_on']}; {run['load']} before; "
        f"cpu seconds: {cpu}",
        file=sys.stderr,
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--files", type=int, default=300, help="cassettes per submission")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, best kept")
    parser.add_argument(
        "--work-dir", type=Path, default=_default_work_dir(), help="the hosts' parent folder"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--archives", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(_run(args.archives, args.child, args.root)))
        return 0

    if not (_up(PG) and _up(REDIS)):
        print("bench_hosts: needs PostgreSQL and Redis on 127.0.0.1 (hosts share them)")
        return emit(Row("worker hosts 2 vs 1: not run, no PostgreSQL + Redis", "-", "-", "-",
                        f">= {TARGET}x", False))  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-hosts-", dir=args.work_dir))
    try:
        (work / "archives").mkdir()
        for i in range(args.submissions):
            data = make_archive(i, args.files)
            (work / "archives" / f"cand{i:03d}.tar.gz").write_bytes(data)
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(args.repeat):
            for n in (1, 2):
                _wait_quiet()
                run = _child(args, n, work)
                runs[n].append(run)
                _describe(n, run)
        best = {n: min(rs, key=lambda r: r["wall"]) for n, rs in runs.items()}
        per_min = {n: args.submissions / run["wall"] * 60 for n, run in best.items()}
        ratio = per_min[2] / per_min[1]
        others = {n: run["cpu"]["others"] / run["wall"] for n, run in best.items()}
        both = len(best[2]["ran_on"]) == 2  # the batch really was shared by two hosts
        noisy = ""
        if max(others.values()) > QUIET_CORES:
            noisy = (
                f"; NOISY: other processes used {others[1]:.1f} / {others[2]:.1f} of "
                f"{os.cpu_count()} cores during the 1- / 2-host runs"
            )
        return emit(
            Row(
                what=(
                    f"{args.submissions} submissions x {args.files} cassettes, intake + "
                    f"analysis, worker hosts (own DATA_DIR, WORK_DIR, HOST_NAME; shared "
                    f"PostgreSQL, Redis, storage) 2 vs 1, --concurrency 1 each; "
                    f"{best[1]['load']} before the 1-host run, {best[2]['load']} before the "
                    f"2-host run{noisy}"
                ),
                ours=f"2 hosts {per_min[2]:.1f}/min ({best[2]['wall']:.1f} s)",
                baseline=f"1 host {per_min[1]:.1f}/min ({best[1]['wall']:.1f} s)",
                ratio=f"{ratio:.2f}x",
                target=f">= {TARGET}x",
                ok=ratio >= TARGET and others[1] <= QUIET_CORES and both,
            )
        )
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
