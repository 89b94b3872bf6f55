"""Storing one analysed tree: Recording, Interaction, TraceRow, Turn and Blob rows, and the
parse findings, written in batches as the analyser yields them.

The analyser (`cassettes_app.analysis`) parses and knows nothing of rows; this module turns
what it yields into rows, redacted (no credential is ever stored in full) and capped to the
columns' sizes. The analysis job calls `recordings_store` and `findings_store`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.db import connection, transaction
from django.utils.dateparse import parse_datetime

from cassettes_app.analysis import Analyzer, FileReport
from cassettes_app.analysis.sources import source_files
from cassettes_app.parsed import Body, ParsedFinding, ParsedRecording
from cassettes_app.response_ids import ResponseIdFound
from cassettes_app.secrets import TextProfile, json_text_profile, redact_message
from submissions.blobs import BlobWriter, RawJson, bulk_insert, row_maker
from submissions.models import (
    Finding,
    Interaction,
    Job,
    Recording,
    ResponseId,
    SourceFingerprint,
    Submission,
    TraceRow,
    Turn,
)
from submissions.redact import redact_header, redact_text

_BATCH = 1000
# Characters of message JSON queued in Turn rows before they are written.
_TURN_BATCH_CHARS = 4_000_000


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
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return writer.add(bytes(value))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return writer.add(text.encode("utf-8"), content_type="application/json", profile=profile)


_recording_row = row_maker(Recording)
_interaction_row = row_maker(Interaction)
_turn_row = row_maker(Turn)


class _Store:
    """Writes one submission's parsed files in batches (bulk inserts, one transaction each)."""

    def __init__(self, submission: Submission, analyzer: Analyzer) -> None:
        self.submission = submission
        self.analyzer = analyzer
        self.facts_seen = 0
        self.blobs = BlobWriter()
        self.recordings: list[SimpleNamespace] = []  # _recording_row rows
        self.interactions: list[tuple[SimpleNamespace, SimpleNamespace]] = []
        self.rows: list[tuple[SimpleNamespace, TraceRow]] = []
        # The recorded response ids, each value once (its first recording), capped.
        self.response_ids: list[ResponseId] = []
        self.id_values: set[str] = set()
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
        first: SimpleNamespace | None = None
        recordings: list[ParsedRecording | None] = list(result.recordings) or [None]
        for number, parsed in enumerate(recordings):
            rec = _recording_row(
                submission_id=self.submission.pk,
                path=report.path[:1024],
                role=report.role,
                format=result.format[:40],
                key="",
                recomputed_key="",  # the analyser's, given at flush
                model="",
                recorded_at=None,
                recorded_at_raw="",
                size=report.size,
                sha256=report.sha256,
                interaction_count=len(result.hops),
                turn_count=0,
                used=None,
                meta={},
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
                self._response_ids(report.response_ids[number], rec.path)
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

    def _response_ids(self, found_ids: Iterable[ResponseIdFound], path: str) -> None:
        """Queue the response ids this recording holds that no earlier one of the tree did."""
        for found in found_ids:
            if len(self.id_values) >= ResponseId.MAX_PER_SUBMISSION:
                return  # the rest of a hostile tree's ids are not kept
            if found.value not in self.id_values:
                self.id_values.add(found.value)
                self.response_ids.append(
                    ResponseId(
                        submission=self.submission, value=found.value, path=path, kind=found.kind
                    )
                )

    def _interaction(self, inter: Any) -> SimpleNamespace:
        return _interaction_row(
            recording_id=None,  # given once its recording is stored (flush)
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
            # One prepared INSERT (COPY on PostgreSQL) and one read of the new ids, where
            # bulk_create ran an INSERT ... RETURNING per 70 rows, each prepared by the ORM.
            bulk_insert(Recording, self.recordings)
            _ids_take(self.submission, self.recordings)
            for rec in self.recordings:
                self.by_path.setdefault(rec.path, rec.pk)
            for rec, inter in self.interactions:
                inter.recording_id = rec.pk
            for rec, row in self.rows:
                row.recording_id = rec.pk
            bulk_insert(Interaction, [i for _, i in self.interactions])
            bulk_insert(TraceRow, [r for _, r in self.rows])
            bulk_insert(ResponseId, self.response_ids)
        self.response_ids.clear()
        self.recordings.clear()
        self.interactions.clear()
        self.rows.clear()


def _ids_take(submission: Submission, recordings: list[SimpleNamespace]) -> None:
    """Give the recordings just inserted (in this order) their ids: the submission's newest.

    Only this job writes a submission's recordings (inside the transaction that inserted
    them), and ids grow in insertion order (SQLite's AUTOINCREMENT; PostgreSQL's sequence
    within one COPY); the paths read back must match, in order, or nothing is assumed.
    """
    if not recordings:
        return
    rows = list(
        Recording.objects.filter(submission=submission)
        .order_by("-pk")
        .values_list("pk", "path")[: len(recordings)]
    )
    rows.reverse()
    if [path for _, path in rows] != [rec.path for rec in recordings]:
        raise RuntimeError("the recordings read back are not the ones just inserted")
    for rec, (pk, _) in zip(recordings, rows, strict=True):
        rec.pk = pk


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
    out: dict[str, Any] = {}
    for key, value in list(meta.items())[:30]:
        if isinstance(value, str | int | float | bool) or value is None:
            out[str(key)[:100]] = value if not isinstance(value, str) else value[:500]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value[:20]):
            out[str(key)[:100]] = [v[:200] for v in value[:20]]
    return out


def recordings_clear(*, submission: Submission) -> None:
    """Remove what an earlier analysis of this submission stored (a re-run replaces it)."""
    Turn.objects.filter(submission=submission).delete()
    ResponseId.objects.filter(submission=submission).delete()
    SourceFingerprint.objects.filter(submission=submission).delete()
    TraceRow.objects.filter(submission=submission).delete()
    Recording.objects.filter(submission=submission).delete()
    Finding.objects.filter(submission=submission, job__kind=Job.Kind.ANALYSIS).delete()


@dataclass(frozen=True, slots=True)
class Stored:
    """What `recordings_store` wrote: how many files, how many secrets found in the tree."""

    files: int
    secret_hits: int


def recordings_store(
    *,
    submission: Submission,
    analyzer: Analyzer,
    step: Callable[[str, int], None],
    log: Callable[[str], None],
) -> Stored:
    """Replace what an earlier analysis stored with every file, trace row and turn the
    analyser finds in the tree; `step` and `log` report progress (label, percent)."""
    with transaction.atomic():
        recordings_clear(submission=submission)
    store = _Store(submission, analyzer)
    step("parse", 5)
    count = 0
    for report in analyzer.files():
        store.file(report)
        count += 1
        if count % 200 == 0:
            step(f"parse ({count} files)", min(60, 5 + count // 200))
    store.flush()
    pool = analyzer.pool
    log(
        f"parsed {count} recording files"
        + (
            f" in {pool.processes} processes (peak {pool.peak_rss_kib // 1024} MB each)"
            f" and this one ({pool.examined_here} files)"
            if pool.processes
            else ""
        )
    )

    step("secrets", 65)
    hits = list(analyzer.secret_hits())
    step("conversations", 75)
    _turns_store(submission, analyzer, store)
    return Stored(files=count, secret_hits=len(hits))


def _turns_store(submission: Submission, analyzer: Analyzer, store: _Store) -> None:
    """Write the rebuilt conversations' turns, then correct the recordings' turn counts."""
    # Turns stream out of the analyser and are written in batches bounded by count and text.
    counted: dict[str, int] = {}
    turns: list[SimpleNamespace] = []
    chars = 0
    for thread_index, turn in analyzer.turn_json():
        counted[turn.path] = counted.get(turn.path, 0) + 1
        # Never store a credential in full. A turn whose texts can hold none (an empty
        # profile: its file's, narrowed to the literals its own JSON holds) has its JSON
        # stored as the spool keeps it. A file's URL or headers put `api` or `://` in its
        # profile; a turn's messages rarely hold them.
        profile = store.turn_profiles.get(turn.path)
        if profile is None or not profile.empty:  # else nothing to narrow: no join
            joined = "\n".join([*turn.new_messages, turn.response or ""])
            profile = json_text_profile(joined, profile)
        new_messages: list[dict[str, Any]] | RawJson
        response: dict[str, Any] | RawJson | None
        if profile is not None and profile.empty:
            new_messages = RawJson("[" + ", ".join(turn.new_messages) + "]")
            response = RawJson(turn.response) if turn.response is not None else None
        else:
            new_messages = [
                redact_message(json.loads(m), profile=profile) for m in turn.new_messages
            ]
            response = (
                redact_message(json.loads(turn.response), profile=profile)
                if turn.response is not None
                else None
            )
        turns.append(
            _turn_row(
                submission_id=submission.pk,
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
        chars += sum(map(len, turn.new_messages)) + len(turn.response or "")
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


def fingerprints_store(*, submission: Submission, root: Path) -> int:
    """Store the winnowed fingerprints of the tree's source files (an earlier analysis's
    are cleared with its recordings); how many source files were fingerprinted."""
    rows: list[SourceFingerprint] = []
    kept = files = 0
    for source in source_files(root):
        room = SourceFingerprint.MAX_PER_SUBMISSION - kept
        if room <= 0:
            break  # the rest of a hostile tree's files are not kept
        files += 1
        path = source.path[:1024]
        rows.extend(
            SourceFingerprint(submission=submission, path=path, hash=h, line=a, end_line=b)
            for h, (a, b) in zip(source.hashes[:room], source.lines, strict=False)
        )
        kept += min(room, len(source.hashes))
        if len(rows) >= _BATCH * 10:
            SourceFingerprint.objects.bulk_create(rows, batch_size=_BATCH)
            rows.clear()
    SourceFingerprint.objects.bulk_create(rows, batch_size=_BATCH)
    return files


def findings_store(*, submission: Submission, job: Job, findings: Iterable[ParsedFinding]) -> None:
    """The analyser's findings as Finding rows of this job, messages redacted."""
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
            for f in findings
        ],
        batch_size=_BATCH,
    )


@contextmanager
def unlogged_queries() -> Iterator[None]:
    """Run without Django's DEBUG query log, unless something asked for it explicitly.

    With DEBUG on, every query is kept in `connection.queries` with its parameters quoted
    into the SQL text: for this job that is every body of the submission, hex-encoded, held
    until the job ends. A test capturing queries sets `force_debug_cursor` and still sees
    them.
    """
    if not connection.queries_logged or connection.force_debug_cursor:
        yield
        return
    connection.make_debug_cursor = connection.make_cursor  # type: ignore[method-assign,assignment]  # a plain cursor where Django would log
    try:
        yield
    finally:
        del connection.make_debug_cursor
