"""`ledger.consistent`: a service's ledger agrees with its recordings and bounds its retries.

A ledger is JSON Lines of model calls, cache hits and fallbacks (ticket-service shape).
Event names vary between candidates, so they are classified by their words; inputs are
grouped by whichever input key the entries carry. Pure: entries in, one outcome out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import LEDGER_CONSISTENT
from cassettes_app.formats.ledger import (
    CACHE_HIT,
    FALLBACK,
    MODEL_CALL,
    OTHER,
    classify_event,
)
from cassettes_app.parsed import LedgerEntry
from cassettes_app.text import clipped

__all__ = ["CHECK_ID", "MAX_ATTEMPTS", "classify_event", "ledger_consistent"]

CHECK_ID = LEDGER_CONSISTENT

# One try plus at most one retry before the fallback (the ticket-service brief).
MAX_ATTEMPTS = 2


# Fields that name the input an entry is about, best first. `key` comes last: in many
# ledgers it is the recording key, which only model calls carry.
INPUT_FIELDS = (
    "line_sha",
    "input_sha",
    "input_hash",
    "input_key",
    "input_id",
    "input",
    "line",
    "text_sha",
    "prompt_sha",
    "request_id",
    "cache_key",
    "key",
)
REASON_FIELDS = ("reason", "fallback_reason", "why", "cause", "error")
ATTEMPT_FIELDS = ("attempt", "attempts", "try", "retry")

# How much of an input key a message shows.
_INPUT_SHOWN = 24


def _scalar(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _attempt(data: dict[str, Any]) -> int | None:
    for name in ATTEMPT_FIELDS:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 6:
            return int(value.strip())
    return None


def _reason(data: dict[str, Any]) -> str | None:
    for name in REASON_FIELDS:
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, dict) and value:
            return str(value)[:200]
    return None


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


@dataclass(slots=True)
class _Run:
    """Consecutive model attempts for one input, closed by a fallback or a fresh start."""

    input_key: str | None
    lines: list[int] = field(default_factory=list)
    highest_attempt: int | None = None

    def attempts(self, zero_based: bool) -> int:
        counted = len(self.lines)
        if self.highest_attempt is not None:
            counted = max(counted, self.highest_attempt + (1 if zero_based else 0))
        return counted


@dataclass(slots=True)
class _LedgerFindings:
    """What one pass over a ledger found, before it is turned into an outcome."""

    counts: dict[str, int]
    runs: list[_Run]
    storms: list[_Run]
    zero_based: bool
    fails: list[dict[str, Any]] = field(default_factory=list)
    warns: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)


_Classified = Sequence[tuple[LedgerEntry, str]]


def ledger_consistent(
    entries: Sequence[LedgerEntry],
    path: str,
    *,
    recorded_model_calls: int | None = None,
    recording_keys: Iterable[str] | None = None,
) -> CheckOutcome:
    """Establish that ledger entries agree with the recordings and bound retries.

    Per input (grouped by `line_sha`, `input`, `key`, ... when present) at most one retry
    may precede a fallback; attempts are read from an `attempt` field or counted as
    consecutive model calls for the same input. Every fallback needs a reason and
    `needs_human: true`. With `recorded_model_calls`, the number of model calls (entries,
    or distinct recording keys when the entries name them) should equal it; with
    `recording_keys`, every key a model call names should be a recording.
    """
    if not entries:
        return skip(CHECK_ID, "no ledger entries to inspect")
    classified = [(entry, classify_event(entry.event)) for entry in entries]
    if all(kind == OTHER for _, kind in classified):
        # Nothing a ledger is judged on: passing would say something was checked.
        events = sorted({e.event for e, _ in classified if e.event})[:5]
        named = f" ({', '.join(events)})" if events else ""
        return skip(
            CHECK_ID,
            f"none of the {len(classified)} entries in {path} is a model call, cache hit or "
            f"fallback{named}: nothing to judge",
        )
    findings = _retry_findings(classified, path)
    findings.warns += _recording_disagreements(
        classified,
        findings.counts[MODEL_CALL],
        path,
        recorded_model_calls=recorded_model_calls,
        recording_keys=recording_keys,
    )
    findings.notes += _other_event_notes(classified, findings.counts[OTHER], path)
    return _ledger_outcome(findings)


def _event_counts(classified: _Classified) -> dict[str, int]:
    """How many entries of each kind, every kind present (0 when none)."""
    counts = dict.fromkeys((MODEL_CALL, CACHE_HIT, FALLBACK, OTHER), 0)
    for _, kind in classified:
        counts[kind] += 1
    return counts


def _input_field(relevant: Sequence[dict[str, Any]]) -> str | None:
    """The input field: the best-ranked one that any model call or fallback carries."""
    return next(
        (name for name in INPUT_FIELDS if any(_scalar(d.get(name)) for d in relevant)), None
    )


def _retry_findings(classified: _Classified, path: str) -> _LedgerFindings:
    """Retry runs, retry storms and fallback problems; a warning when retries are unbounded."""
    counts = _event_counts(classified)
    relevant = [e.data for e, kind in classified if kind in (MODEL_CALL, FALLBACK)]
    input_field = _input_field(relevant)
    attempts_seen = [a for d in relevant if (a := _attempt(d)) is not None]
    zero_based = any(
        _attempt(e.data) == 0 for e, kind in classified if kind == MODEL_CALL
    )  # 0, 1 are two attempts
    runs, fallback_fails = _retry_runs(classified, input_field, path)
    storms = [run for run in runs if run.attempts(zero_based) > MAX_ATTEMPTS]
    findings = _LedgerFindings(counts, runs, storms, zero_based)
    findings.fails += fallback_fails
    findings.fails += (_storm_finding(run, input_field, zero_based, path) for run in storms)
    if counts[MODEL_CALL] and input_field is None and not attempts_seen:
        findings.warns.append(
            {
                "message": "retries cannot be bounded: entries carry neither an input key "
                f"({', '.join(INPUT_FIELDS[:4])}, ...) nor an attempt number",
                "path": path,
            }
        )
    return findings


def _retry_runs(
    classified: _Classified, input_field: str | None, path: str
) -> tuple[list[_Run], list[dict[str, Any]]]:
    """The retry runs in ledger order, and a finding for each fallback that is incomplete."""
    open_runs: dict[str | None, _Run] = {}
    runs: list[_Run] = []
    fails: list[dict[str, Any]] = []
    previous_key: object = object()  # the input of the previous entry, for "consecutive"
    run: _Run | None
    for entry, kind in classified:
        data = entry.data
        key = _scalar(data.get(input_field)) if input_field else None
        attempt = _attempt(data)
        if kind == MODEL_CALL:
            run = _model_call_run(open_runs, runs, key, attempt, previous_key)
            run.lines.append(entry.line)
            if attempt is not None:
                run.highest_attempt = max(run.highest_attempt or attempt, attempt)
        elif kind == FALLBACK:
            run = open_runs.pop(key, None)
            if run is None and attempt is not None:
                # Only the fallback is logged: its attempt number still counts the tries.
                run = _Run(key, [entry.line])
                runs.append(run)
            if run is not None and attempt is not None:
                run.highest_attempt = max(run.highest_attempt or attempt, attempt)
            problem = _fallback_finding(entry, key, input_field, path)
            if problem is not None:
                fails.append(problem)
        elif kind == CACHE_HIT:
            open_runs.pop(key, None)
        previous_key = key
    return runs, fails


def _model_call_run(
    open_runs: dict[str | None, _Run],
    runs: list[_Run],
    key: str | None,
    attempt: int | None,
    previous_key: object,
) -> _Run:
    """The run a model call belongs to: the open one for its input, or a fresh one."""
    run = open_runs.get(key)
    fresh = run is None
    if run is not None:
        if attempt is not None and run.highest_attempt is not None:
            # A numbered attempt that does not go up starts a new run (a later,
            # separate request for the same input).
            fresh = attempt <= run.highest_attempt
        elif attempt is None:
            # Unnumbered: only back-to-back calls for one input are retries.
            fresh = key is None or previous_key != key
    if fresh:
        run = _Run(key)
        runs.append(run)
        open_runs[key] = run
    assert run is not None
    return run


def _fallback_finding(
    entry: LedgerEntry, key: str | None, input_field: str | None, path: str
) -> dict[str, Any] | None:
    """A finding for a fallback line that says no human is needed, else None.

    The line records the fallback; `needs_human` is a property of the ticket (judged by
    service.degrades_gracefully), so a line need not repeat it, nor give a reason. Only a
    line that contradicts the brief, saying needs_human is false, is a finding.
    """
    data = entry.data
    if "needs_human" not in data or data["needs_human"] is None or _true(data["needs_human"]):
        return None
    problems = [f"needs_human is {data.get('needs_human')!r} after a fallback"]
    return {
        "message": f"fallback at line {entry.line}"
        + (f" for {input_field} {clipped(key, _INPUT_SHOWN)}" if key else "")
        + ": "
        + "; ".join(problems),
        "path": path,
        "line": entry.line,
    }


def _storm_finding(
    run: _Run, input_field: str | None, zero_based: bool, path: str
) -> dict[str, Any]:
    """The finding for one run with more attempts than MAX_ATTEMPTS."""
    who = f"{input_field} {clipped(run.input_key, _INPUT_SHOWN)}" if run.input_key else "one input"
    return {
        "message": f"{run.attempts(zero_based)} model attempts for {who} (lines "
        f"{', '.join(map(str, run.lines[:10]))}); at most {MAX_ATTEMPTS} "
        "(one retry) before the fallback",
        "path": path,
        "line": run.lines[0],
    }


def _recording_disagreements(
    classified: _Classified,
    model_calls: int,
    path: str,
    *,
    recorded_model_calls: int | None,
    recording_keys: Iterable[str] | None,
) -> list[dict[str, Any]]:
    """Warnings where the ledger's model calls disagree with the recordings.

    Only runs when a caller passes `recorded_model_calls` or `recording_keys`; the
    production callers (`submissions.checks.service` and `cassettes_app.analysis.analyzer`)
    pass neither, so today only tests reach it.
    """
    if recorded_model_calls is None and recording_keys is None:
        return []
    warns: list[dict[str, Any]] = []
    model_keys = [
        k
        for e, kind in classified
        if kind == MODEL_CALL and (k := _scalar(e.data.get("key") or e.data.get("recording")))
    ]
    distinct = list(dict.fromkeys(model_keys))
    # Retries replay one recording, so distinct keys may be what matches the recordings.
    if (
        recorded_model_calls is not None
        and model_calls != recorded_model_calls
        and not (model_keys and len(distinct) == recorded_model_calls)
    ):
        keyed = f", {len(distinct)} distinct recording keys" if model_keys else ""
        warns.append(
            {
                "message": f"{model_calls} model_call entries{keyed}, but "
                f"{recorded_model_calls} recorded model calls",
                "path": path,
            }
        )
    if recording_keys is not None and model_keys:
        known = set(recording_keys)
        for key in distinct:
            if key not in known:
                line = next(
                    e.line
                    for e, kind in classified
                    if kind == MODEL_CALL and _scalar(e.data.get("key")) == key
                )
                warns.append(
                    {
                        "message": f"model_call key {clipped(key, 40)} names no recording",
                        "path": path,
                        "line": line,
                    }
                )
    return warns


def _other_event_notes(classified: _Classified, others: int, path: str) -> list[dict[str, Any]]:
    """A note naming the events that are neither model calls, cache hits nor fallbacks."""
    unknown = sorted({e.event or "(none)" for e, kind in classified if kind == OTHER})
    if not unknown:
        return []
    return [
        {
            "message": f"{others} entries with other events, not counted: "
            + ", ".join(clipped(u, 40) for u in unknown[:10]),
            "path": path,
        }
    ]


def _ledger_outcome(findings: _LedgerFindings) -> CheckOutcome:
    """fail on storms or bad fallbacks, warn on disagreement, else pass; with the tally."""
    counts, storms, zero_based = findings.counts, findings.storms, findings.zero_based
    fails, warns, notes = findings.fails, findings.warns, findings.notes
    tally = (
        f"{counted(counts[MODEL_CALL], 'model call')}, {counted(counts[CACHE_HIT], 'cache hit')}, "
        f"{counted(counts[FALLBACK], 'fallback')}"
    )
    if fails:
        what = []
        if storms:
            worst = max(run.attempts(zero_based) for run in storms)
            what.append(f"retry storm ({worst} attempts for one input)")
        bad_fallbacks = len(fails) - len(storms)
        if bad_fallbacks:
            what.append(f"{counted(bad_fallbacks, 'fallback')} marked as needing no human")
        return CheckOutcome(CHECK_ID, "fail", f"{'; '.join(what)} — {tally}", fails + warns + notes)
    if warns:
        return CheckOutcome(
            CHECK_ID,
            "warn",
            f"ledger does not fully agree with the recordings — {tally}",
            warns + notes,
        )
    longest = max((run.attempts(zero_based) for run in findings.runs), default=0)
    return CheckOutcome(
        CHECK_ID,
        "pass",
        f"{tally}; at most {counted(longest, 'attempt')} per input, every fallback has a "
        "reason and needs_human",
        notes,
    )
