"""Per-host disk after 200 uploads: every per-host cache stays under its cap (issue #31).

The layout of tests/slow/test_hosts.py (tests/hosts.py): a web host (gunicorn, its own
DATA_DIR, WORK_DIR and HOST_NAME) and two worker hosts (`celery worker --concurrency 1`
each), sharing only PostgreSQL, Redis and an S3 server (moto, started here). 200 generated
hand-ins (different per candidate, about 80 kB unpacked each) go in through the upload form
over HTTP; the worker hosts run their intake and analysis; then the file viewer shows one
file of every hand-in on the web host (which copies archives from the bucket into its
archive cache).

While that runs, a sampler measures each host's per-host folders every 0.2 s: the trees
(WORK_DIR, cap TREE_CACHE_BYTES), the archive cache (ARCHIVE_CACHE_DIR, cap
ARCHIVE_CACHE_BYTES), the installed environments (DEPS_DIR, cap DEPS_ENV_CACHE_BYTES; none
are made here: the assignment runs no replay) and the whole DATA_DIR. The caps are set
small (1 MiB each) so that 200 hand-ins overflow them many times. The web host keeps no tree
of an upload (INTAKE_KEEP_TREE=0, as the README says for a web host with no worker beside
it; `--web-keeps-trees` to measure its bounded trees instead). The baseline is what the trees
would take with no cap: each tree a worker host touched (and, with `--web-keeps-trees`, every
hand-in's on the web host), summed from the run. A cache's peak may pass its cap by the one
entry being placed, while it is being unpacked beside its archive (the eviction runs right
after a tree or archive is placed); the target is every cache at or under its cap at the end, and no
peak over the cap plus one hand-in in flight (its largest tree and its largest archive).

    .venv/bin/python bench/bench_host_disk.py [--uploads 200] [--files 40] [--web-keeps-trees]

Needs PostgreSQL and Redis on 127.0.0.1, and moto (a test dependency). Takes 2-4 minutes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_workers import PG, REDIS, _up, fresh_services  # noqa: E402
from bench.common import Row, emit  # noqa: E402
from tests.hosts import Hosts, free_port, s3_bucket, s3_server, worker_argv  # noqa: E402

PG_DB = "bench_host_disk"
REDIS_DB = 13  # dedicated: flushed before the run
CAP = 2**20  # TREE_CACHE_BYTES, ARCHIVE_CACHE_BYTES and DEPS_ENV_CACHE_BYTES on every host
RUN_TIMEOUT = 600.0
HOSTS = ("web", "worker-1", "worker-2")
PASSWORD = "pw-bench-disk-123"  # noqa: S105 - a throwaway user of the bench's own database


def make_handin(candidate: int, files: int) -> bytes:
    """A zip of `files` text files of ~2 kB, different per candidate (no two alike)."""
    rng = random.Random(candidate)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("repo/README.md", f"# Hand-in {candidate}\nsecond line\n")
        for i in range(files):
            words = " ".join(f"w{rng.randrange(5000)}" for _ in range(400))
            zipped.writestr(f"repo/notes/n{i:03d}.txt", words[:2000] + "\n")
    return out.getvalue()


def _bytes(root: Path) -> int:
    """Bytes of the regular files under `root` (0 when it does not exist)."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:  # removed while we looked (an eviction)
                continue
    return total


def _largest_entry(root: Path, kind: str) -> int:
    """Bytes of the largest single entry of a cache: one tree (a folder under
    WORK_DIR/submissions), one archive (a file of the archive cache), one environment."""
    if kind == "trees":
        folders = root / "submissions"
        entries = [p for p in folders.iterdir()] if folders.is_dir() else []
        return max((_bytes(p) for p in entries), default=0)
    if kind == "archive cache":
        files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
        return max((p.stat().st_size for p in files), default=0)
    entries = list(root.iterdir()) if root.is_dir() else []
    return max((_bytes(p) if p.is_dir() else p.stat().st_size for p in entries), default=0)


class Sampler(threading.Thread):
    """Peak bytes of each host's per-host folders, sampled until stopped."""

    def __init__(self, folders: dict[str, dict[str, Path]]) -> None:
        super().__init__(daemon=True)
        self.folders = folders
        self.peak = {h: dict.fromkeys(f, 0) for h, f in folders.items()}
        self.stop = threading.Event()

    def sample(self) -> dict[str, dict[str, int]]:
        return {h: {k: _bytes(p) for k, p in f.items()} for h, f in self.folders.items()}

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for host, figures in self.sample().items():
                for kind, size in figures.items():
                    self.peak[host][kind] = max(self.peak[host][kind], size)


def _host_folders(hosts: Hosts) -> dict[str, dict[str, Path]]:
    return {
        name: {
            "trees": hosts.home(name) / "work",
            "archive cache": hosts.home(name) / "archive-cache",
            "environments": hosts.home(name) / "deps",
            "DATA_DIR": hosts.home(name) / "data",
        }
        for name in HOSTS
    }


def _wait(what: str, until, hosts: Hosts, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        if not hosts.alive():
            raise SystemExit(f"a host exited while waiting for {what}:\n{hosts.tail()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} not within {timeout:.0f} s:\n{hosts.tail()}")
        time.sleep(0.2)


def _run(args: argparse.Namespace, root: Path) -> dict:
    """In a child process with the web host's settings: start the hosts, upload, measure."""
    import django

    django.setup()
    import requests
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from submissions.assignments import assignment_apply, assignment_values
    from submissions.models import Job, Submission, WorkerBeat
    from submissions.roles import REVIEWERS

    # No replay command: intake and analysis only (no sandbox, no environments).
    values = assignment_values(
        {"slug": "bench-host-disk", "title": "bench host disk", "replay_command": ""}
    )
    assignment = assignment_apply(values=values)[0]
    user = User.objects.create_user("bench-disk", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=REVIEWERS)[0])

    shared = {k: os.environ[k] for k in os.environ if k.startswith("S3_") or k in (
        "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CELERY_QUEUE",
        "STORAGE_BACKEND", "TREE_CACHE_BYTES", "ARCHIVE_CACHE_BYTES", "DEPS_ENV_CACHE_BYTES",
        "LOG_LEVEL", "PYTHONUNBUFFERED", "DEBUG")}  # fmt: skip
    hosts = Hosts(root, shared)
    per_host = {
        name: {"ARCHIVE_CACHE_DIR": str(hosts.home(name) / "archive-cache"),
               "DEPS_DIR": str(hosts.home(name) / "deps")}
        for name in HOSTS
    }  # fmt: skip
    # The web host keeps no tree of what it receives (the README's scale-out setting), unless
    # --web-keeps-trees: then its trees are one more bounded cache to measure.
    per_host["web"]["INTAKE_KEEP_TREE"] = "1" if args.web_keeps_trees else "0"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    handins = [make_handin(i, args.files) for i in range(args.uploads)]
    sampler = Sampler(_host_folders(hosts))
    try:
        hosts.start("web", ["gunicorn", "reviewer.wsgi:application", "--bind",
                            f"127.0.0.1:{port}", "--workers", "2"], **per_host["web"])  # fmt: skip
        for name in HOSTS[1:]:
            hosts.start(name, worker_argv(os.environ["CELERY_QUEUE"]), **per_host[name])
        beats = WorkerBeat.objects.filter(host__in=HOSTS[1:])
        _wait("the worker hosts", lambda: beats.values("host").distinct().count() == 2, hosts, 60)
        http = requests.Session()

        def web_up() -> bool:
            try:
                return http.get(f"{base}/login/", timeout=5).status_code == 200
            except OSError:
                return False

        _wait("the web host", web_up, hosts, 60)
        token = http.cookies["csrftoken"]
        http.post(f"{base}/login/", data={"username": "bench-disk", "password": PASSWORD,
                                          "csrfmiddlewaretoken": token}, timeout=10)  # fmt: skip
        token = http.cookies["csrftoken"]  # rotated at login
        sampler.start()
        started = time.perf_counter()
        for i, data in enumerate(handins):
            answer = http.post(
                f"{base}{assignment.get_absolute_url()}",
                data={"candidate": f"Disk candidate {i}", "csrfmiddlewaretoken": token},
                files={"archive": (f"h{i}.zip", data, "application/zip")}, timeout=60,
            )  # fmt: skip
            if "/submissions/" not in answer.url:
                raise SystemExit(f"upload {i} refused: {answer.status_code} {answer.text[-800:]}")
        uploads_s = time.perf_counter() - started
        jobs = Job.objects.all()

        def all_ended() -> bool:
            return (
                jobs.count() >= 2 * args.uploads
                and not jobs.exclude(state__in=Job.FINAL_STATES).exists()
            )

        _wait("every job ending", all_ended, hosts, RUN_TIMEOUT)
        jobs_s = time.perf_counter() - started
        bad = list(jobs.exclude(state=Job.State.PASSED).values_list("kind", "state", "error")[:3])
        if bad:
            raise SystemExit(f"jobs did not pass: {bad}")
        for pk in Submission.objects.values_list("pk", flat=True):
            shown = http.get(f"{base}/submissions/{pk}/file/", params={"path": "README.md"},
                             timeout=30)  # fmt: skip
            if shown.status_code != 200 or "Hand-in" not in shown.text:
                raise SystemExit(f"file viewer of submission {pk}: {shown.status_code}")
        views_s = time.perf_counter() - started - jobs_s
        time.sleep(0.5)  # one more sample after the last view
    finally:
        sampler.stop.set()
        hosts.stop()
    final = sampler.sample()
    largest = {
        h: {k: _largest_entry(p, k) for k, p in f.items()} for h, f in sampler.folders.items()
    }
    # What the trees would take with no cap: one tree per hand-in on the web host (each upload
    # is unpacked there to be checked), and on each worker host one per hand-in it touched.
    tree = max(largest[h]["trees"] for h in HOSTS)
    touched: dict[str, set[int]] = {h: set() for h in HOSTS}
    for sub, runner in Job.objects.values_list("submission_id", "runner"):
        touched.setdefault(runner.rpartition(":")[0], set()).add(sub)
    unbounded = {"web": args.uploads * tree if args.web_keeps_trees else 0}
    unbounded.update({h: len(touched[h]) * tree for h in HOSTS[1:]})
    return {
        "peak": sampler.peak,
        "final": final,
        "largest": largest,
        "unbounded": unbounded,
        "seconds": {"uploads": uploads_s, "jobs": jobs_s, "views": views_s},
        "archive": max(len(h) for h in handins),
    }


def _child(args: argparse.Namespace, work: Path, s3: dict[str, str]) -> dict:
    root = work / "hosts"
    services = fresh_services(PG_DB, REDIS_DB)
    env = dict(os.environ)
    env.update(services)
    env.update(s3)
    env.update(
        DJANGO_SETTINGS_MODULE="reviewer.settings",
        SECRET_KEY="bench-host-disk-" + uuid.uuid4().hex,
        CELERY_QUEUE=f"bench-host-disk-{os.getpid()}",
        TREE_CACHE_BYTES=str(CAP),
        ARCHIVE_CACHE_BYTES=str(CAP),
        DEPS_ENV_CACHE_BYTES=str(CAP),
        DEBUG="1",  # the web host serves plain HTTP on loopback (no TLS redirect)
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        # This process only seeds and reads the database: a data folder of its own.
        DATA_DIR=str(work / "driver"),
    )
    command = [sys.executable, __file__, "--child", "--root", str(root)]
    command += ["--uploads", str(args.uploads), "--files", str(args.files)]
    command += ["--web-keeps-trees"] if args.web_keeps_trees else []
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"the run failed:\n{result.stderr[-4000:]}\n(host folders: {root})")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--files", type=int, default=40, help="files of ~2 kB per hand-in")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--web-keeps-trees", action="store_true", help="INTAKE_KEEP_TREE=1 on the web host"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(_run(args, args.root)))
        return 0
    if not (_up(PG) and _up(REDIS)):
        print("bench_host_disk: needs PostgreSQL and Redis on 127.0.0.1 (hosts share them)")
        return emit(Row("per-host disk: not run, no PostgreSQL + Redis", "-", "-", "-",
                        "every cache <= its cap", False))  # fmt: skip
    load = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-host-disk-"))
    try:
        with s3_server(work) as url:
            run = _child(args, work, s3_bucket(url, "bench-host-disk"))
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    ok = True
    for host in HOSTS:
        cells = []
        for kind in ("trees", "archive cache", "environments"):
            peak, final = run["peak"][host][kind], run["final"][host][kind]
            largest = run["largest"][host][kind]
            # In flight: a tree unpacking beside its spooled or downloaded archive.
            in_flight = largest + run["archive"] if kind == "trees" else largest
            ok &= final <= CAP and peak <= CAP + in_flight
            cells.append(f"{kind} peak {peak:,} end {final:,} (largest entry {largest:,})")
        cells.append(f"DATA_DIR peak {run['peak'][host]['DATA_DIR']:,}")
        print(f"  {host}: " + "; ".join(cells), file=sys.stderr)
    seconds = run["seconds"]
    print(
        f"  {args.uploads} uploads in {seconds['uploads']:.1f} s, every job ended at "
        f"{seconds['jobs']:.1f} s, {args.uploads} file views in {seconds['views']:.1f} s; "
        f"largest archive {run['archive']:,} B; "
        f"load before {load[0]:.2f} (5 min {load[1]:.2f}), after {os.getloadavg()[0]:.2f}, "
        f"on {os.cpu_count()} cores",
        file=sys.stderr,
    )
    worst = max(run["peak"][h]["trees"] for h in HOSTS)
    unbounded = max(run["unbounded"].values())
    return emit(
        Row(
            what=(
                f"{args.uploads} uploads over HTTP (web + 2 worker hosts, S3 on moto; the web "
                f"host {'keeps' if args.web_keeps_trees else 'keeps no'} trees), "
                f"per-host trees / archive cache / environments, caps {_mib(CAP)} each; "
                f"load {load[0]:.2f} on {os.cpu_count()} cores before"
            ),
            ours=f"largest host's trees peak {worst:,} B",
            baseline=f"uncapped {unbounded:,} B (largest host)",
            ratio=f"{worst / unbounded:.3f}x" if unbounded else "-",
            target=f"every cache <= {CAP:,} B at the end; peak <= cap + one hand-in in flight",
            ok=ok,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
