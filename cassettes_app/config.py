"""The assignment's settings as the pure analyser and its checks take them: plain values,
everything the static checks need (never a model row).

A module of its own, below both the analysis package and checks/cassettes.py, which read it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from cassettes_app.limits import DEFAULT_LIMITS, MiB, ParseLimits

# The ids the trace shape's shop stub issues: the default of every id pattern (an
# assignment's `id_pattern`, the analysis config, the live checks).
DEFAULT_ID_PATTERN = r"ord_[0-9a-f]+"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class AnalysisConfig:
    """The assignment's settings as the analyser takes them (see DESIGN.md, assignments)."""

    shape: str = "cassette"
    recording_globs: tuple[str, ...] = ()
    trace_globs: tuple[str, ...] = ()
    ledger_globs: tuple[str, ...] = ()
    volatile_fields: tuple[str, ...] = ("user", "request_id", "id", "created")
    stale_after_days: int = 42
    expected_model: str = ""
    id_pattern: str = DEFAULT_ID_PATTERN
    replay_command: str = ""  # the command docs.entrypoints looks for in the tree
    now: dt.datetime = field(default_factory=_utcnow)  # aware UTC; the upload time
    max_recordings_bytes: int = 100 * MiB
    max_scan_file_bytes: int = 8 * MiB
    limits: ParseLimits = DEFAULT_LIMITS

    def __post_init__(self) -> None:
        """Read a naive `now` as UTC, so comparisons with recording times never raise."""
        if self.now.tzinfo is None:
            object.__setattr__(self, "now", self.now.replace(tzinfo=dt.UTC))
