"""What every benchmark prints: one human row and one machine line `make bench` collects.

A row says what was measured, our figure, the baseline's figure (measured in the same run),
the ratio, the target, and whether the target holds. `bench/run_all.py` reads the
`BENCH {json}` lines of each benchmark's output and prints them as one table.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Row:
    what: str
    ours: str
    baseline: str
    ratio: str
    target: str
    ok: bool


def emit(row: Row) -> int:
    """Print the row (human, then machine-readable); return the exit code its verdict means."""
    verdict = "OK" if row.ok else "MISSED"
    print(
        f"{row.what} | ours {row.ours} | baseline {row.baseline} | ratio {row.ratio} | "
        f"target {row.target} | {verdict}",
        flush=True,
    )
    print("BENCH " + json.dumps(asdict(row)), flush=True)
    return 0 if row.ok else 1
