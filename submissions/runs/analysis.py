"""The analysis job: discover and parse every recording, store it, and write static checks."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.utils.dateparse import parse_datetime

from cassettes_app.analysis import AnalysisConfig, Analyzer, FileReport
from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.docs.entrypoints import docs_entrypoints
from cassettes_app.checks.docs.replay_notes import docs_replay_notes
from cassettes_app.checks.ledger import ledger_consistent
from cassettes_app.checks.trace import (
    DEFAULT_ID_PATTERN,
    trace_idempotency_keys_logged,
    trace_no_invented_ids,
    trace_stub_hops_present,
    trace_tool_calls_reach_stub,
)
from cassettes_app.parsed import Body
from cassettes_app.secrets import TextProfile, redact_message
from submissions.blobs import BlobWriter, bulk_insert
from submissions.checks.store import checks_store
from submissions.intake.trees import submission_tree
from submissions.jobs.queue import job_create
from submissions.jobs.types import Outcome, Progress
from submissions.models import (
    Finding,
    Interaction,
    Job,
    Recording,
    Submission,
    TraceRow,
    Turn,
)
from submissions.redact import redact_header, redact_text

log = logging.getLogger(__name__)

_BATCH = 1000
# Characters of message text queued in Turn rows before they are written.
_TURN_BATCH_CHARS = 4_000_000


def analysis_config(submission: Submission) -> AnalysisConfig:
    """The assignment's settings as the pure analyser takes them."""
    a = submission.assignment
    return AnalysisConfig(
        shape=a.shape,
        recording_globs=tuple(a.recording_globs),
        trace_globs=tuple(a.trace_globs),
        ledger_globs=tuple(a.ledger_globs),
        volatile_fields=tuple(a.volatile_fields),
        stale_after_days=a.stale_after_days,
        expected_model=a.expected_model,
        id_pattern=a.id_pattern or DEFAULT_ID_PATTERN,
        now=submission.created,
    )


def _headers(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Headers as stored: credential values only in their redacted form."""
    return [[str(name)[:200], redact_header(str(name), str(value))[:4000]] for name, value in pairs]


def _when(raw: str | None) -> dt.datetime | None:
    """An aware datetime from an ISO-8601 string, or None (never guessed)."""
    if not raw:
        return None
    try:
        parsed = parse_datetime(str(raw).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def _body_blob(
    writer: BlobWriter, body: Body | None, profile: TextProfile | None = None
) -> str | None:
    if body is None or not body.data:
        return None
    return writer.add(
        body.data,
        content_type=body.content_type or "",
        is_binary=body.is_binary,
        truncated=body.truncated,
        profile=profile,
    )


def _json_blob(writer: BlobWriter, value: Any, profile: TextProfile | None = None) -> str | None:
    import json

    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return writer.add(bytes(value))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return writer.add(text.encode("utf-8"), content_type="application/json", profile=profile)


class _Store:
    """Writes one submission's parsed files in batches (bulk inserts, one transaction each)."""

    def __init__(self, submission: Submission, job: Job, analyzer: Analyzer) -> None:
        self.submission = submission
        self.job = job
        self.analyzer = analyzer
        self.facts_seen = 0
        self.blobs = BlobWriter()
        self.recordings: list[Recording] = []
        self.interactions: list[tuple[Recording, Interaction]] = []
        self.rows: list[tuple[Recording, TraceRow]] = []
        self.by_path: dict[str, int] = {}
        # Turns each path's recordings add (one per exchange), written with its first
        # recording; checked against the turns actually stored.
        self.turn_counts: dict[str, int] = {}
        self.report: FileReport | None = None  # the file being queued
        # Per file, what the redactor may trust for its turns' texts (see _turn_profile);
        # an empty profile (a secret-free file) means its turns need no redaction.
        self.turn_profiles: dict[str, TextProfile | None] = {}

    def file(self, report: FileReport) -> None:
        """Queue one parsed file's rows; bodies go to the blob writer and are dropped."""
        result = report.result
        self.report = report
        if report.turns:
            self.turn_profiles[report.path] = _turn_profile(report)
        first: Recording | None = None
        for parsed in result.recordings or [None]:
            rec = Recording(
                submission=self.submission,
                path=report.path[:1024],
                role=report.role,
                format=result.format[:40],
                size=report.size,
                sha256=report.sha256,
                interaction_count=len(result.hops),
            )
            if parsed is not None:
                rec.key = (parsed.key or "")[:128]
                rec.model = (parsed.model or "")[:200]
                rec.recorded_at = _when(parsed.recorded_at)
                rec.recorded_at_raw = (parsed.recorded_at or "")[:100]
                rec.interaction_count = len(parsed.interactions)
                rec.meta = _meta(parsed.meta)
                for inter in parsed.interactions:
                    self.interactions.append((rec, self._interaction(inter)))
            self.recordings.append(rec)
            first = first or rec
        assert first is not None
        if report.turns and len(report.path) <= 1024:  # a longer path gets no turn rows
            first.turn_count = report.turns
            self.turn_counts[report.path] = report.turns
        for hop in result.hops:
            self.rows.append((first, self._row(hop)))
        self.report = None
        if len(self.recordings) + len(self.interactions) + len(self.rows) >= _BATCH:
            self.flush()

    def _interaction(self, inter: Any) -> Interaction:
        return Interaction(
            index=inter.index,
            method=(inter.method or "")[:20],
            url=redact_text(inter.url or "")[:4000],
            status=inter.status if _http_status(inter.status) else None,
            request_headers=_headers(inter.request_headers),
            response_headers=_headers(inter.response_headers),
            request_blob_id=self._body(inter.request_body),
            response_blob_id=self._body(inter.response_body),
            recorded_at_raw=(inter.recorded_at or "")[:100],
            duration_ms=inter.duration_ms,
        )

    def _row(self, hop: Any) -> TraceRow:
        return TraceRow(
            submission=self.submission,
            line=hop.line,
            url=redact_text(hop.url or "")[:4000],
            method=(hop.method or "")[:20],
            status=hop.status if _http_status(hop.status) else None,
            trace_id=str(hop.trace_id or "")[:200],
            idempotency_key=str(hop.idempotency_key or "")[:200],
            request_headers=_headers(hop.request_headers),
            request_blob_id=_json_blob(self.blobs, hop.req, self._profile()),
            response_blob_id=_json_blob(self.blobs, hop.resp, self._profile()),
        )

    def _profile(self, body: Body | None = None) -> TextProfile | None:
        """What the redactor may trust for a body of the file being queued."""
        return self.report.body_profile(body) if self.report is not None else None

    def _body(self, body: Body | None) -> str | None:
        return _body_blob(self.blobs, body, self._profile(body))

    def flush(self) -> None:
        """Insert everything queued: blobs first (rows reference them), then recordings."""
        # The recomputed keys of the files parsed since the last flush.
        new_facts = self.analyzer.facts[self.facts_seen :]
        self.facts_seen = len(self.analyzer.facts)
        recomputed = {f.path: f.recomputed_key for f in new_facts if f.recomputed_key}
        for rec in self.recordings:
            rec.recomputed_key = (recomputed.get(rec.path) or "")[:128]
        with transaction.atomic():
            self.blobs.flush()
            Recording.objects.bulk_create(self.recordings, batch_size=_BATCH)
            for rec in self.recordings:
                self.by_path.setdefault(rec.path, rec.pk)
            for rec, inter in self.interactions:
                inter.recording_id = rec.pk
            for rec, row in self.rows:
                row.recording_id = rec.pk
            bulk_insert(Interaction, [i for _, i in self.interactions])
            bulk_insert(TraceRow, [r for _, r in self.rows])
        self.recordings.clear()
        self.interactions.clear()
        self.rows.clear()


def _turn_profile(report: FileReport) -> TextProfile | None:
    """The file's profile if it holds every body literally (so every turn text), else None."""
    for recording in report.result.recordings:
        for inter in recording.interactions:
            for body in (inter.request_body, inter.response_body):
                if body is not None and report.body_profile(body) is None:
                    return None
    return report.profile


def _http_status(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Small, JSON-safe metadata only."""
    out = {}
    for key, value in list(meta.items())[:30]:
        if isinstance(value, str | int | float | bool) or value is None:
            out[str(key)[:100]] = value if not isinstance(value, str) else value[:500]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value[:20]):
            out[str(key)[:100]] = [v[:200] for v in value[:20]]
    return out


def _clear(submission: Submission) -> None:
    """Remove what an earlier analysis of this submission stored (a re-run replaces it)."""
    Turn.objects.filter(submission=submission).delete()
    TraceRow.objects.filter(submission=submission).delete()
    Recording.objects.filter(submission=submission).delete()
    Finding.objects.filter(submission=submission, job__kind=Job.Kind.ANALYSIS).delete()


def _extra_checks(analyzer: Analyzer, submission: Submission) -> list[CheckOutcome]:
    """Trace, ledger and docs checks, fed from what the analyser collected."""
    a = submission.assignment
    out: list[CheckOutcome] = []
    if analyzer.hops or a.trace_globs:
        path = analyzer.trace_path or (a.trace_globs[0] if a.trace_globs else "")
        out += [
            trace_stub_hops_present(analyzer.hops, path),
            trace_tool_calls_reach_stub(analyzer.hops, path),
            trace_no_invented_ids(analyzer.hops, path, a.id_pattern or DEFAULT_ID_PATTERN),
            trace_idempotency_keys_logged(analyzer.hops, path),
        ]
    if analyzer.ledger or a.ledger_globs:
        out.append(
            ledger_consistent(analyzer.ledger, analyzer.ledger_path or (a.ledger_globs or [""])[0])
        )
    out.append(docs_entrypoints(analyzer.root, a.shape, a.replay_command))
    out.append(
        docs_replay_notes(
            analyzer.root,
            volatile_fields=list(a.volatile_fields),
            key_findings=analyzer.key_report.as_dict(),
            shape=a.shape,
        )
    )
    return out


def _next_jobs(submission: Submission, job: Job) -> None:
    """Queue what follows this analysis, once: a redelivered analysis must not queue twice,
    and a re-run analysis queues its own followers (jobs made before it do not count)."""
    assignment = submission.assignment
    existing = set(submission.jobs.filter(pk__gt=job.pk).values_list("kind", flat=True))
    if assignment.replay_command and Job.Kind.REPLAY not in existing:
        job_create(submission=submission, kind=Job.Kind.REPLAY)
    has_trace = TraceRow.objects.filter(submission=submission).exists()
    verifiable = submission.stub_url or assignment.stub_start_command
    if has_trace and verifiable and Job.Kind.TRACE not in existing:
        job_create(submission=submission, kind=Job.Kind.TRACE)
    if assignment.service_start_command and Job.Kind.PROBE not in existing:
        job_create(submission=submission, kind=Job.Kind.PROBE)


@contextmanager
def _unlogged_queries() -> Iterator[None]:
    """Run without Django's DEBUG query log, unless something asked for it explicitly.

    With DEBUG on, every query is kept in `connection.queries` with its parameters quoted
    into the SQL text: for this job that is every body of the submission, hex-encoded, held
    until the job ends. A test capturing queries sets `force_debug_cursor` and still sees
    them.
    """
    if not connection.queries_logged or connection.force_debug_cursor:
        yield
        return
    connection.make_debug_cursor = connection.make_cursor  # type: ignore[method-assign]
    try:
        yield
    finally:
        del connection.make_debug_cursor


def _turn_chars(turn: Any) -> int:
    """Roughly how much text a turn row carries (to size Turn batches)."""
    total = 0
    for message in [*turn.new_messages, turn.response or {}]:
        total += len(message.get("text") or "")
        for result in message.get("tool_results") or ():
            total += len(result.get("content") or "")
        for call in message.get("tool_calls") or ():
            args = call.get("arguments")
            total += len(args) if isinstance(args, str) else 64
    return total


def analysis_run(job: Job, progress: Progress) -> Outcome:
    """Parse every recording of the submission, store it, and write the static checks."""
    with _unlogged_queries():
        return _analysis(job, progress)


def _analysis(job: Job, progress: Progress) -> Outcome:
    submission = job.submission
    progress.step("unpack", 2)
    tree = submission_tree(submission)
    analyzer = Analyzer(tree, analysis_config(submission))
    with transaction.atomic():
        _clear(submission)
    store = _Store(submission, job, analyzer)
    progress.step("parse", 5)
    count = 0
    for report in analyzer.files():
        store.file(report)
        count += 1
        if count % 200 == 0:
            progress.step(f"parse ({count} files)", min(60, 5 + count // 200))
    store.flush()
    progress.log(f"parsed {count} recording files")

    progress.step("secrets", 65)
    hits = list(analyzer.secret_hits())
    progress.step("conversations", 75)
    # Turns stream out of the analyser and are written in batches bounded by count and text.
    counted: dict[str, int] = {}
    turns: list[Turn] = []
    chars = 0
    for thread_index, turn in analyzer.turn_views():
        counted[turn.path] = counted.get(turn.path, 0) + 1
        # Never store a credential in full.
        profile = store.turn_profiles.get(turn.path)
        new_messages = [redact_message(m, profile=profile) for m in turn.new_messages]
        response = redact_message(turn.response, profile=profile) if turn.response else None
        turns.append(
            Turn(
                submission=submission,
                thread=thread_index,
                index=turn.index,
                recording_id=store.by_path.get(turn.path),
                interaction_index=turn.interaction_index,
                model=(turn.model or "")[:200],
                new_messages=new_messages,
                response=response,
                usage=turn.usage or {},
            )
        )
        chars += _turn_chars(turn)
        if len(turns) >= _BATCH or chars >= _TURN_BATCH_CHARS:
            bulk_insert(Turn, turns)
            turns.clear()
            chars = 0
    bulk_insert(Turn, turns)
    del turns
    analyzer.close()
    # Recordings were written with the turn count their exchanges add (each exchange is one
    # turn); correct any that the threads do not bear out.
    expected = store.turn_counts
    stale = {p: n for p, n in counted.items() if p in store.by_path and expected.get(p) != n}
    stale.update({p: 0 for p in expected if p not in counted and p in store.by_path})
    if stale:
        Recording.objects.bulk_update(
            [Recording(pk=store.by_path[p], turn_count=n) for p, n in stale.items()],
            ["turn_count"],
            batch_size=_BATCH,
        )

    progress.step("checks", 90)
    outcomes = analyzer.checks() + _extra_checks(analyzer, submission)
    checks_store(submission, job, outcomes)
    Finding.objects.bulk_create(
        [
            Finding(
                submission=submission,
                job=job,
                kind=f.kind[:80],
                severity=f.severity,
                path=(f.path or "")[:1024],
                line=f.line,
                message=redact_text(f.message)[:4000],
            )
            for f in analyzer.findings
        ],
        batch_size=_BATCH,
    )
    _next_jobs(submission, job)
    failing = sum(1 for o in outcomes if o.status == "fail")
    summary = f"{count} files, {len(hits)} secret hits, {len(outcomes)} checks, {failing} failing"
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, summary)
