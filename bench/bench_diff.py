"""Per-turn diff of two 200-turn conversations, 20 KB a turn, against difflib on the joined text.

Baseline, in the same run: difflib.SequenceMatcher over the two conversations' texts joined
(line-level opcodes). Ours: cassettes_app.diff.diff_turns (turn alignment + word-level marks
inside changed turns) plus rendering to escaped HTML. Target: ours ≤ 1.0× the baseline's
time, and the same changed lines found.

    .venv/bin/python bench/bench_diff.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import difflib
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402
from cassettes_app.diff import diff_turns, render_segments, turn_text  # noqa: E402

TURNS = 200
TURN_BYTES = 20_000


def conversation(seed: int, changes: set[int]) -> list[dict]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    turns = []
    for i in range(TURNS):
        lines = []
        size = 0
        while size < TURN_BYTES:
            line = " ".join(rng.choice(words) for _ in range(12))
            lines.append(line)
            size += len(line) + 1
        if i in changes:
            lines[len(lines) // 2] = "a changed line " + str(i)
        text = "\n".join(lines)
        turns.append(
            {
                "new_messages": [
                    {"role": "user", "text": f"turn {i}", "tool_calls": [], "tool_results": []}
                ],
                "response": {"role": "assistant", "text": text, "tool_calls": []},
            }
        )
    return turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    changed = set(random.Random(1).sample(range(TURNS), 20))
    left = conversation(7, set())
    right = conversation(7, changed)
    ours_times, base_times = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        rows, first = diff_turns(left, right)
        for row in rows:
            if row.changed:
                render_segments(row.left_segments)
                render_segments(row.right_segments)
        ours_times.append(time.perf_counter() - started)

        started = time.perf_counter()
        a = "\n".join(turn_text(t) for t in left).splitlines()
        b = "\n".join(turn_text(t) for t in right).splitlines()
        ops = difflib.SequenceMatcher(None, a, b).get_opcodes()
        base_times.append(time.perf_counter() - started)
    base_changed = sum(1 for op in ops if op[0] != "equal")
    ours_changed = sum(1 for r in rows if r.changed)
    ours, base = min(ours_times), min(base_times)
    ratio = ours / base
    same = ours_changed == base_changed == len(changed) and first == min(changed)
    ok = ratio <= 1.0 and same
    return emit(
        Row(
            what=f"per-turn diff, {TURNS} turns x {TURN_BYTES // 1000} KB ({len(changed)} changed)",
            ours=f"{ours * 1000:.0f} ms, {ours_changed} changes",
            baseline=f"difflib {base * 1000:.0f} ms, {base_changed} changes",
            ratio=f"{ratio:.2f}x",
            target="<= 1.0x, same changes",
            ok=ok,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
