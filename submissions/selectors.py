"""Reads for the submission pages: what a page shows of a submission, its jobs and its evidence."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Model, OuterRef, Q, QuerySet, Subquery

from cassettes_app.checks import counted
from cassettes_app.checks.catalog import (
    CACHES,
    CATALOG,
    CODE_SIMILARITY,
    DEGRADES_GRACEFULLY,
    IDEMPOTENCY_ENFORCED,
    NO_SECRETS,
    PROBE_CHECKS,
    RECORDINGS_UNIQUE,
    SCHEMA_VALID,
    STUB_HOPS_PRESENT,
)
from cassettes_app.checks.rules import shape_rules
from submissions.checks.cohort import OTHER
from submissions.checks.probe_exchanges import EVIDENCE_CHARS, PROBE_LINES, Exchange
from submissions.models import (
    Assignment,
    CheckResult,
    Finding,
    Job,
    Recording,
    Submission,
    TraceRow,
    Turn,
)

_LIST_CAP = 200


# Rows a page when the long lists paginate (see submission_context).
PAGE_SIZE = 50


# Failures first, then warnings, errors, passes and skips.
_CHECK_ORDER = {"fail": 0, "error": 1, "warn": 2, "pass": 3, "skip": 4}


def stale_warnings(submission: Submission, checks: list[CheckResult]) -> list[str]:
    """Banner lines: stale, undated, other-model and never-read recordings (one query)."""
    assignment = submission.assignment
    cutoff = submission.created - timedelta(days=assignment.stale_after_days)
    recs = Recording.objects.filter(submission=submission, role=Recording.Role.RECORDING)
    other_model = Q(pk__in=[])
    if assignment.expected_model:
        other_model = ~Q(model="") & ~Q(model__startswith=assignment.expected_model.split("-20")[0])
    counts = recs.aggregate(
        stale=Count("pk", filter=Q(recorded_at__lt=cutoff)),
        future=Count("pk", filter=Q(recorded_at__gt=submission.created)),
        undated=Count("pk", filter=Q(recorded_at=None)),
        other=Count("pk", filter=other_model),
        unread=Count("pk", filter=Q(used=False)),
    )
    lines = []
    if counts["stale"]:
        lines.append(
            f"{counted(counts['stale'], 'recording')} older than {assignment.stale_after_days} days"
        )
    if counts["future"]:
        lines.append(f"{counted(counts['future'], 'recording')} dated after the upload")
    if counts["undated"]:
        lines.append(
            f"{counted(counts['undated'], 'recording')} of unknown age (no recording time)"
        )
    if counts["other"]:
        lines.append(
            f"{counted(counts['other'], 'recording')} of another model than "
            f"{assignment.expected_model}"
        )
    if counts["unread"]:
        lines.append(f"{counted(counts['unread'], 'recording')} never read by the suite")
    return lines


def _secret_paths(checks: list[CheckResult]) -> set[str]:
    """Paths that hold a leaked credential, from the no_secrets check's evidence."""
    for check in checks:
        if check.check_id == NO_SECRETS and check.status == "fail":
            return {path for e in check.evidence if isinstance(e, dict) and (path := e.get("path"))}
    return set()


def _page(queryset: QuerySet, size: int, number: str | None, count: int) -> Page:
    """One page of a long list of `count` rows (one query: the slice), evaluated for the
    template."""
    paginator = Paginator(queryset, size)
    paginator.__dict__["count"] = count  # its cached_property, read by _counts for all lists
    page = paginator.get_page(number)
    page.object_list = list(page.object_list)
    return page


def _counts(submission: Submission, models: Mapping[str, type[Model]]) -> dict[str, int]:
    """How many rows of each model the submission has, in one query (a page's lists)."""
    values = {
        f"count_{name}": Subquery(
            model._default_manager.filter(submission=OuterRef("pk"))
            .order_by()
            .values("submission")
            .annotate(n=Count("pk"))
            .values("n")
        )
        for name, model in models.items()
    }
    row: Any = Submission.objects.filter(pk=submission.pk).values(**values).first() or {}
    return {name: int(row.get(f"count_{name}") or 0) for name in models}


def submission_context(
    submission: Submission, pages: Mapping[str, str] | None = None
) -> dict[str, object]:
    """Everything the submission page shows of a submission itself (no scoring).

    Long lists (recordings, turns, trace rows) show their first `_LIST_CAP` rows, findings
    their first 200; given `pages` (the request's GET parameters), all four paginate instead,
    `PAGE_SIZE` rows a page, each by its own parameter (`recordings`, `turns`, `trace`,
    `findings`).
    """
    context = jobs_context(submission)
    jobs: list[Job] = context["jobs"]  # type: ignore[assignment]  # jobs_context's own list
    context.update(evidence_context(submission, jobs, pages))
    return context


def jobs_context(submission: Submission) -> dict[str, object]:
    """The submission and its jobs: what the job panel shows.

    `jobs_seen` names the jobs' states as the page shows them: the panel's poll sends it
    back, and a poll that finds it changed (a job started or ended) brings the sections
    the jobs write along, so the page turns true as each job ends, not only the last.
    """
    jobs = list(submission.jobs.all())
    states = ",".join(f"{job.pk}:{job.state}:{job.attempts}" for job in jobs)
    return {
        "submission": submission,
        "jobs": jobs,
        "jobs_seen": hashlib.sha256(states.encode()).hexdigest()[:16],
        "jobs_active": any(not job.is_final for job in jobs),
        # Jobs that will still write checks (a *Check again* or a re-record comparison
        # running does not make the verdict wait).
        "checks_active": any(not job.is_final and job.kind not in _WRITE_NO_CHECKS for job in jobs),
        "queue_unreachable": any(
            job.enqueue_error and job.state == Job.State.QUEUED for job in jobs
        ),
    }


# Jobs of a submission that write no check (the checks section does not wait for them).
_WRITE_NO_CHECKS = frozenset({Job.Kind.RERECORD, Job.Kind.REFCHECK, Job.Kind.SELFTEST})


def evidence_context(
    submission: Submission,
    jobs: list[Job],
    pages: Mapping[str, str] | None,
    checks: list[CheckResult] | None = None,
) -> dict[str, object]:
    """What the jobs found: checks, recordings, turns, trace rows, findings, logs. `checks`,
    the submission's checks when the caller read them already, saves their query."""
    paged = pages is not None
    size = PAGE_SIZE if paged else _LIST_CAP
    pages = pages or {}
    listed: dict[str, type[Model]] = {"recordings": Recording, "turns": Turn, "trace": TraceRow}
    if paged:
        listed["findings"] = Finding
    counts = _counts(submission, listed)
    recordings = _page(
        submission.recordings.order_by("path", "pk"),
        size,
        pages.get("recordings"),
        counts["recordings"],
    )
    turns = _page(
        submission.turns.select_related("recording").order_by("thread", "index"),
        size,
        pages.get("turns"),
        counts["turns"],
    )
    trace_rows = _page(
        submission.trace_rows.order_by("recording_id", "line"),
        size,
        pages.get("trace"),
        counts["trace"],
    )
    findings = (
        _page(submission.findings.all(), size, pages.get("findings"), counts["findings"])
        if paged
        else None
    )
    found = findings.object_list if findings is not None else list(submission.findings.all()[:200])
    checks = sorted(
        submission.checks.all() if checks is None else checks,
        key=lambda c: (_CHECK_ORDER.get(c.status, 9), c.check_id),
    )
    cutoff = submission.created - timedelta(days=submission.assignment.stale_after_days)
    probe_check = next((c for c in checks if c.check_id == IDEMPOTENCY_ENFORCED), None)
    transcript = probe_transcript(checks)
    assignment = submission.assignment
    uses = _shape_uses(assignment)
    # The trace checks apply to a cassette task too (it may hand in a trace); its sections
    # are for an assignment that names trace files.
    traced = bool(assignment.trace_globs)
    pending = [job for job in jobs if not job.is_final]
    pending_kinds = {job.kind for job in pending}
    return {
        # Jobs still to end, by kind: each section says which of them its results wait for.
        "jobs_pending": {job.kind: job for job in pending},
        "checks_pending": [job for job in pending if job.kind not in _WRITE_NO_CHECKS],
        # Checks written by an earlier run of a job that runs again: shown, marked as such.
        "rerun_job_ids": {j.pk for j in jobs if j.is_final and j.kind in pending_kinds},
        "stale_warnings": stale_warnings(submission, checks),
        "probe_check": probe_check,
        "probe_transcript": transcript,
        # A section shows when the assignment's shape uses it or it has something to show:
        # no "Idempotency probe: not run" or "Trace hops 0" on a cassette hand-in.
        "show_idempotency": (uses[IDEMPOTENCY_ENFORCED] and traced) or _has_probes(probe_check),
        "show_trace": (uses[STUB_HOPS_PRESENT] and traced) or trace_rows.paginator.count > 0,
        "show_transcript": uses[DEGRADES_GRACEFULLY] or bool(transcript),
        "secret_paths": _secret_paths(checks),
        "stale_cutoff": cutoff,
        "logs": [job for job in jobs if job.log],
        "recordings": recordings.object_list,
        "recording_count": recordings.paginator.count,
        "recordings_page": recordings,
        "turns": turns.object_list,
        "turn_count": turns.paginator.count,
        "turns_page": turns,
        "trace_rows": trace_rows.object_list,
        "trace_row_count": trace_rows.paginator.count,
        "trace_page": trace_rows,
        "list_cap": size,
        "paged": paged,
        "checks": checks,
        "findings": found,
        "findings_page": findings,
        # The first turn each finding's file was rebuilt into (one query for the page).
        "finding_turns": _first_turns(submission, {f.path for f in found if f.path}),
    }


def _has_probes(check: CheckResult | None) -> bool:
    """Whether the idempotency check holds probes (a request sent, an answer) to show."""
    evidence = check.evidence if check is not None and isinstance(check.evidence, list) else []
    return any(isinstance(e, dict) and e.get("probe") for e in evidence)


def _shape_uses(assignment: Assignment) -> dict[str, bool]:
    """check id -> whether it applies to the assignment (its shape, and its overrides)."""
    return {
        cid: rule.applies
        for cid, rule in shape_rules(assignment.shape, assignment.check_rules).items()
    }


# The service checks whose evidence holds one item per probe request, richest first:
# degrades_gracefully and schema_valid judge every request sent, caches only the repeats.
_TRANSCRIPT_SOURCES = (DEGRADES_GRACEFULLY, SCHEMA_VALID, CACHES)
_LINE_ORDER = {line.label: i for i, line in enumerate(PROBE_LINES)}
_LINES = {line.label: line for line in PROBE_LINES}


def probe_transcript(checks: list[CheckResult]) -> list[dict[str, Any]]:
    """What the candidate's service answered, one entry per probe request in the order sent
    (each log line, then its repeat): the request line and body, the status (or why there
    was none), the body it answered, and what the probe made of it.

    Read from the service checks' evidence (`Exchange.evidence`, redacted and capped when
    stored); a request is listed once, with the first check's verdict on it.
    """
    by_id = {c.check_id: c for c in checks if c.check_id in PROBE_CHECKS}
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for cid in _TRANSCRIPT_SOURCES:
        check = by_id.get(cid)
        for item in check.evidence if check and isinstance(check.evidence, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("request"), str):
                continue
            label, repeat = str(item.get("probe") or ""), item.get("repeat")
            key = (label, repeat if isinstance(repeat, int) else 0)
            if label and key not in seen:
                seen[key] = _exchange_shown(item, label, key[1])
    return sorted(seen.values(), key=lambda x: (_LINE_ORDER.get(x["label"], 99), x["repeat"]))


# As stored (capped at EVIDENCE_CHARS, with a note of what was cut), bounded again here.
_SHOWN_CHARS = EVIDENCE_CHARS + 64


def _exchange_shown(item: dict[str, Any], label: str, repeat: int) -> dict[str, Any]:
    # The driver wrote "METHOD /path?query BODY": the target has no space (it is URL-encoded).
    method, _, rest = item["request"].partition(" ")
    target, _, body = rest.partition(" ")
    status = item.get("status")
    return {
        "label": label,
        "repeat": repeat,
        "method": method[:16],
        "target": target[:EVIDENCE_CHARS],
        "body": body[:_SHOWN_CHARS],
        "status": status if isinstance(status, int) else None,
        "error": str(item.get("error") or "")[:EVIDENCE_CHARS],
        "response": str(item.get("response") or "")[:_SHOWN_CHARS],
        "verdict": _verdict(str(item.get("message") or ""), label, repeat)[:EVIDENCE_CHARS],
    }


def _verdict(message: str, label: str, repeat: int) -> str:
    """The check's word on one request, without the line's name (the entry shows it)."""
    line = _LINES.get(label)
    if line is not None:
        who = Exchange(index=0, line=line, repeat=repeat, request="").who + ": "
        if message.startswith(who):
            return message[len(who) :]
    return message


def _first_turns(submission: Submission, paths: set[str]) -> dict[str, str]:
    """path -> "thread.index" of the first turn rebuilt from that recording."""
    if not paths:
        return {}
    out: dict[str, str] = {}
    rows = (
        submission.turns.filter(recording__path__in=paths)
        .order_by("thread", "index")
        .values_list("recording__path", "thread", "index")
    )
    for path, thread, index in rows[:5000]:
        out.setdefault(path, f"{thread}.{index}")
    return out


def assignment_rules(assignment: Assignment) -> list[dict[str, object]]:
    """Every check with whether it applies to this assignment and what pass means, in
    catalog order: the rules a reviewer reads before scoring."""
    rules = shape_rules(assignment.shape, assignment.check_rules)
    return [
        {
            "id": cid,
            "title": spec.title,
            "applies": rules[cid].applies,
            "means": rules[cid].means if rules[cid].applies else rules[cid].reason,
            "overridden": cid in (assignment.check_rules or {}),
        }
        for cid, spec in CATALOG.items()
    ]


@dataclass(frozen=True)
class CohortOthers:
    """The other hand-ins the cohort checks (`cohort.recordings_unique`,
    `cohort.code_similarity`) name for a submission, as one viewer
    may see them: `visible` maps the submissions this viewer may open (pk -> Submission, its
    candidate loaded); any other stays "another candidate's hand-in", neither name nor path
    shown. `updated` is when an outcome was last written: another hand-in's analysis
    rewrites it, with no job of this submission changing."""

    updated: datetime | None = None
    visible: dict[int, Submission] = field(default_factory=dict)


def cohort_others(user: Any, submission: Submission) -> CohortOthers:
    """What this viewer may see of the hand-ins this submission shares recorded ids or
    similar source files with."""
    rows = list(
        submission.checks.filter(check_id__in=(RECORDINGS_UNIQUE, CODE_SIMILARITY))
        .order_by("-updated")
        .values_list("evidence", "updated")
    )
    if not rows:
        return CohortOthers()
    updated = rows[0][1]
    named = {
        e[OTHER].get("submission")
        for evidence, _ in rows
        for e in evidence
        if isinstance(e, dict) and isinstance(e.get(OTHER), dict)
    }
    if not named:
        return CohortOthers(updated)
    seen = Submission.objects.visible_to(user).filter(pk__in=named).select_related("candidate")
    return CohortOthers(updated, {s.pk: s for s in seen})
