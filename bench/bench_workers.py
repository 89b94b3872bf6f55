"""40 submissions through intake + analysis with one Celery worker process and with two.

Each run starts from nothing: a fresh database (PostgreSQL `bench_workers`, or SQLite in a
fresh DATA_DIR), a flushed broker, migrations applied (not timed). A `celery worker
--pool prefork` starts with `--concurrency 1` (baseline) or `--concurrency 2` (ours, as
`make worker` and docker-compose run it) and is waited for; then the clock runs from the
first archive handed to `submission_create` (the upload view's and `ingest`'s path:
spool, check-unpack, Submission row, intake job) until all 40 analysis jobs have ended.
Every job must pass, or the bench stops with the failure. The archives are generated
(cassette-shaped repos, different per candidate) and DATA_DIR lives on tmpfs when there is
one (see `_default_work_dir`).

Backend: PostgreSQL + Redis (production) when both answer on 127.0.0.1, else the embedded
default (SQLite + kombu's filesystem broker); the row says which.

Runs alternate (1, 2, 1, 2 ...) and the fastest of each counts. Each run's detail goes to
stderr: job durations, and the CPU seconds of the workers, this process, PostgreSQL, Redis
and everything else (the neighbours), read from /proc (Linux). A run during which other
processes took more than QUIET_CORES is marked NOISY; OK is only claimed when the 1-worker
run was quiet (a busy 1-worker run inflates the ratio).

    .venv/bin/python bench/bench_workers.py [--submissions 40] [--files 300] [--sqlite]

Target: two worker processes >= 1.7x the throughput of one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402

TARGET = 1.7
PG = ("127.0.0.1", 5432)
REDIS = ("127.0.0.1", 6379)
PG_DB = "bench_workers"
REDIS_DB = 11  # dedicated: flushed before each run
RUN_TIMEOUT = 150.0
QUIET_CORES = 0.25  # CPU other processes may use during a run that counts as clean
MODEL = "gpt-4o-mini-2024-07-18"
VOLATILE = ("user", "request_id", "id", "created")


# ---------------------------------------------------------------- workload


def _key(request: dict) -> str:
    canon = {k: v for k, v in request.items() if k not in VOLATILE}
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cassette(rng: random.Random, candidate: int, ticket: int, words: list[str]) -> list[dict]:
    """One ticket's conversation: one cassette per model turn (1 or 2 turns)."""
    system = {"role": "system", "content": "You triage support tickets. Reply with JSON only."}
    body = " ".join(rng.choice(words) for _ in range(rng.randint(60, 200)))
    user = {"role": "user", "content": f"Ticket T-{candidate}-{ticket}: {body}"}
    messages = [system, user]
    turns = []
    tool_turn = rng.random() < 0.4
    for turn in range(2 if tool_turn else 1):
        request = {"model": MODEL, "messages": list(messages), "temperature": 0}
        if tool_turn and turn == 0:
            call_id = f"call_{candidate}_{ticket}"
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_customer", "arguments": '{"customer_id":"C-1"}'},
                    }
                ],
            }
            messages += [
                message,
                {"role": "tool", "tool_call_id": call_id, "content": '{"tier": "gold"}'},
            ]
        else:
            answer = {"ticket_id": f"T-{candidate}-{ticket}", "category": "question"}
            message = {"role": "assistant", "content": json.dumps(answer)}
        response = {
            "id": f"chatcmpl-{candidate}-{ticket}-{turn}",
            "object": "chat.completion",
            "created": 1794301965,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340},
        }
        turns.append(
            {
                "key": _key(request),
                "request": request,
                "response": response,
                "recorded_at": "2026-11-10T09:12:45Z",
                "model": MODEL,
            }
        )
    return turns


def make_archive(candidate: int, files: int) -> bytes:
    """A cassette-shaped repo as tar.gz: Makefile, REPLAY.md and ~`files` cassettes."""
    rng = random.Random(candidate)
    words = [f"w{i}" for i in range(3000)]
    members: dict[str, bytes] = {
        "Makefile": b"test:\n\tpython -m pytest\ndemo:\n\tpython -m triage\nrecord:\n\ttrue\n",
        "REPLAY.md": (
            b"# Replay notes\n\nKey: sha256 of the canonical request, first 16 hex.\n"
            b"Dropped fields: `user`, `request_id`, `id`, `created`.\n"
        ),
        "README.md": f"Candidate {candidate}\n".encode(),
    }
    ticket = 0
    while len(members) < files + 3:
        for cassette in _cassette(rng, candidate, ticket, words):
            members[f"cassettes/{cassette['key']}.json"] = json.dumps(cassette, indent=2).encode()
        ticket += 1
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=6) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"repo/{name}")
            info.size = len(data)
            info.mtime = 1_790_000_000
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# ---------------------------------------------------------------- one run (child process)


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int, *, reaped: bool = True) -> float:
    """CPU seconds of a process (and of its children it has reaped), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICK


def _children(pid: int) -> list[int]:
    """Child pids, whichever thread forked them (billiard forks replacements from a thread)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _tree_pids(pid: int) -> list[int]:
    return [pid] + [p for child in _children(pid) for p in _tree_pids(child)]


def _runqueue_wait(pids: list[int]) -> float:
    """Seconds these (live) processes spent runnable but waiting for a CPU."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process tree: the live processes, and the dead ones reaped."""
    return _proc_cpu(pid) + sum(_tree_cpu(child) for child in _children(pid))


def _machine_cpu() -> float:
    """CPU seconds the whole machine has been busy (all cores) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / _TICK


def _redis_pid() -> int | None:
    """The broker's Redis server pid, when there is one on this machine."""
    from django.conf import settings

    if not settings.REDIS_URL:
        return None
    import redis

    return int(redis.Redis.from_url(settings.REDIS_URL).info("server")["process_id"])


class _CpuMeter:
    """Who used the CPU during a run: the worker tree, this process, the database server's
    processes for our database (and its shared background ones: WAL writer, checkpointer),
    the Redis server, and everything else on the machine (the neighbours)."""

    def __init__(self, worker: int | list[int]) -> None:
        self.workers = worker if isinstance(worker, list) else [worker]
        self.redis = _redis_pid()
        self.backends: dict[int, float] = {}  # our database's server processes: cpu seen
        self.backends_before: dict[int, float] = {}
        self.start = self._sample()
        self.backends_before = dict(self.backends)

    def poll(self) -> None:
        """Note the CPU of our database's server processes (they exit with their client)."""
        from django.db import connection

        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() OR datname IS NULL"
            )
            for (pid,) in cursor.fetchall():
                cpu = _proc_cpu(pid, reaped=False)
                if cpu:
                    self.backends[pid] = max(cpu, self.backends.get(pid, 0.0))

    def _sample(self) -> dict[str, float]:
        self.poll()
        return {
            "workers": sum(_tree_cpu(pid) for pid in self.workers),
            "workers waiting for a CPU": _runqueue_wait(
                [p for pid in self.workers for p in _tree_pids(pid)]
            ),
            "bench": _proc_cpu(os.getpid(), reaped=False),
            "redis": _proc_cpu(self.redis, reaped=False) if self.redis else 0.0,
            "machine": _machine_cpu(),
        }

    def total(self) -> dict[str, float]:
        """CPU seconds since the meter started, by owner."""
        end = self._sample()
        used = {k: v - self.start[k] for k, v in end.items()}
        used["postgres"] = sum(self.backends.values()) - sum(self.backends_before.values())
        waited = used.pop("workers waiting for a CPU")
        used["others"] = used.pop("machine") - sum(used.values())
        used["workers waiting for a CPU"] = waited
        return used


def seed(archives: Path) -> tuple[object, list[Path], list[object]]:
    """Migrate a fresh database; the assignment, the archives and one candidate for each."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from submissions.models import Assignment, Candidate

    assignment = Assignment.objects.create(
        slug="bench-workers",
        title="bench workers",
        shape="cassette",
        # No replay, stub or service commands: analysis queues nothing after itself.
        recording_globs=["cassettes/**/*.json"],
        volatile_fields=list(VOLATILE),
        stale_after_days=42,
        expected_model=MODEL,
        rubric="cassette",
    )
    paths = sorted(archives.glob("*.tar.gz"))
    candidates = [Candidate.objects.create(name=p.name.split(".")[0]) for p in paths]
    return assignment, paths, candidates


def intake_all(assignment: object, paths: list[Path], candidates: list[object]) -> None:
    """Hand every archive to `submission_create` (the upload view's and `ingest`'s path)."""
    from submissions.intake.upload import submission_create

    for path, candidate in zip(paths, candidates, strict=True):
        with path.open("rb") as handle:
            result = submission_create(
                upload=handle, filename=path.name, candidate=candidate, assignment=assignment
            )
        if not result.created or result.reason:
            raise SystemExit(f"{path.name}: not taken: {result.reason or 'duplicate'}")


def wait_analysed(count: int, gone: Callable[[], str], poll: Callable[[], None]) -> None:
    """Until `count` analysis jobs passed; stops on any job that ended otherwise, on `gone()`
    (a message when a worker exited) and after RUN_TIMEOUT."""
    from submissions.models import Job

    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        states = Counter(Job.objects.values_list("kind", "state"))
        if any(s in Job.FINAL_STATES and s != Job.State.PASSED for _, s in states):
            job = Job.objects.filter(state__in=Job.FINAL_STATES).exclude(state=Job.State.PASSED)[0]
            raise SystemExit(
                f"{job.kind} job {job.pk} of submission {job.submission_id} ended "
                f"{job.state}: {job.error}\n{job.log[-2000:]}"
            )
        analysed = states[(Job.Kind.ANALYSIS, Job.State.PASSED)]
        if analysed == count:
            return
        if message := gone():
            raise SystemExit(message)
        if time.monotonic() > deadline:
            raise SystemExit(f"only {analysed}/{count} analyses passed after {RUN_TIMEOUT:.0f} s")
        poll()
        time.sleep(0.1)


def check_results() -> dict[str, list[float]]:
    """Every submission ready with its recordings; the job durations by kind: [count, sum]."""
    from django.db.models import F

    from submissions.models import Job, Submission

    not_ready = Submission.objects.exclude(status=Submission.Status.READY).count()
    if not_ready:
        raise SystemExit(f"{not_ready} submissions did not end ready")
    empty = Submission.objects.filter(recordings__isnull=True).count()
    if empty:
        raise SystemExit(f"{empty} submissions passed analysis with no recording stored")
    # Per-kind job durations: the sum over the wall time is the parallelism achieved.
    durations: dict[str, list[float]] = {}
    rows = Job.objects.annotate(took=F("finished_at") - F("started_at"))
    for kind, took in rows.values_list("kind", "took"):
        durations.setdefault(kind, []).append(took.total_seconds())
    return {k: [len(v), sum(v)] for k, v in durations.items()}


def _run(archives: Path, concurrency: int, queue: str) -> dict:
    """Seed, start the worker, intake every archive, wait for the analyses; return timings."""
    assignment, paths, candidates = seed(archives)
    from django.conf import settings

    from submissions.jobs.workers import worker_seen_at

    log_path = Path(settings.DATA_DIR) / f"worker-{concurrency}.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "reviewer", "worker",
                "--pool", "prefork", "--concurrency", str(concurrency),
                "-Q", queue, "-l", "info",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while worker_seen_at() is None:  # set by the worker_ready signal
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.1)

        meter = _CpuMeter(worker.pid)
        started = time.perf_counter()
        intake_all(assignment, paths, candidates)
        intake_seconds = time.perf_counter() - started
        intake_cpu = _proc_cpu(os.getpid(), reaped=False) - meter.start["bench"]

        def gone() -> str:
            if worker.poll() is None:
                return ""
            return f"worker exited:\n{log_path.read_text()[-3000:]}"

        wait_analysed(len(paths), gone, meter.poll)
        wall = time.perf_counter() - started
        cpu = meter.total()
        cpu["bench intake"] = intake_cpu
    finally:
        worker.send_signal(signal.SIGQUIT)  # cold shutdown: the pool children go with it
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()

    return {"wall": wall, "intake": intake_seconds, "cpu": cpu, "jobs": check_results()}


# ---------------------------------------------------------------- driver


def _up(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=1):
            return True
    except OSError:
        return False


def fresh_services(pg_db: str, redis_db: int) -> dict[str, str]:
    """An empty PostgreSQL database `pg_db` and Redis database `redis_db`, made anew, and the
    DATABASE_URL and REDIS_URL that name them."""
    import psycopg
    import redis

    url = f"postgresql://postgres@{PG[0]}:{PG[1]}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {pg_db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {pg_db}")
    redis.Redis(host=REDIS[0], port=REDIS[1], db=redis_db).flushdb()
    return {
        "DATABASE_URL": f"postgresql://postgres@{PG[0]}:{PG[1]}/{pg_db}",
        "REDIS_URL": f"redis://{REDIS[0]}:{REDIS[1]}/{redis_db}",
    }


def _fresh_postgres() -> None:
    import psycopg

    url = f"postgresql://postgres@{PG[0]}:{PG[1]}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {PG_DB}")


def _fresh_redis() -> None:
    import redis

    redis.Redis(host=REDIS[0], port=REDIS[1], db=REDIS_DB).flushdb()


def _child(args: argparse.Namespace, concurrency: int, production: bool, work: Path) -> dict:
    """One run in a fresh child process, with the settings env it (and its worker) boots from."""
    data_dir = work / f"data-{concurrency}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        DJANGO_SETTINGS_MODULE=args.settings,
        DATA_DIR=str(data_dir),
        DEBUG="0",
        SECRET_KEY="bench-workers-" + uuid.uuid4().hex,
        CELERY_QUEUE=f"bench-workers-{os.getpid()}",
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    if production:
        _fresh_postgres()
        _fresh_redis()
        env["DATABASE_URL"] = f"postgresql://postgres@{PG[0]}:{PG[1]}/{PG_DB}"
        env["REDIS_URL"] = f"redis://{REDIS[0]}:{REDIS[1]}/{REDIS_DB}"
    command = [sys.executable, __file__, "--child", str(concurrency), "--archives"]
    command += [str(work / "archives"), "--queue", env["CELERY_QUEUE"]]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"run with --concurrency {concurrency} failed:\n{result.stderr[-4000:]}"
            f"\n(worker log: {data_dir}/worker-{concurrency}.log)"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _default_work_dir() -> Path | None:
    """tmpfs when there is one: intake creates ~12,000 files a run, and on a shared VM disk
    the kernel's cost of creating one swings from 0.02 to 0.9 ms with the neighbours' I/O,
    which would make the bench process's intake, not the workers, the thing measured."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def _wait_quiet(limit: float = 15.0) -> None:
    """Wait, at most `limit` seconds, for a second in which the machine is nearly idle."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = _machine_cpu()
        time.sleep(1.0)
        if _machine_cpu() - before < QUIET_CORES:
            return


def run_detail(run: dict) -> tuple[str, str]:
    """A run's jobs ("kind N x mean s", ...) and CPU seconds by user, for its detail line."""
    jobs = ", ".join(
        f"{kind} {count} x {total / count:.2f} s"
        for kind, (count, total) in sorted(run["jobs"].items())
    )
    return jobs, ", ".join(f"{k} {v:.1f}" for k, v in run["cpu"].items())


def _describe(concurrency: int, run: dict) -> None:
    """One run's detail on stderr: wall, job durations, and who used the CPU."""
    jobs, cpu = run_detail(run)
    busy = sum(total for _, total in run["jobs"].values())
    print(
        f"  concurrency {concurrency}: wall {run['wall']:.1f} s (intake in the bench process "
        f"{run['intake']:.1f} s); jobs {jobs}; job time/wall {busy / run['wall']:.2f}; "
        f"cpu seconds: {cpu}",
        file=sys.stderr,
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--files", type=int, default=300, help="cassettes per submission")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, best kept")
    parser.add_argument("--sqlite", action="store_true", help="the embedded default backend")
    parser.add_argument(
        "--work-dir", type=Path, default=_default_work_dir(), help="DATA_DIR's parent"
    )
    parser.add_argument("--settings", default="reviewer.settings", help="settings module")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--archives", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(_run(args.archives, args.child, args.queue)))
        return 0

    production = not args.sqlite and _up(PG) and _up(REDIS)
    backend = "PostgreSQL + Redis" if production else "SQLite + filesystem broker (embedded)"
    work = Path(tempfile.mkdtemp(prefix="bench-workers-", dir=args.work_dir))
    try:
        (work / "archives").mkdir()
        for i in range(args.submissions):
            data = make_archive(i, args.files)
            (work / "archives" / f"cand{i:03d}.tar.gz").write_bytes(data)
        # Interleaved repeats, best of each: a neighbour's burst of CPU hits one run, not all.
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(args.repeat):
            for n in (1, 2):
                _wait_quiet()
                run = _child(args, n, production, work)
                runs[n].append(run)
                _describe(n, run)
        best = {n: min(rs, key=lambda r: r["wall"]) for n, rs in runs.items()}
        per_min = {n: args.submissions / run["wall"] * 60 for n, run in best.items()}
        ratio = per_min[2] / per_min[1]
        # Cores other processes took: a busy 1-worker run inflates the ratio, a busy 2-worker
        # run deflates it. OK is only claimed when the 1-worker run was quiet.
        others = {n: run["cpu"]["others"] / run["wall"] for n, run in best.items()}
        noisy = ""
        if max(others.values()) > QUIET_CORES:
            noisy = (
                f"; NOISY: other processes used {others[1]:.1f} / {others[2]:.1f} of "
                f"{os.cpu_count()} cores during the 1- / 2-worker runs"
            )
        return emit(
            Row(
                what=(
                    f"{args.submissions} submissions x {args.files} cassettes, "
                    f"intake + analysis, {backend}, prefork worker --concurrency 2 vs 1{noisy}"
                ),
                ours=f"2 workers {per_min[2]:.1f}/min ({best[2]['wall']:.1f} s)",
                baseline=f"1 worker {per_min[1]:.1f}/min ({best[1]['wall']:.1f} s)",
                ratio=f"{ratio:.2f}x",
                target=f">= {TARGET}x",
                ok=ratio >= TARGET and others[1] <= QUIET_CORES,
            )
        )
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
