"""What the live re-fetch and the re-drive share: a row's result, JSON-semantic comparison,
URLs under the stub's base URL, and the table from row outcomes to a check status.

Row outcomes: `match`, `mismatch`, `missing` (404: the stub never saw that trace id),
`unreachable` (timeout, reset, refused redirect, non-JSON or oversized answer, not sent, ...).
Check status (`rows_verdict`):
  * `pass`  every row matches;
  * `fail`  any row disagrees (the trace file says something the stub does not remember);
  * `warn`  no disagreement, but some rows could not be confirmed; in particular when the
    stub knows none of the trace ids. That is what a restarted stub without persistence
    looks like, which is not evidence that the file is wrong (and may be the hosting's
    doing), so it warns and points at re-driving instead of failing the candidate;
  * `error` no row got an answer at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from cassettes_app.checks import CheckOutcome, Status
from cassettes_app.checks.catalog import LIVE_MATCH
from cassettes_app.jsonvalues import maybe_json

RowOutcome = Literal["match", "mismatch", "missing", "unreachable"]

# After this many unreachable rows with no success at all (a re-drive: in a row), the stub
# is treated as down and the remaining rows are not tried (500 rows x timeout would hold a
# worker for minutes).
GIVE_UP_AFTER = 3
# Values longer than this are shown cut in evidence (the comparison uses the whole value).
PREVIEW_CHARS = 2000

# --- results -------------------------------------------------------------------------------


@dataclass(slots=True)
class RowResult:
    """The verdict on one trace row: outcome, differing fields (file vs live), error."""

    line: int
    trace_id: str | None
    outcome: RowOutcome
    differences: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, for TraceRow storage and evidence."""
        return {
            "line": self.line,
            "trace_id": self.trace_id,
            "outcome": self.outcome,
            "differences": self.differences,
            "error": self.error,
        }


# --- JSON comparison -----------------------------------------------------------------------


def loaded(value: Any) -> Any:
    """A body as data: JSON text parsed, other text kept as text, empty text no body."""
    return maybe_json(value, keep_text=True)


def preview(value: Any) -> Any:
    """A value for evidence: as is when small, else its JSON text cut to PREVIEW_CHARS."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= PREVIEW_CHARS:
        return value
    return text[:PREVIEW_CHARS] + f"… ({len(text)} characters)"


def ids_in(value: Any, pattern: re.Pattern[str]) -> list[str]:
    """Sorted distinct ids matching the pattern anywhere in a value."""
    if value is None:
        return []
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return sorted(set(pattern.findall(text)))


# --- URLs ----------------------------------------------------------------------------------


def join_url(base_url: str, path: str, query: str = "") -> str:
    """base_url's scheme, host and path prefix + path (+ query); base query/fragment dropped."""
    base = httpx.URL(base_url)
    prefix = base.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
    url = f"{base.scheme}://{base.netloc.decode('ascii')}{prefix}{path}"
    return f"{url}?{query}" if query else url


def describe(exc: BaseException) -> str:
    """One-line reason for a transport failure."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


# --- verdict -------------------------------------------------------------------------------


def row_counts(rows: Sequence[RowResult]) -> dict[str, int]:
    """Rows per outcome."""
    counts = {"match": 0, "mismatch": 0, "missing": 0, "unreachable": 0}
    for row in rows:
        counts[row.outcome] += 1
    return counts


def row_evidence(row: RowResult, path: str) -> dict[str, Any]:
    """One evidence item for a row."""
    if row.outcome == "match":
        message = f"line {row.line} ({row.trace_id}): matches"
    elif row.outcome == "mismatch":
        parts = [f"{d['field']} file {d['file']!r}, live {d['live']!r}" for d in row.differences]
        message = f"line {row.line} ({row.trace_id}): " + "; ".join(parts)
    else:
        message = f"line {row.line} ({row.trace_id}): {row.outcome}: {row.error}"
    return {
        "message": message[:PREVIEW_CHARS],
        "path": path,
        "line": row.line,
        "trace_id": row.trace_id,
        "outcome": row.outcome,
        "differences": row.differences,
        "error": row.error,
    }


def rows_verdict(
    rows: Sequence[RowResult], what: str, where: str
) -> tuple[Literal["pass", "fail", "warn", "error"], str]:
    """Status and summary from the row outcomes (see the module docstring for the table)."""
    counts = row_counts(rows)
    total = len(rows)
    extra = [
        f"{counts[k]} {k}" for k in ("missing", "unreachable") if counts[k] and counts[k] != total
    ]
    tail = f" ({', '.join(extra)})" if extra else ""
    if counts["mismatch"]:
        fields = sorted({d["field"] for r in rows for d in r.differences})
        return "fail", (
            f"{counts['mismatch']} of {total} {what} disagree with {where} "
            f"(fields: {', '.join(fields)}){tail}"
        )
    if counts["unreachable"] == total:
        first = next((r.error for r in rows if r.error), "no answer")
        return "error", f"{where} did not answer any of {total} {what}: {first}"
    if counts["missing"] == total:
        return "warn", (
            f"the stub has no record of any trace: it probably restarted (or is not the stub "
            f"that produced this trace); all {total} {what} are unknown to it. Re-drive the "
            "trace against a fresh stub instead"
        )
    if counts["match"] == total:
        return "pass", f"all {total} {what} match {where}"
    return (
        "warn",
        f"{counts['match']} of {total} {what} match {where}; the rest are unconfirmed{tail}",
    )


def rows_outcome(
    status: Status, summary: str, rows: Sequence[RowResult], path: str, **head: Any
) -> CheckOutcome:
    """trace.live_match from compared rows: a head item (the summary, how the rows were got,
    the counts), then every row that did not match, then the matches."""
    first = {"message": summary, **head, "path": path}
    first.update({"counts": row_counts(rows), "rows_checked": len(rows)})
    ordered = [r for r in rows if r.outcome != "match"] + [r for r in rows if r.outcome == "match"]
    evidence = [first, *(row_evidence(r, path) for r in ordered)]
    return CheckOutcome(LIVE_MATCH, status, summary, evidence)
