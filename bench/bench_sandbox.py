"""Sandbox overhead: the same small pytest suite run bare and in the sandbox, many times.

Baseline, in the same run: the runtime's python running the suite directly (no uid drop,
no bwrap). Ours: submissions.sandbox.run() with the default limits, a fresh workspace each
run as the replay job does. Target: sandboxed ≤ 1.10 × bare + 0.1 s per run (medians).

    .venv/bin/python bench/bench_sandbox.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Row, emit  # noqa: E402
from submissions import sandbox  # noqa: E402

SUITE = {
    "test_small.py": (
        "import json\n\n"
        "def test_roundtrip():\n    assert json.loads(json.dumps({'a': 1})) == {'a': 1}\n\n"
        "def test_sum():\n    assert sum(range(100)) == 4950\n"
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    runtime = sandbox.DEFAULT_RUNTIME
    problems = sandbox.self_check(runtime=runtime, slots=[0])
    if problems:
        print("sandbox unavailable: " + "; ".join(problems), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-sbx-") as tmp:
        src = Path(tmp) / "suite"
        src.mkdir()
        for name, text in SUITE.items():
            (src / name).write_text(text)
        parent = Path(tmp) / "ws"
        parent.mkdir()
        parent.chmod(0o711)
        Path(tmp).chmod(0o711)
        command = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        bare, boxed = [], []
        uid = sandbox.slot_uid(0)
        for _ in range(args.runs):
            started = time.perf_counter()
            done = subprocess.run(
                [str(runtime / "bin" / "python"), *command[1:]],
                cwd=src,
                capture_output=True,
                check=False,
                env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
            )
            bare.append(time.perf_counter() - started)
            assert done.returncode == 0, done.stdout[-500:]

            started = time.perf_counter()
            workspace = sandbox.prepare_workspace(src, parent, uid)
            try:
                result = sandbox.run(
                    command,
                    workspace=workspace,
                    limits=sandbox.SandboxLimits(),
                    slot=0,
                    runtime=runtime,
                )
            finally:
                sandbox.remove_workspace(workspace)
            boxed.append(time.perf_counter() - started)
            assert result.exit_code == 0, result.stdout[-500:]
    b, s = statistics.median(bare), statistics.median(boxed)
    budget = 1.10 * b + 0.1
    ok = s <= budget
    return emit(
        Row(
            what=f"sandboxed pytest run ({args.runs} runs, medians, incl. workspace copy)",
            ours=f"{s * 1000:.0f} ms",
            baseline=f"bare {b * 1000:.0f} ms",
            ratio=f"{s / b:.2f}x (+{(s - b) * 1000:.0f} ms)",
            target=f"<= 1.10x + 100 ms ({budget * 1000:.0f} ms)",
            ok=ok,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
