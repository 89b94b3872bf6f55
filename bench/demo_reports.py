"""The demo cohort's report JSON, for checking that a speed-up changed no output.

Seeds the demo cohort into a fresh SQLite DATA_DIR, runs every submission's analysis (intake
and analysis only: replays need the sandbox and measure time), and writes each
`manage.py report ID --format json` text to OUT/<assignment>--<candidate>.json and each
`manage.py cohort SLUG --format json` (the agreement and calibration figures) to
OUT/cohort--<slug>.json.
Compare two runs (before and after a change) with `--compare`:

    .venv/bin/python bench/demo_reports.py /tmp/before
    (change the code)
    .venv/bin/python bench/demo_reports.py /tmp/after --compare /tmp/before

It also writes stored-rows.txt: every row the analysis stored, so a change in what is
written (not only in what the report shows) is caught too.

Fields that differ between any two runs by construction (wall-clock times written when a
row is made, job timings, the submission and job ids are the same in a fresh database) are
masked with "<time>" before writing; everything else must be byte-identical.

With `--replays` every job runs, the sandboxed ones too (replay, trace verification, the
service probe; bwrap needed), and verdicts.txt lists each check's id, status and summary and
its evidence messages, durations, clock times and addresses masked. A sandboxed run's output
and timings differ between any two runs, so `--replays --compare` compares verdicts.txt and
stored-rows.txt only: a change to the sandbox or the replay must leave both identical.
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# An ISO-8601 time with seconds (what DateTimeFields serialise to) and job durations.
_TIME = re.compile(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"')
_DURATION = re.compile(r'("(?:duration_s|duration_ms|seconds|elapsed_ms)": )[0-9.]+')


def _mask(text: str) -> str:
    text = _TIME.sub('"<time>"', text)
    return _DURATION.sub(r"\1<time>", text)


def write_reports(out: Path, *, replays: bool = False) -> list[Path]:
    """Seed, analyse and write each demo submission's masked report; return the files.

    With `replays`, every queued job runs (replay, trace, probe: the sandbox's checks too).
    """
    data_dir = Path(tempfile.mkdtemp(prefix="demo-reports-"))
    os.environ["DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "reviewer.settings"
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from reviewer.ops.demo import demo_seed
    from submissions.jobs.engine import job_execute
    from submissions.models import Job, Submission

    call_command("migrate", verbosity=0)
    demo_seed()
    # Analysis (and intake, if queued) only: the jobs whose outputs are ours to keep.
    kinds = [Job.Kind.INTAKE, Job.Kind.ANALYSIS]
    queued = Job.objects.filter(state=Job.State.QUEUED)
    if not replays:
        queued = queued.filter(kind__in=kinds)
    while job := queued.order_by("pk").first():
        job_execute(job_id=job.pk)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for submission in Submission.objects.order_by("pk").select_related("assignment", "candidate"):
        buffer = io.StringIO()
        call_command("report", submission.pk, format="json", stdout=buffer)
        name = f"{submission.assignment.slug}--{submission.candidate.name}".replace(" ", "_")
        path = out / f"{name}.json"
        path.write_text(_mask(buffer.getvalue()), encoding="utf-8")
        files.append(path)
    from submissions.models import Assignment

    for assignment in Assignment.objects.order_by("slug"):
        buffer = io.StringIO()
        call_command("cohort", assignment.slug, format="json", stdout=buffer)
        path = out / f"cohort--{assignment.slug}.json"
        path.write_text(_mask(buffer.getvalue()), encoding="utf-8")
        files.append(path)
    files.append(_rows(out / "stored-rows.txt"))
    if replays:
        files.append(_verdicts(out / "verdicts.txt"))
    return files


# What differs between two sandboxed runs of one suite by construction: durations and clock
# times in summaries and evidence, the slot's uid, interpreter addresses in test output.
_VOLATILE = re.compile(
    r"\d+(\.\d+)? ?(s|ms|seconds)\b|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[.0-9]*(\+00:00|Z)?"
    r"|\d\d/\w{3}/\d{4} \d\d:\d\d:\d\d|0x[0-9a-f]{6,}"
)


def _verdicts(path: Path) -> Path:
    """Each check of each submission: id, status and summary (volatile parts masked), and
    each evidence item's message: what a sandboxed run decided, comparable across runs."""
    from submissions.models import CheckResult

    with path.open("w", encoding="utf-8") as handle:
        rows = CheckResult.objects.order_by("submission_id", "check_id", "pk")
        for row in rows.select_related("submission__candidate"):
            summary = _VOLATILE.sub("<t>", row.summary)
            handle.write(
                f"{row.submission.candidate.name} {row.check_id} {row.status}: {summary}\n"
            )
            for item in row.evidence or []:
                if isinstance(item, dict) and item.get("message"):
                    handle.write(f"    {_VOLATILE.sub('<t>', str(item['message']))}\n")
    return path


def _rows(path: Path) -> Path:
    """Every row the analysis stored (recordings, interactions, trace rows, turns, blobs,
    findings, response ids), in id order, times masked: the pages read these."""
    from django.db import models

    from submissions.models import (
        Blob,
        Finding,
        Interaction,
        Recording,
        ResponseId,
        TraceRow,
        Turn,
    )

    with path.open("w", encoding="utf-8") as handle:
        for model in (Recording, Interaction, TraceRow, Turn, Blob, Finding, ResponseId):
            stamped = {
                f.attname
                for f in model._meta.concrete_fields
                if isinstance(f, models.DateTimeField) and (f.auto_now or f.auto_now_add)
            }
            handle.write(f"# {model.__name__}\n")
            for row in model.objects.order_by("pk").values():
                kept = {k: v for k, v in row.items() if k not in stamped}
                handle.write(repr(sorted(kept.items())) + "\n")
    return path


def compare(new: Path, old: Path, only: set[str] | None = None) -> int:
    """0 when every report in `old` is byte-identical in `new` (those named in `only`, when
    given); else print the diffs."""
    differ = 0
    names = sorted({p.name for p in old.iterdir()} | {p.name for p in new.iterdir()})
    if only is not None:
        names = [name for name in names if name in only]
    for name in names:
        a, b = old / name, new / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {'new' if b.exists() else 'old'}")
            differ += 1
            continue
        if a.read_bytes() != b.read_bytes():
            differ += 1
            diff = difflib.unified_diff(
                a.read_text().splitlines(), b.read_text().splitlines(), str(a), str(b), lineterm=""
            )
            print("\n".join(list(diff)[:60]))
    print(f"{len(names) - differ} of {len(names)} reports identical")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, help="a folder an earlier run wrote")
    parser.add_argument(
        "--replays",
        action="store_true",
        help="run every job, the sandboxed ones too (replay, trace, probe: needs bwrap)",
    )
    args = parser.parse_args()
    files = write_reports(args.out, replays=args.replays)
    print(f"wrote {len(files)} reports to {args.out}")
    if not args.compare:
        return 0
    # After sandboxed runs the reports carry each run's output and timings: what must stay
    # the same is every check's verdict and every stored row.
    only = {"verdicts.txt", "stored-rows.txt"} if args.replays else None
    return compare(args.out, args.compare, only)


if __name__ == "__main__":
    sys.exit(main())
