"""The comparison and submission pages under gunicorn and wrk, against a trivial Django view.

Data: one assignment with 1,000 candidates, each with a submission that 3 reviewers scored on
every rubric row (submitted reviews); the first submission also holds 10,000 recordings,
100,000 trace rows, turns, interactions, checks and findings. A second assignment holds the
same at a tenth of the rows.

Baselines, in the same run: a view returning "ok" under the same gunicorn (2 sync workers,
DEBUG off, the same middleware), loaded by the same wrk with the same connections and
cookies; and a peer users already accept, Django's admin change list of submissions (100 a
page, logged in as a superuser). A typical hand-in is the demo cohort's first cassette
hand-in, ingested and analysed by the real jobs.

Targets (issue #32): against the trivial view >= 0.3x per page, no non-2xx response, the same
number of queries at both data sizes; against the admin's change list, the typical
hand-in's submission page >= 1x cold (the fragment cache off, every request renders) and
the submission page at 10,000 recordings >= 0.5x, the comparison at 1,000 candidates >= 1x;
and no first view (in a fresh process, caches cleared) over 3x the same page's warm view,
calibration's included. The comparison's landing table is kept in the database by the
worker after each change (reviewer/cohort/table_cache.py); the seed writes in bulk, past
the signals that queue that upkeep, so the bench runs it once before the first views and
prints what it took.

PostgreSQL (a database of its own, dropped at the end) when 127.0.0.1:5432 answers, else
SQLite in a temporary DATA_DIR.

    .venv/bin/python bench/bench_pages.py [--duration 10] [--connections 8]
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402

SETTINGS = "bench.pages_settings"
PG_HOST, PG_PORT = "127.0.0.1", 5432
TARGET = 0.3
# Against the admin's change list (issue #32), and first view against warm view.
ADMIN_TARGETS = {"typical_cold": 1.0, "submission": 0.5, "comparison": 1.0}
FIRST_VIEW_TARGET = 3.0
WARM_VIEWS = 5
BIG = {"candidates": 1000, "recordings": 10_000, "trace_rows": 100_000}
REVIEWS_EACH = 3
# wrk: count every response that is not a 200 (wrk itself leaves 3xx out of its error count).
WRK_SCRIPT = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body) if status ~= 200 then bad = bad + 1 end end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("bad") end
  io.write(string.format("NOT200 %d\\n", total))
end
"""


@dataclass
class Cohort:
    slug: str
    submission_id: int
    candidate: str
    recordings: int
    trace_rows: int


def _postgres_up() -> bool:
    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=1).close()
        return True
    except OSError:
        return False


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(sql)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(data_dir: Path, database_url: str, settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": settings,
            "DATA_DIR": str(data_dir),
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "LOG_LEVEL": "WARNING",
        }
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def seed(*, slug: str, candidates: int, recordings: int, trace_rows: int) -> Cohort:
    """One assignment's cohort, scored by every reviewer; its first submission is the big one."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from reviewer.models import Note, Review, RubricTemplate, Score
    from submissions.assignments import assignment_apply, assignment_values
    from submissions.models import (
        Blob,
        Candidate,
        CheckResult,
        Finding,
        Interaction,
        Job,
        Recording,
        Submission,
        TraceRow,
        Turn,
    )

    rng = random.Random(slug)
    now = timezone.now()
    batch = 2000
    assignment = assignment_apply(
        values=assignment_values(
            {
                "slug": slug,
                "title": f"Bench {slug}",
                "replay_command": "",
                "expected_model": "claude-sonnet-4-20250514",
            }
        )
    )[0]
    rubric = RubricTemplate.objects.get(slug=assignment.rubric)
    rows = list(rubric.rows.all())
    reviewers = list(User.objects.filter(username__startswith="bench-reviewer").order_by("pk"))
    people = Candidate.objects.bulk_create(
        [Candidate(name=f"{slug} candidate {i:04d}") for i in range(candidates)]
    )
    subs = Submission.objects.bulk_create(
        [
            Submission(
                candidate=c,
                assignment=assignment,
                archive=f"archives/bench/{slug}-{i}.zip",
                archive_name=f"{slug}-{i}.zip",
                archive_sha256=f"{i:064x}",
                archive_size=10_000 + i,
                archive_format="zip",
                file_count=40,
                status=Submission.Status.READY,
            )
            for i, c in enumerate(people)
        ],
        batch_size=batch,
    )
    through = Submission.reviewers.through
    through.objects.bulk_create(
        [through(submission_id=s.pk, user_id=r.pk) for s in subs for r in reviewers],
        batch_size=batch,
    )
    reviews = Review.objects.bulk_create(
        [
            Review(
                submission=s,
                reviewer=r,
                rubric=rubric,
                state=Review.State.SUBMITTED,
                submitted_at=now,
            )
            for s in subs
            for r in reviewers
        ],
        batch_size=batch,
    )
    scores = []
    for review in reviews:
        for row in rows:
            # The first candidate tops the comparison: its name proves the page rendered.
            value = 3 if review.submission is subs[0] else rng.randint(0, 3)
            scores.append(
                Score(
                    review=review,
                    row=row,
                    value=value,
                    evidence=f"checked {row.title.lower()}",
                    override_reason="reproduced by hand" if value == 3 else "",
                    version=1,
                )
            )
    Score.objects.bulk_create(scores, batch_size=batch)
    statuses = ["pass", "pass", "pass", "fail", "warn", "skip", "error"]
    check_ids = sorted({cid for row in rows for cid in row.check_ids})
    CheckResult.objects.bulk_create(
        [
            CheckResult(
                submission=s,
                check_id=cid,
                status=rng.choice(statuses),
                summary=f"{cid} summary",
            )
            for s in subs[1:]
            for cid in check_ids
        ],
        batch_size=batch,
    )

    big = subs[0]
    bodies = [f'{{"slug": "{slug}", "body": {i}}}'.encode() * 10 for i in range(20)]
    blobs = Blob.objects.bulk_create(
        [Blob(sha256=hashlib.sha256(b).hexdigest(), size=len(b), data=b) for b in bodies]
    )
    cutoff = big.created - timedelta(days=assignment.stale_after_days)
    trace_files = max(1, recordings // 1000)
    recs = Recording.objects.bulk_create(
        [
            Recording(
                submission=big,
                path=(f"traces/{i:05d}.jsonl" if i < trace_files else f"cassettes/{i:05d}.json"),
                role=Recording.Role.TRACE if i < trace_files else Recording.Role.RECORDING,
                format="trace_jsonl" if i < trace_files else "cassette_json",
                key=f"{i:016x}",
                model=rng.choice(["claude-sonnet-4-20250514", "gpt-4o", ""]),
                recorded_at=rng.choice([None, cutoff - timedelta(days=3), now]),
                size=2000,
                sha256=f"{i:064x}",
                interaction_count=1,
                turn_count=1,
                used=rng.choice([True, False, None]),
            )
            for i in range(recordings)
        ],
        batch_size=batch,
    )
    Interaction.objects.bulk_create(
        [
            Interaction(
                recording=r,
                index=0,
                method="POST",
                url="https://api.example.com/v1/messages",
                status=200,
                request_headers=[["content-type", "application/json"]],
                response_headers=[["content-type", "application/json"]],
                request_blob=blobs[i % len(blobs)],
                response_blob=blobs[(i + 1) % len(blobs)],
                duration_ms=120.0,
            )
            for i, r in enumerate(recs[trace_files:])
        ],
        batch_size=batch,
    )
    Turn.objects.bulk_create(
        [
            Turn(
                submission=big,
                thread=i // 10,
                index=i % 10,
                recording=recs[trace_files + i],
                model="claude-sonnet-4-20250514",
                new_messages=[
                    {
                        "role": "user",
                        "text": f"turn {i}: " + "please triage this ticket " * 10,
                        "tool_calls": [],
                        "tool_results": [{"content": "order ord_1 found"}],
                    }
                ],
                response={
                    "role": "assistant",
                    "text": "I will look up the order. " * 10,
                    "tool_calls": [{"name": "get_order", "arguments": '{"id": "ord_1"}'}],
                },
            )
            for i in range((recordings - trace_files) // 2)
        ],
        batch_size=batch,
    )
    per_file = trace_rows // trace_files
    TraceRow.objects.bulk_create(
        [
            TraceRow(
                submission=big,
                recording=recs[i // per_file],
                line=i % per_file + 1,
                url=f"http://stub.local/orders/ord_{i:x}",
                method=rng.choice(["GET", "POST"]),
                status=rng.choice([200, 201, 409]),
                trace_id=f"tr-{i:08x}",
                idempotency_key=rng.choice(["", f"idem-{i}"]),
                verification=rng.choice(
                    [
                        None,
                        {"outcome": "match", "mode": "live", "differences": []},
                        {
                            "outcome": "mismatch",
                            "mode": "live",
                            "differences": [{"field": "status", "file": 200, "live": 404}],
                        },
                    ]
                ),
            )
            for i in range(per_file * trace_files)
        ],
        batch_size=batch,
    )
    evidence = [
        {"path": f"cassettes/{i:05d}.json", "line": i + 1, "message": f"item {i}"}
        for i in range(20)
    ]
    probe = [
        {
            "probe": name,
            "expected": expected,
            "ok": True,
            "request": {
                "method": "POST",
                "url": "http://stub.local/orders",
                "headers": {"Idempotency-Key": "k1"},
                "body": "{}",
            },
            "response": {"status": expected, "body": "{}"},
            "curl": "curl -X POST http://stub.local/orders",
        }
        for name, expected in (("first", 201), ("repeat", 200), ("conflict", 409))
    ]
    CheckResult.objects.bulk_create(
        [
            CheckResult(
                submission=big,
                check_id=cid,
                status=statuses[i % len(statuses)],
                summary=f"{cid}: {i} of 20 items",
                evidence=evidence,
            )
            for i, cid in enumerate(check_ids)
        ]
        + [
            CheckResult(
                submission=big,
                check_id="trace.idempotency_enforced",
                status="pass",
                summary="201, 200, 409",
                evidence=probe,
            )
        ]
    )
    Finding.objects.bulk_create(
        [
            Finding(
                submission=big,
                kind="orphan_recording",
                path=f"cassettes/{i:05d}.json",
                line=i,
                message="never read by the suite",
            )
            for i in range(recordings // 20)
        ],
        batch_size=batch,
    )
    Job.objects.bulk_create(
        [
            Job(
                submission=big,
                kind=kind,
                state=Job.State.PASSED,
                progress=100,
                attempts=1,
                log=f"{kind} log\n" * 50,
                started_at=now - timedelta(seconds=30),
                finished_at=now,
            )
            for kind in (Job.Kind.INTAKE, Job.Kind.ANALYSIS, Job.Kind.TRACE)
        ]
    )
    Note.objects.bulk_create(
        [
            Note(submission=big, author=r, row=row, body=f"**{r.username}**: see `{row.title}`")
            for r in reviewers
            for row in rows
        ]
    )
    return Cohort(
        slug=slug,
        submission_id=big.pk,
        candidate=people[0].name,
        recordings=recordings,
        trace_rows=per_file * trace_files,
    )


def users() -> Any:
    """Three reviewers and the hiring lead who opens both pages."""
    from django.contrib.auth.models import Group, User

    from submissions.roles import HIRING_LEADS, REVIEWERS

    group = Group.objects.get_or_create(name=REVIEWERS)[0]
    for i in range(REVIEWS_EACH):
        User.objects.create_user(f"bench-reviewer{i}").groups.add(group)
    lead = User.objects.create_user("bench-lead")
    lead.groups.add(Group.objects.get_or_create(name=HIRING_LEADS)[0])
    return lead


def typical() -> tuple[int, bytes]:
    """The demo cohort seeded and analysed by the real jobs (intake, analysis); the id and
    candidate name of its first cassette hand-in, a typical one."""
    from reviewer.ops.demo import demo_seed
    from submissions.jobs.engine import job_execute
    from submissions.models import Job, Submission

    demo_seed()
    kinds = [Job.Kind.INTAKE, Job.Kind.ANALYSIS]
    while job := Job.objects.filter(state=Job.State.QUEUED, kind__in=kinds).order_by("pk").first():
        job_execute(job_id=job.pk)
    # Replays and the rest would need the sandbox: they stay queued, as on a web host.
    sub = (
        Submission.objects.filter(
            assignment__shape="cassette", jobs__kind=Job.Kind.ANALYSIS, jobs__state=Job.State.PASSED
        )
        # The seeded cohorts are cassette hand-ins with a passed analysis too (rows made by
        # hand, the first with 10,000 recordings): the typical one is the demo's own.
        .exclude(assignment__slug__startswith="bench-")
        .select_related("candidate")
        .order_by("pk")
        .first()
    )
    if sub is None:
        raise SystemExit("no demo cassette hand-in was analysed")
    return sub.pk, sub.candidate.name.encode()


def urls(cohort: Cohort) -> dict[str, str]:
    from django.urls import reverse

    return {
        "comparison": reverse("comparison", args=[cohort.slug]),
        "submission": reverse("submission", args=[cohort.submission_id]),
    }


def expected(cohort: Cohort) -> dict[str, list[bytes]]:
    """Text each page must hold: proof it rendered the data, not a login form or an error."""
    return {
        "comparison": [cohort.candidate.encode(), b"<svg", b"Krippendorff's alpha (ordinal)"],
        "submission": [
            cohort.candidate.encode(),
            f"Recordings <small>{cohort.recordings}</small>".encode(),
            f"Trace hops <small>{cohort.trace_rows}</small>".encode(),
        ],
    }


def query_counts(client: Any, cohort: Cohort) -> dict[str, int]:
    """Queries of each page, after a warm-up request (the first creates the lead's review)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out = {}
    for name, url in urls(cohort).items():
        client.get(url, headers={"X-Forwarded-Proto": "https"})
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url, headers={"X-Forwarded-Proto": "https"})
        body = response.content
        missing = [t for t in expected(cohort)[name] if t not in body]
        if response.status_code != 200 or missing:
            raise SystemExit(f"{name} page: status {response.status_code}, missing {missing}")
        out[name] = len(ctx.captured_queries)
    return out


def fetch(port: int, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", url, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wrk(port: int, url: str, headers: dict[str, str], args: argparse.Namespace, script: Path):
    """Requests per second and the count of responses that were not 200."""
    command = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration}s"]
    command += ["--timeout", "30s"]  # a slow page is measured, not dropped as timeouts
    command += ["--latency", "-s", str(script)]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    command.append(f"http://127.0.0.1:{port}{url}")
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = int(re.search(r"NOT200 (\d+)", out).group(1))
    errors = re.search(r"Socket errors: (.*)", out)
    if errors:  # connect, read, write, timeout: a failed request is a failure too
        bad += sum(int(n) for n in re.findall(r"\d+", errors.group(1)))
    p50 = re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1)
    return rps, bad, p50


def serve(env: dict[str, str], workers: int, log: Path, headers: dict[str, str]):
    """gunicorn on a free port, once it answers; (process, port)."""
    port = _free_port()
    gunicorn = [str(ROOT / ".venv/bin/gunicorn"), "reviewer.wsgi", "-k", "sync"]
    gunicorn += ["-w", str(workers), "-b", f"127.0.0.1:{port}", "--timeout", "120"]
    server = subprocess.Popen(
        gunicorn, cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if fetch(port, "/bench/trivial/", headers)[0] == 200:
                return server, port
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise SystemExit("gunicorn did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.2)


def stop(server: subprocess.Popen | None) -> None:
    if server is None:
        return
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()


def first_and_warm(
    env: dict[str, str], log: Path, url: str, headers: dict[str, str], wanted: list[bytes]
) -> tuple[float, float]:
    """Seconds of a page's first view in a fresh one-worker process (the shared cache
    emptied first; the fragment cache is the process's own) and the median of the next
    WARM_VIEWS views."""
    from django.core.cache import cache

    cache.clear()
    server, port = serve(env, 1, log, headers)
    try:
        times = []
        for _ in range(1 + WARM_VIEWS):
            started = time.perf_counter()
            status, body = fetch(port, url, headers)
            times.append(time.perf_counter() - started)
            missing = [t for t in wanted if t not in body]
            if status != 200 or missing:
                raise SystemExit(f"{url}: status {status}, missing {missing}")
    finally:
        stop(server)
    warm = sorted(times[1:])[len(times[1:]) // 2]
    return times[0], warm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per URL")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--settings", default=SETTINGS, help="settings module (to measure a change before it lands)"
    )
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    database = f"bench_pages_{os.getpid()}" if _postgres_up() else ""
    if database:
        _pg_admin(f'CREATE DATABASE "{database}"')
        database_url = f"postgres://postgres@{PG_HOST}:{PG_PORT}/{database}"
        engine = "PostgreSQL"
    else:
        database_url, engine = "", "SQLite"
    env = _environment(data_dir, database_url, args.settings)
    os.environ.update(env)
    for name in ("DATABASE_URL", "REDIS_URL"):
        if name not in env:
            os.environ.pop(name, None)
    server = None
    log = data_dir / "gunicorn.log"
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections
        from django.test import Client

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        lead = users()
        small = {k: v // 10 for k, v in BIG.items()}
        cohorts = {"big": seed(slug="bench-big", **BIG), "small": seed(slug="bench-small", **small)}
        typical_id, typical_name = typical()
        from django.contrib.auth.models import User

        admin_user = User.objects.create_superuser("bench-admin", password=None)
        with connections["default"].cursor() as cursor:
            # Fresh statistics, as autovacuum would have gathered on a live database.
            cursor.execute("VACUUM ANALYZE" if database else "ANALYZE")
        print(f"# seeded {engine} in {time.perf_counter() - started:.1f} s", flush=True)
        client = Client()
        client.force_login(lead)
        queries = {size: query_counts(client, c) for size, c in cohorts.items()}
        headers = {
            "Cookie": f"sessionid={client.cookies['sessionid'].value}",
            "X-Forwarded-Proto": "https",
        }
        admin_client = Client()
        admin_client.force_login(admin_user)
        admin_headers = {
            "Cookie": f"sessionid={admin_client.cookies['sessionid'].value}",
            "X-Forwarded-Proto": "https",
        }
        from django.urls import reverse

        typical_url = reverse("submission", args=[typical_id])
        targets = {
            "trivial": "/bench/trivial/",
            "admin": reverse("admin:submissions_submission_changelist"),
            "typical": typical_url,
            **urls(cohorts["big"]),
            "calibration": reverse("calibration", args=[cohorts["big"].slug]),
        }
        wanted = {
            "trivial": [b"ok"],
            "admin": [b'id="result_list"', b"candidate"],
            "typical": [typical_name],
            **expected(cohorts["big"]),
            "calibration": [b"Krippendorff"],
        }
        page_headers = {name: admin_headers if name == "admin" else headers for name in targets}

        def warm_up(port: int, names: list[str]) -> None:
            for name in names:
                for _ in range(2 * args.workers):  # every worker renders each page once first
                    status, body = fetch(port, targets[name], page_headers[name])
                    missing = [t for t in wanted[name] if t not in body]
                    if status != 200 or missing:
                        raise SystemExit(f"{name} {targets[name]}: status {status}, {missing}")

        # The seed wrote its rows in bulk, past the signals that queue the comparison
        # table's upkeep: store the tables as the worker does after a change
        # (reviewer/cohort/table_cache.py), and say what that costs it.
        from reviewer.cohort.table_cache import table_store
        from submissions.models import Assignment

        started = time.perf_counter()
        for cohort in cohorts.values():
            if not table_store(Assignment.objects.get(slug=cohort.slug).pk):
                raise SystemExit(f"the comparison table of {cohort.slug} was not stored")
        upkeep = time.perf_counter() - started
        print(f"# comparison tables stored by the upkeep in {upkeep:.1f} s", flush=True)
        # First views, each in a fresh process, before anything else warms the database.
        firsts = {
            name: first_and_warm(env, log, targets[name], page_headers[name], wanted[name])
            for name in ("typical", "submission", "comparison", "calibration")
        }
        connections.close_all()
        script = data_dir / "count.lua"
        script.write_text(WRK_SCRIPT)
        server, port = serve(env, args.workers, log, headers)
        warm_up(port, list(targets))
        results = {
            name: wrk(port, url, page_headers[name], args, script) for name, url in targets.items()
        }
        stop(server)
        server = None
        # The typical hand-in's page cold: the fragment cache off, so every request renders.
        cold_env = {**env, "DJANGO_SETTINGS_MODULE": "bench.pages_settings_cold"}
        server, port = serve(cold_env, args.workers, log, headers)
        warm_up(port, ["typical"])
        results["typical_cold"] = wrk(port, typical_url, headers, args, script)
    finally:
        stop(server)
        if "django.db" in sys.modules:
            from django.db import connections

            connections.close_all()
        if database:
            _pg_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        shutil.rmtree(data_dir, ignore_errors=True)

    load = "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(f"# {load}", flush=True)
    base_rps, base_bad, base_p50 = results["trivial"]
    what = {
        "comparison": f"comparison page, {BIG['candidates']:,} candidates x {REVIEWS_EACH} reviews",
        "submission": (
            f"submission page, {BIG['recordings']:,} recordings + {BIG['trace_rows']:,} trace rows"
        ),
    }
    code = 0
    for name in ("comparison", "submission"):
        rps, bad, p50 = results[name]
        ratio = rps / base_rps
        big, small = queries["big"][name], queries["small"][name]
        ok = ratio >= TARGET and big == small and bad == 0 and base_bad == 0
        code |= emit(
            Row(
                what=f"{what[name]} ({engine}, gunicorn {args.workers} sync, wrk "
                f"-c{args.connections})",
                ours=f"{rps:.1f} req/s (p50 {p50}), {big} queries ({small} at 1/10 rows)"
                + (f", {bad} not 200" if bad else ""),
                baseline=f"trivial view {base_rps:.0f} req/s (p50 {base_p50})"
                + (f", {base_bad} not 200" if base_bad else ""),
                ratio=f"{ratio:.3f}x",
                target=f">= {TARGET}x, same queries at 1/10 rows",
                ok=ok,
            )
        )
    admin_rps, admin_bad, admin_p50 = results["admin"]
    what.update(
        {
            "typical_cold": "submission page of a typical hand-in, cold (fragment cache off)",
            "typical": "submission page of a typical hand-in, warm",
        }
    )
    for name in ("typical_cold", "typical", "submission", "comparison"):
        rps, bad, p50 = results[name]
        ratio = rps / admin_rps
        target = ADMIN_TARGETS.get(name)
        code |= emit(
            Row(
                what=f"{what[name]} ({engine}, {load})",
                ours=f"{rps:.1f} req/s (p50 {p50})" + (f", {bad} not 200" if bad else ""),
                baseline=f"admin change list, 100 submissions a page, {admin_rps:.1f} req/s "
                f"(p50 {admin_p50})" + (f", {admin_bad} not 200" if admin_bad else ""),
                ratio=f"{ratio:.2f}x",
                target=f">= {target}x" if target else "none (shown for reference)",
                ok=(target is None or ratio >= target) and bad == 0 and admin_bad == 0,
            )
        )
    what["calibration"] = "calibration of the 1,000-candidate assignment"
    what["typical"] = "submission page of a typical hand-in"
    for name, (first, warm) in firsts.items():
        ratio = first / warm
        code |= emit(
            Row(
                what=f"first view: {what[name]} (fresh process, caches cleared; {load})",
                ours=f"first {first * 1000:.0f} ms",
                baseline=f"warm view {warm * 1000:.0f} ms (median of {WARM_VIEWS})",
                ratio=f"{ratio:.2f}x",
                target=f"<= {FIRST_VIEW_TARGET}x",
                ok=ratio <= FIRST_VIEW_TARGET,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
