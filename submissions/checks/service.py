"""The service.* checks, one function per catalog id, judged from a probe report (pure).

ledger.consistent is judged here too, on the ledger lines appended during the probe; it
replaces the static result.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from typing import Any

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import (
    CACHES,
    DEGRADES_GRACEFULLY,
    LEDGER_CONSISTENT,
    PROBE_CHECKS,
    SCHEMA_VALID,
    SERVICE_STARTS,
)
from cassettes_app.checks.ledger import (
    CACHE_HIT,
    FALLBACK,
    MAX_ATTEMPTS,
    MODEL_CALL,
    classify_event,
    ledger_consistent,
)
from cassettes_app.parsed import LedgerEntry
from submissions.checks.probe_exchanges import Exchange, ProbeReport, cap_text, excerpt
from submissions.checks.replay import sandbox_evidence

LOW_CONFIDENCE = 0.5
SEVERITIES = ("low", "medium", "high", "critical")
TICKET_FIELDS = ("service", "severity", "first_seen", "evidence", "confidence", "needs_human")
UNKNOWN_WORDS = frozenset({"", "unknown", "n/a", "none", "null"})
DID_NOT_START = "the service did not start"


# A date and time as log lines write them: 2024-03-09T14:02:11Z, 2024-03-09 14:05:42,531, ...
ISO_TS = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)


def ticket_problems(ticket: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Why `ticket` is not a valid ticket: the assignment's JSON Schema, else the built-in shape."""
    if schema is not None:
        from jsonschema import Draft202012Validator

        errors = sorted(
            Draft202012Validator(schema).iter_errors(ticket),
            key=lambda e: [str(p) for p in e.absolute_path],
        )
        out = []
        for error in errors[:5]:
            where = "/".join(str(p) for p in error.absolute_path) or "(the ticket)"
            out.append(f"{where}: {excerpt(error.message, 200)}")
        return out
    if not isinstance(ticket, dict):
        return ["not a JSON object"]
    problems = [f"missing {name}" for name in TICKET_FIELDS if name not in ticket]
    if "service" in ticket and not isinstance(ticket["service"], str):
        problems.append("service must be a string")
    if "severity" in ticket and ticket["severity"] not in SEVERITIES:
        problems.append(f"severity {ticket['severity']!r} not one of {'|'.join(SEVERITIES)}")
    if (
        "first_seen" in ticket
        and ticket["first_seen"] is not None
        and not isinstance(ticket["first_seen"], str)
    ):
        problems.append("first_seen must be a string or null")
    if "evidence" in ticket and not isinstance(ticket["evidence"], str):
        problems.append("evidence must be a string")
    if "confidence" in ticket:
        c = ticket["confidence"]
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c <= 1:
            problems.append(f"confidence {c!r} is not a number in [0, 1]")
    if "needs_human" in ticket and not isinstance(ticket["needs_human"], bool):
        problems.append("needs_human must be a boolean")
    return problems


def _fair_rejection(ex: Exchange) -> bool:
    """A 4xx with a JSON body for a line the service may refuse (empty, 100 KB)."""
    ok, _ = ex.data()
    return ex.line.may_reject and ex.status is not None and 400 <= ex.status < 500 and ok


def service_starts(report: ProbeReport) -> CheckOutcome:
    """service.starts: the service answers on its port within the start timeout."""
    c = report.config
    evidence: list[dict[str, Any]] = [
        {"message": "service output (tail)", "output": cap_text(report.log, 4000)},
        {"message": f"started with: {c.command}", "command": c.command, "port": c.port},
    ]
    if report.run is not None:
        evidence.append(sandbox_evidence(report.run))
    if report.started:
        return CheckOutcome(
            SERVICE_STARTS,
            "pass",
            f"answered on port {c.port} after {report.start_seconds or 0:.1f} s",
            evidence,
        )
    return CheckOutcome(
        SERVICE_STARTS, "fail", f"`{c.command}` {report.start_error or 'did not start'}", evidence
    )


def service_schema_valid(
    exchanges: Sequence[Exchange], schema: dict[str, Any] | None = None
) -> CheckOutcome:
    """service.schema_valid: every response is JSON and a valid ticket."""
    bad: list[dict[str, Any]] = []
    good: list[dict[str, Any]] = []
    notes = []
    for ex in exchanges:
        if not ex.answered:
            bad.append(ex.evidence(f"{ex.who}: the service gave no answer: {ex.error}"))
            continue
        if _fair_rejection(ex):
            notes.append(f"the {ex.line.label} line was refused with {ex.status}")
            good.append(
                ex.evidence(
                    f"{ex.who}: the service refused it with {ex.status} and a JSON error (fair)"
                )
            )
            continue
        if not 200 <= (ex.status or 0) < 300:
            bad.append(ex.evidence(f"{ex.who}: the service answered {ex.status}, not a ticket"))
            continue
        ok, value = ex.data()
        if not ok:
            why = "larger than the probe reads" if ex.truncated else "not JSON"
            bad.append(ex.evidence(f"{ex.who}: the response is {why}"))
            continue
        problems = ticket_problems(value, schema)
        if problems:
            bad.append(ex.evidence(f"{ex.who}: {'; '.join(problems)}", problems=problems))
        else:
            good.append(ex.evidence(f"{ex.who}: a valid ticket"))
    against = "the assignment's ticket schema" if schema is not None else "the ticket fields"
    if not exchanges:
        return skip(SCHEMA_VALID, "no request was sent")
    if bad:
        first = bad[0]["message"]
        return CheckOutcome(
            SCHEMA_VALID,
            "fail",
            f"{len(bad)} of {len(exchanges)} responses are not valid tickets ({against}); "
            f"first: {excerpt(first, 300)}",
            bad + good,
        )
    extra = f" ({'; '.join(dict.fromkeys(notes))})" if notes else ""
    return CheckOutcome(
        SCHEMA_VALID,
        "pass",
        f"all {len(exchanges)} responses are valid tickets per {against}{extra}",
        good,
    )


def _unknown(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in UNKNOWN_WORDS)


def _parse_time(text: str) -> dt.datetime | None:
    match = ISO_TS.search(text)
    if not match:
        return None
    raw = match.group(0).replace(" ", "T", 1).replace(",", ".")
    raw = re.sub(r"Z$", "+00:00", raw)
    raw = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", raw)
    try:
        return dt.datetime.fromisoformat(raw)
    except ValueError:
        return None


def same_time(value: Any, timestamp: str) -> bool:
    """True when first_seen names the line's timestamp (same instant, or same wall clock)."""
    if not isinstance(value, str) or not value.strip():
        return False
    a, b = _parse_time(value), _parse_time(timestamp)
    if a is None or b is None:
        return timestamp in value or value.strip() in timestamp
    a, b = a.replace(microsecond=0), b.replace(microsecond=0)
    if a.tzinfo is not None and b.tzinfo is not None:
        return a == b
    return a.replace(tzinfo=None) == b.replace(tzinfo=None)


def degrade_problems(ex: Exchange) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one answer given while the model is unavailable.

    No answer within the request timeout (a retry storm against the missing model, say)
    is this check's finding: the service did not degrade in time.
    """
    if not ex.answered:
        after = f" after {ex.seconds:.1f} s" if ex.seconds else ""
        return [f"no answer{after}: {ex.error}"], []
    status = ex.status or 0
    if status >= 500:
        return [f"answered {status} with the model unavailable"], []
    if not ex.line.text.strip():
        return [], []  # the empty line: only "no 5xx" applies here
    if _fair_rejection(ex):
        return [], []
    if not 200 <= status < 300:
        return [f"answered {status} instead of a fallback ticket"], []
    ticket = ex.ticket()
    if ticket is None:
        return ["the answer is not a JSON ticket"], []
    fails, warns = [], []
    if ticket.get("needs_human") is not True:
        fails.append(f"needs_human is {ticket.get('needs_human')!r}, not true")
    c = ticket.get("confidence")
    if isinstance(c, bool) or not isinstance(c, int | float) or c > LOW_CONFIDENCE:
        fails.append(f"confidence {c!r} is not low (at most {LOW_CONFIDENCE})")
    evidence = ticket.get("evidence")
    if not isinstance(evidence, str) or not evidence.strip():
        fails.append("evidence is empty")
    elif evidence.strip() not in ex.line.text:
        fails.append(f"evidence {excerpt(evidence)!r} is not a quote from the line")
    first_seen = ticket.get("first_seen")
    if ex.line.timestamp is None:
        if not _unknown(first_seen):
            fails.append(
                f"invented first_seen {excerpt(str(first_seen), 40)!r}: the line has no timestamp"
            )
    elif _unknown(first_seen):
        warns.append(f"first_seen left unknown though the line says {ex.line.timestamp}")
    elif not same_time(first_seen, ex.line.timestamp):
        fails.append(
            f"first_seen {excerpt(str(first_seen), 40)!r} is not the line's timestamp "
            f"{ex.line.timestamp}"
        )
    return fails, warns


def service_degrades_gracefully(exchanges: Sequence[Exchange]) -> CheckOutcome:
    """service.degrades_gracefully: fallback tickets, needs_human, quoted, nothing invented."""
    failing: list[dict[str, Any]] = []
    warning: list[dict[str, Any]] = []
    fine: list[dict[str, Any]] = []
    for ex in exchanges:
        fails, warns = degrade_problems(ex)
        if fails:
            failing.append(ex.evidence(f"{ex.who}: {'; '.join(fails + warns)}"))
        elif warns:
            warning.append(ex.evidence(f"{ex.who}: {'; '.join(warns)}"))
        else:
            fine.append(ex.evidence(f"{ex.who}: degrades gracefully"))
    if not exchanges:
        return skip(DEGRADES_GRACEFULLY, "no request was sent")
    if failing:
        return CheckOutcome(
            DEGRADES_GRACEFULLY,
            "fail",
            f"{len(failing)} of {len(exchanges)} answers with the model unavailable are "
            f"wrong; first: {excerpt(failing[0]['message'], 300)}",
            failing + warning + fine,
        )
    if warning:
        return CheckOutcome(
            DEGRADES_GRACEFULLY,
            "warn",
            f"{len(warning)} answers miss a timestamp the line gives; first: "
            f"{excerpt(warning[0]['message'], 300)}",
            warning + fine,
        )
    tickets = sum(1 for ex in exchanges if ex.line.text.strip() and not _fair_rejection(ex))
    return CheckOutcome(
        DEGRADES_GRACEFULLY,
        "pass",
        f"with the model unavailable, no 5xx in {len(exchanges)} answers and all {tickets} "
        "tickets are fallbacks marked needs_human, low confidence, evidence quoted, no "
        "invented timestamp",
        fine,
    )


def _kinds(entries: Iterable[LedgerEntry]) -> list[str]:
    return [classify_event(e.event) for e in entries]


def service_caches(
    exchanges: Sequence[Exchange], *, ledger_tracked: bool, out_of_time: str = ""
) -> CheckOutcome:
    """service.caches: the repeat of each line comes from the cache, with no model attempt.

    A repeat is evidence only when its first request was answered before it went out: sent
    while the first was still in progress (the first timed out), the ledger lines after it
    may be the first's, and nothing was cached yet. `out_of_time` says why lines were not
    sent at all; what was left unobserved is not judged.
    """
    pairs: dict[str, list[Exchange]] = {}
    for ex in exchanges:
        pairs.setdefault(ex.line.label, []).append(ex)
    bad: list[dict[str, Any]] = []
    good: list[dict[str, Any]] = []
    warned: list[dict[str, Any]] = []
    ledger_seen = any(ex.ledger for ex in exchanges)
    unanswered: list[Exchange] = []
    for pair in pairs.values():
        first = next((e for e in pair if e.repeat == 1), None)
        second = next((e for e in pair if e.repeat == 2), None)
        if first is None or second is None:
            continue
        if not first.answered:
            unanswered.append(first)
            continue
        kinds = _kinds(second.ledger)
        attempts = kinds.count(MODEL_CALL)
        hit = CACHE_HIT in kinds
        ticket = second.ticket()
        flagged = ticket is not None and ticket.get("cached") is True
        first_ticket = first.ticket()
        first_ok = first_ticket is not None and 200 <= (first.status or 0) < 300
        if attempts:
            bad.append(
                second.evidence(
                    f"{second.who}: the repeat made {attempts} more model "
                    f"attempt{'s' if attempts != 1 else ''} (ledger)"
                )
            )
        elif not first_ok:
            continue  # nothing was cached to serve: no verdict for this line
        elif flagged or hit:
            how = " and ".join(
                x
                for x, on in (('"cached": true', flagged), ("a cache hit in the ledger", hit))
                if on
            )
            good.append(second.evidence(f"{second.who}: served from the cache ({how})"))
        else:
            why = (
                "a fresh fallback in the ledger"
                if FALLBACK in kinds
                else "no cached flag and no cache hit in the ledger"
            )
            bad.append(second.evidence(f"{second.who}: not served from the cache ({why})"))
        if first_ticket is not None and first_ticket.get("cached") is True:
            warned.append(first.evidence(f"{first.who}: claims cached on the first sight of it"))
    if not bad and not good:
        if out_of_time:
            return skip(CACHES, f"not judged: {out_of_time}")
        if unanswered:
            return skip(
                CACHES,
                f"not judged: the first request of {counted(len(unanswered), 'line')} got no "
                f"answer before its repeat was sent (first: {excerpt(unanswered[0].error or '')})",
            )
        return skip(CACHES, "no line got a ticket, so caching could not be judged")
    note = (
        ""
        if ledger_seen
        else " (the ledger recorded nothing per request: judged by the cached flag only)"
        if ledger_tracked
        else " (no ledger named: judged by the cached flag only)"
    )
    if bad:
        return CheckOutcome(
            CACHES,
            "fail",
            f"{len(bad)} of {len(bad) + len(good)} repeated lines not served from the cache; "
            f"first: {excerpt(bad[0]['message'], 300)}{note}",
            bad + warned + good,
        )
    if warned:
        return CheckOutcome(
            CACHES,
            "warn",
            f"repeats served from the cache, but {len(warned)} first answers claim to be "
            f"cached{note}",
            warned + good,
        )
    return CheckOutcome(
        CACHES,
        "pass",
        f"all {len(good)} repeated lines served from the cache with no model attempt{note}",
        good,
    )


_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "error": 3}


def service_ledger_consistent(report: ProbeReport) -> CheckOutcome | None:
    """ledger.consistent on the lines written during the probe (None: no ledger is named)."""
    globs = report.config.ledger_globs
    if not globs:
        return None
    answered = sum(1 for ex in report.exchanges if ex.answered)
    paths = ", ".join(report.ledger_entries) or ", ".join(globs)
    head = {
        "message": f"written during the probe: {len(report.all_entries)} ledger lines appended "
        f"to {paths} while {answered} requests were answered",
        "path": paths,
    }
    notes = [{"message": f"written during the probe: {n}"} for n in report.ledger_notes]
    if not report.all_entries:
        return CheckOutcome(
            LEDGER_CONSISTENT,
            "warn",
            f"written during the probe: the service appended nothing to {paths} while it "
            f"answered {answered} requests",
            [head, *notes],
        )
    outcomes = [ledger_consistent(entries, path) for path, entries in report.ledger_entries.items()]
    extra: list[dict[str, Any]] = []
    unmarked: list[dict[str, Any]] = []
    for ex in report.exchanges:
        kinds = _kinds(ex.ledger)
        attempts = kinds.count(MODEL_CALL)
        if attempts > MAX_ATTEMPTS:
            extra.append(
                ex.evidence(
                    f"{ex.who}: {attempts} model attempts for one request; at most "
                    f"{MAX_ATTEMPTS} (one retry) before the fallback",
                    path=ex.ledger_path,
                )
            )
        ticket = ex.ticket()
        if FALLBACK in kinds and ticket is not None and ticket.get("needs_human") is not True:
            # The ledger told the truth (it fell back); the ticket's flag is the ticket's
            # fault, which service.degrades_gracefully judges: noted, not failed twice.
            unmarked.append(
                ex.evidence(
                    f"{ex.who}: the ledger records a fallback and the answer has needs_human "
                    f"{ticket.get('needs_human')!r} (judged by {DEGRADES_GRACEFULLY})",
                    path=ex.ledger_path,
                )
            )
    status = max((o.status for o in outcomes), key=_RANK.__getitem__)
    if extra:
        status = "fail"
    if status == "skip":
        status = "pass"
    summaries = "; ".join(o.summary for o in outcomes)
    if extra:
        summaries = f"{excerpt(extra[0]['message'], 200)}; {summaries}"
    evidence = [head, *notes, *extra, *unmarked]
    for o in outcomes:
        evidence += o.evidence
    return CheckOutcome(
        LEDGER_CONSISTENT, status, f"written during the probe: {summaries}", evidence
    )


def service_checks(report: ProbeReport) -> list[CheckOutcome]:
    """All the probe's verdicts."""
    starts = service_starts(report)
    if not report.started:
        return [starts, *(skip(cid, DID_NOT_START) for cid in PROBE_CHECKS[1:])]
    sent = [
        ex for ex in report.exchanges if ex.error is None or not ex.error.startswith("not sent")
    ]
    unsent = len(report.exchanges) - len(sent)
    out_of_time = (
        f"the probe ran out of time after {len(sent)} of {len(report.exchanges)} requests"
        if unsent
        else ""
    )
    outcomes = [
        starts,
        service_schema_valid(sent, report.config.schema),
        service_degrades_gracefully(sent),
        service_caches(
            sent, ledger_tracked=bool(report.config.ledger_globs), out_of_time=out_of_time
        ),
    ]
    if unsent or not report.complete:
        why = (
            f"{unsent} requests not sent: the probe's time budget ran out"
            if unsent
            else "the probe was cut short"
            + (f" ({report.run.killed_reason})" if report.run and report.run.killed_reason else "")
        )
        for o in outcomes[1:]:
            o.evidence.insert(0, {"message": why})
            if o.status == "pass":
                o.status, o.summary = "warn", f"{o.summary}; {why}"
    ledger = service_ledger_consistent(report)
    if ledger is not None:
        outcomes.append(ledger)
    return outcomes


def service_error_outcomes(
    reason: str, evidence: list[dict[str, Any]] | None = None, cause: str = ""
) -> list[CheckOutcome]:
    return [
        CheckOutcome(cid, "error", reason, list(evidence or []), cause=cause)
        for cid in PROBE_CHECKS
    ]
