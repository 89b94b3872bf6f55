"""Adding one hand-in to a cohort of 1,000, against comparing the whole cohort again.

A cohort of `--cohort` hand-ins (default 1,000) is stored as the analysis stores it: each
hand-in's source files fingerprinted (`cassettes_app.analysis.sources.text_fingerprints`)
as SourceFingerprint rows. The hand-ins are written from a pool of generated functions,
each taking its own few dozen; a few pairs are planted copies (one re-typed from another
with every name changed). Also stored: a sample module every hand-in carries (starter
code the cohort-share rule sets aside).

Baseline, in the same run: the all-pairs comparison of the same cohort, judged from
scratch: every hand-in's `cohort.code_similarity` judgment again (what a system with no
incremental index would do when a hand-in arrives). Ours: the incremental path when the
last hand-in arrives (`cohort_code_similarity`: its own judgment, one indexed query, and
the hand-ins it matched judged again). Target: ours ≤ 0.05× the baseline's time, and the
lead's page (`reviewer.cohort.similarity.similar_pairs`) ranks the same top 10 pairs as
the from-scratch comparison.

    .venv/bin/python bench/bench_similarity.py [--cohort 1000]
"""

from __future__ import annotations

import argparse
import keyword
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402

FUNCTIONS = 4000  # the pool hand-ins take their functions from
PER_HAND_IN = 10  # functions of its own per hand-in (two files), ~400 fingerprints
SAMPLE_FUNCTIONS = 3  # the brief's sample module every hand-in carries
COPIES = 12  # planted re-typed copies


_OPS = ["+", "-", "*", "/", "%", "//", "<<", ">>", "&", "|", "^", "**"]
_CMP = ["<", ">", "<=", ">=", "==", "!=", "in", "not in", "is"]


def _expr(rng: random.Random, names: list[str], depth: int = 0) -> str:
    """A random expression: the token shapes of real code vary, so must these."""
    kind = rng.randrange(7 if depth < 3 else 2)
    if kind == 0:
        return rng.choice(names)
    if kind == 1:
        return str(rng.randrange(1000))
    if kind == 2:
        left, right = _expr(rng, names, depth + 1), _expr(rng, names, depth + 1)
        return f"({left} {rng.choice(_OPS)} {right})"
    if kind == 3:
        args = ", ".join(_expr(rng, names, depth + 1) for _ in range(rng.randrange(4)))
        return f"{rng.choice(names)}({args})"
    if kind == 4:
        return f"{rng.choice(names)}.{rng.choice(names)}[{_expr(rng, names, depth + 1)}]"
    if kind == 5:
        return f"[{_expr(rng, names, depth + 1)} for {rng.choice(names)} in {rng.choice(names)}]"
    return f"{{{_expr(rng, names, depth + 1)}: {_expr(rng, names, depth + 1)}}}"


def _function(rng: random.Random, n: int, names: list[str]) -> str:
    """One generated function of varied statements."""
    lines = [f"def f{n}({', '.join(rng.sample(names, rng.randrange(1, 4)))}):"]
    for _ in range(rng.randrange(5, 10)):
        name, expr = rng.choice(names), _expr(rng, names)
        shape = rng.randrange(6)
        if shape == 0:
            lines.append(f"    {name} = {expr}")
        elif shape == 1:
            test = f"{_expr(rng, names, 2)} {rng.choice(_CMP)} {_expr(rng, names, 2)}"
            lines.append(f"    if {test}:\n        {name} = {expr}")
        elif shape == 2:
            lines.append(f"    for {name} in {expr}:\n        yield {name}")
        elif shape == 3:
            lines.append(f"    try:\n        {name} += {expr}\n    except KeyError:\n        pass")
        elif shape == 4:
            lines.append(f"    with {expr} as {name}:\n        del {name}")
        else:
            lines.append(f"    {name}[{_expr(rng, names, 2)}] = lambda {name}: {expr}")
    lines.append(f"    return {_expr(rng, names)}")
    return "\n".join(lines) + "\n\n"


def _renamed(text: str, rng: random.Random) -> str:
    """The same code with every name changed (what a re-typing copier does)."""
    names: dict[str, str] = {}

    def swap(match: re.Match) -> str:
        word = match.group()
        if keyword.iskeyword(word):
            return word
        return names.setdefault(word, f"x{rng.randrange(10**6)}")

    return re.sub(r"[A-Za-z_]\w*", swap, text)


def _cohort(n: int, seed: int = 30) -> list[dict[str, str]]:
    rng = random.Random(seed)
    names = [f"v{i}" for i in range(200)]
    pool = [_function(rng, i, names) for i in range(FUNCTIONS)]
    sample = "".join(_function(random.Random(1), 10**6 + i, names) for i in range(SAMPLE_FUNCTIONS))
    hand_ins = []
    for _ in range(n):
        picked = rng.sample(range(FUNCTIONS), PER_HAND_IN)
        hand_ins.append(
            {
                "app.py": "".join(pool[i] for i in picked[: PER_HAND_IN // 2]),
                "lib.py": "".join(pool[i] for i in picked[PER_HAND_IN // 2 :]),
                "sample.py": sample,
            }
        )
    for k in range(COPIES):  # hand-in 2k+1 re-types hand-in 2k's app.py, functions reversed
        source = hand_ins[2 * k]["app.py"].split("def ")[1:]
        hand_ins[2 * k + 1]["app.py"] = _renamed("".join("def " + f for f in reversed(source)), rng)
    # The last to arrive copies one too, so the incremental path has matches to re-judge.
    hand_ins[-1]["app.py"] = _renamed(hand_ins[n // 2]["app.py"], rng)
    return hand_ins


def _top(pairs: list[tuple[float, int, int]]) -> list[tuple[int, int]]:
    return [(a, b) for _, a, b in sorted(pairs, key=lambda p: (-p[0], p[1], p[2]))[:10]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cohort", type=int, default=1000)
    args = parser.parse_args()
    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="bench-similarity-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from cassettes_app.analysis.sources import text_fingerprints
    from cassettes_app.checks.catalog import CODE_SIMILARITY
    from reviewer.cohort.similarity import similar_pairs
    from submissions.checks import similarity
    from submissions.checks.store import checks_store
    from submissions.models import Assignment, Candidate, SourceFingerprint, Submission

    assignment = Assignment.objects.create(
        slug="bench", title="bench", shape="cassette", recording_globs=["cassettes/**/*.json"]
    )
    hand_ins = _cohort(args.cohort)
    submissions = []
    for i, files in enumerate(hand_ins):
        submission = Submission.objects.create(
            candidate=Candidate.objects.create(name=f"c{i:04d}"),
            assignment=assignment,
            archive="h.zip",
            archive_sha256=f"{i:064d}",
            status=Submission.Status.READY,
        )
        SourceFingerprint.objects.bulk_create(
            [
                SourceFingerprint(submission=submission, path=p, hash=h, line=a, end_line=b)
                for p, text in files.items()
                for h, a, b in text_fingerprints(p, text)
            ],
            batch_size=2000,
        )
        submissions.append(submission)
    rows = SourceFingerprint.objects.count()
    *earlier, last = submissions

    def all_pairs(cohort: list[Submission]) -> tuple[float, list[tuple[float, int, int]]]:
        started = time.perf_counter()
        found = []
        for submission in cohort:
            outcome, _ = similarity._judge(submission)
            checks_store(submission, None, [outcome])
            for item in outcome.evidence:
                other = item["other"]["submission"]
                found.append((item["share"], *sorted((submission.pk, other))))
        return time.perf_counter() - started, found

    # The cohort before the last hand-in, judged (what the stored checks hold by then).
    Submission.objects.filter(pk=last.pk).update(status=Submission.Status.REJECTED)
    all_pairs(earlier)
    Submission.objects.filter(pk=last.pk).update(status=Submission.Status.READY)
    started = time.perf_counter()
    similarity.cohort_code_similarity(submission=last, job=None)
    ours = time.perf_counter() - started
    baseline, scratch = all_pairs(submissions)
    best: dict[tuple[int, int], float] = {}
    for share, a, b in scratch:
        best[(a, b)] = max(best.get((a, b), 0.0), share)
    expected = _top([(s, a, b) for (a, b), s in best.items()])
    page = [(p.left.pk, p.right.pk) for p in similar_pairs(assignment)][:10]
    ratio = ours / baseline
    same = page == expected
    warned = Submission.objects.filter(checks__check_id=CODE_SIMILARITY, checks__status="warn")
    print(
        f"{args.cohort} hand-ins, {rows} fingerprints; {len(best)} similar pairs, "
        f"{warned.count()} hand-ins warned; top 10 the same: {same}"
    )
    return emit(
        Row(
            what=f"add one hand-in to a cohort of {args.cohort} (code similarity)",
            ours=f"{ours * 1000:.0f} ms",
            baseline=f"{baseline:.2f} s (all pairs again)",
            ratio=f"{ratio:.4f}x",
            target="≤ 0.05x, same top 10",
            ok=ratio <= 0.05 and same,
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
