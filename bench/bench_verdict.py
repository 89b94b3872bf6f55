"""Time to verdict: each demo hand-in from upload to its last job's end, through a real worker.

Ours, per demo hand-in (every shape): the archive handed to `submission_create` as the upload
form does, a real Celery worker (two processes as `make worker`, SQLite and the filesystem
broker in a fresh DATA_DIR) running every job it queues; measured from the upload to the end
of the last job.
Where the time went comes from the Job rows: each job's wait in the queue (enqueued to
started) and its run (started to finished).

Baseline, in the same run, for the same hand-in: its bare minimum, the assignment's replay
command run three times directly (no sandbox, no uid drop) in a copy of its tree with the
sandbox runtime's interpreter first on PATH, plus its dependency install from a warm cache
(none of the demo hand-ins declares dependencies, so that part is zero and said so).

Target (issue #32): ours <= 1.3x the bare minimum for every shape. A hand-in whose bare run
fails is skipped, with the reason: its minimum is not known.

    .venv/bin/python bench/bench_verdict.py [--only cassette-good ...] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402

TARGET = 1.3
BARE_RUNS = 3
DEMO = ROOT / "demo"
WORKER_ARGS = ["-A", "reviewer", "worker"]


def _environment(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "reviewer.settings",
            "DATA_DIR": str(data_dir),
            "SECRET_KEY": secrets.token_urlsafe(50),
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


def bare(repo: Path, command: str, runtime: Path, tmp: Path) -> tuple[float, int, str]:
    """Seconds of BARE_RUNS runs of `command` in a copy of `repo` (the copy included); the
    first non-zero exit code (0 when all passed) and its output's tail."""
    started = time.perf_counter()
    copy = tmp / f"bare-{repo.name}"
    shutil.copytree(repo, copy)
    env = {
        "PATH": f"{runtime}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    try:
        for _ in range(BARE_RUNS):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=copy,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            if done.returncode != 0:
                return time.perf_counter() - started, done.returncode, done.stdout[-300:]
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return time.perf_counter() - started, 0, ""


def ours(entry: dict[str, Any], timeout: float) -> tuple[float, list[Any]]:
    """Seconds from the upload to the last job's end, and the submission's jobs."""
    from django.utils import timezone

    from reviewer.ops.demo import zip_tree
    from submissions.intake.upload import submission_create
    from submissions.jobs.inline import JobsPending, jobs_wait
    from submissions.models import Assignment, Candidate

    repo = DEMO / "repos" / entry["repo"]
    data = zip_tree(repo, f"{entry['repo']}-main")
    assignment = Assignment.objects.get(slug=entry["assignment"])
    candidate, _ = Candidate.objects.get_or_create(name=entry["candidate"])
    uploaded = timezone.now()
    result = submission_create(
        upload=io.BytesIO(data),
        filename=f"{entry['repo']}-main.zip",
        candidate=candidate,
        assignment=assignment,
        stub_url=entry.get("stub_url", ""),
    )
    try:
        jobs_wait(submission=result.submission, timeout=timeout, poll=0.05)
    except JobsPending:
        _pending_report(result.submission)
        raise
    jobs = list(result.submission.jobs.order_by("pk"))
    last = max(j.finished_at for j in jobs if j.finished_at)
    return (last - uploaded).total_seconds(), jobs


def _pending_report(submission: Any) -> None:
    """What a timed-out hand-in's jobs were doing, and which workers last beat (stderr)."""
    from submissions.models import WorkerBeat

    for job in submission.jobs.order_by("pk"):
        print(
            f"# pending? job {job.pk} {job.kind}: {job.state}, attempt {job.attempts}/"
            f"{job.max_attempts}, runner {job.runner or '-'}, enqueued {job.enqueued_at}, "
            f"started {job.started_at}, heartbeat {job.heartbeat_at}, "
            f"enqueue error {job.enqueue_error or '-'}; log tail {job.log[-300:]!r}",
            file=sys.stderr,
            flush=True,
        )
    for beat in WorkerBeat.objects.order_by("pid"):
        print(
            f"# worker {beat.host}:{beat.pid} seen {beat.seen}, children {beat.children}",
            file=sys.stderr,
            flush=True,
        )


def _worker_log_keep(log: Path) -> None:
    """Copy a failed run's worker log out of the run's directory (removed at the end), and
    print its tail."""
    kept = Path(tempfile.gettempdir()) / f"bench-verdict-worker-{os.getpid()}.log"
    try:
        shutil.copyfile(log, kept)
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    except OSError as exc:
        print(f"# worker log {log} unreadable: {exc}", file=sys.stderr, flush=True)
        return
    print(f"# worker log kept in {kept}; its tail:", file=sys.stderr, flush=True)
    for line in tail:
        print(f"#   {line}", file=sys.stderr, flush=True)


def breakdown(jobs: list[Any]) -> str:
    """Each job's queue wait and run, in the order they were made."""
    parts = []
    for job in jobs:
        queued = job.enqueued_at or job.created
        wait = (job.started_at - queued).total_seconds() if job.started_at else 0.0
        run = (job.finished_at - job.started_at).total_seconds() if job.finished_at else 0.0
        parts.append(f"{job.kind} {job.state} wait {wait:.2f} s run {run:.2f} s")
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="demo repositories to measure (default: all)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=2,
        help="worker processes (default 2, as `make worker`; 1 runs a hand-in's jobs in turn)",
    )
    parser.add_argument(
        "--worker-log-level", default="warning", help="the worker's -l (default warning)"
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=0,
        help="on a failure, leave the worker running this many seconds before stopping it "
        "(to inspect it: py-spy dump --pid PID)",
    )
    args = parser.parse_args()

    entries = yaml.safe_load((DEMO / "candidates.yaml").read_text(encoding="utf-8"))
    if args.only:
        entries = [e for e in entries if e["repo"] in args.only]
    tmp = Path(tempfile.mkdtemp(prefix="bench-verdict-"))
    env = _environment(tmp / "data")
    os.environ.update(env)
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    worker = None
    code = 0
    failed = True
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from submissions import sandbox
        from submissions.assignments import assignment_apply, load_assignment_file

        runtime = sandbox.DEFAULT_RUNTIME
        problems = sandbox.self_check(runtime=runtime, slots=[0])
        if problems:
            print("skip: the sandbox is unavailable: " + "; ".join(problems), file=sys.stderr)
            return 2
        call_command("migrate", verbosity=0)
        commands = {}
        for path in sorted((DEMO / "assignments").glob("*.yaml")):
            assignment = assignment_apply(values=load_assignment_file(path))[0]
            commands[assignment.slug] = assignment.replay_command
        # The bare runs first, while nothing else of ours runs (the worker's start would
        # share the cores with them).
        bares = {
            e["repo"]: bare(DEMO / "repos" / e["repo"], commands[e["assignment"]], runtime, tmp)
            for e in entries
        }
        log = (tmp / "worker.log").open("w")
        worker = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/celery"),
                *WORKER_ARGS,
                *("-l", args.worker_log_level, "--concurrency", str(args.concurrency)),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        time.sleep(5)  # the worker's start (its reconciler publishes nothing: no jobs yet)
        for entry in entries:
            bare_s, exit_code, tail = bares[entry["repo"]]
            ours_s, jobs = ours(entry, args.timeout)
            load = "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
            what = f"time to verdict, {entry['repo']} ({entry['assignment']}; {load})"
            print(f"# {entry['repo']}: {breakdown(jobs)}", flush=True)
            if exit_code != 0:
                print(
                    f"{what} | SKIP: its bare run exited {exit_code}, so its minimum is "
                    f"unknown (ours {ours_s:.2f} s); output tail: {tail!r}",
                    flush=True,
                )
                code |= 2
                continue
            ratio = ours_s / bare_s
            code |= emit(
                Row(
                    what=what,
                    ours=f"{ours_s:.2f} s upload to last job",
                    baseline=f"bare minimum {bare_s:.2f} s ({BARE_RUNS} runs in a copy; "
                    "no dependencies declared)",
                    ratio=f"{ratio:.2f}x",
                    target=f"<= {TARGET}x",
                    ok=ratio <= TARGET and all(j.state == "passed" for j in jobs),
                )
            )
        failed = False
    finally:
        if failed and worker is not None:
            # Still running: its pool processes can be inspected (py-spy dump --pid).
            print(
                f"# worker pid {worker.pid} (its process group); stopped in {args.hold:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            _worker_log_keep(tmp / "worker.log")
            time.sleep(args.hold)
        if worker is not None:
            os.killpg(worker.pid, 15)
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, 9)
        shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
