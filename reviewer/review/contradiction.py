"""A score that contradicts its linked checks: the one rule every page, report and JSON reads.

A 2 or 3 on a row beside a linked check that found a flaw (`fail`), or a 0 or 1 on a row
whose linked checks all passed, is worth the committee's eye whether or not another
reviewer disagreed. Only what was observed counts: a check that does not apply to the
assignment's shape is left out, and a row with a linked check that was skipped, could not
run or has not run yet never reads as "all passed" (so nothing was observed, no marker).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

LABEL = "contradicts its checks"


@dataclass(frozen=True, slots=True)
class Contradiction:
    """Why a score contradicts its row's checks, and which checks."""

    value: int
    check_ids: tuple[str, ...]
    failed: bool  # True: a high score beside failed checks; False: a low one beside passes

    @property
    def text(self) -> str:
        """One line, as every page and the report print it."""
        which = "failed" if self.failed else "all passed" if len(self.check_ids) > 1 else "passed"
        return f"{LABEL}: {self.value} while {', '.join(self.check_ids)} {which}"

    def as_json(self) -> dict[str, object]:
        return {"value": self.value, "checks": list(self.check_ids), "failed": self.failed}


def contradiction(
    value: int | None,
    check_ids: Collection[str],
    statuses: Mapping[str, str],
    *,
    not_applying: Collection[str] = frozenset(),
) -> Contradiction | None:
    """The contradiction of this score with its row's linked checks (`statuses`: check id ->
    status of this submission's run), or None. `not_applying` as
    `reviewer.review.scoring.checks_not_applying` gives it."""
    if value is None:
        return None
    applying = [cid for cid in check_ids if cid not in not_applying]
    if value >= 2:
        failed = tuple(cid for cid in applying if statuses.get(cid) == "fail")
        return Contradiction(value, failed, failed=True) if failed else None
    if applying and all(statuses.get(cid) == "pass" for cid in applying):
        return Contradiction(value, tuple(applying), failed=False)
    return None
