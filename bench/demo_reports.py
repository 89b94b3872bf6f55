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


def write_reports(out: Path) -> list[Path]:
    """Seed, analyse and write each demo submission's masked report; return the files."""
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
    while job := Job.objects.filter(state=Job.State.QUEUED, kind__in=kinds).order_by("pk").first():
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
    return files


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


def compare(new: Path, old: Path) -> int:
    """0 when every report in `old` is byte-identical in `new`; else print the diffs."""
    differ = 0
    names = sorted({p.name for p in old.iterdir()} | {p.name for p in new.iterdir()})
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
    args = parser.parse_args()
    files = write_reports(args.out)
    print(f"wrote {len(files)} reports to {args.out}")
    return compare(args.out, args.compare) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
