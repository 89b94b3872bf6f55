"""The analyser: discovers, parses and checks the recordings of one unpacked tree."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from cassettes_app import safeload, secrets, threads
from cassettes_app.analysis.files import Entry, read_capped, walk_tree
from cassettes_app.analysis.globs import compile_glob
from cassettes_app.analysis.reports import DECODED_NOTES, FileReport, literal_bodies
from cassettes_app.analysis.turns import (
    MEMO_MAX,
    ThreadView,
    TurnSpool,
    TurnView,
    body_payload,
    compact_message,
    lean_key,
    message_dict,
    small_usage,
)
from cassettes_app.bodies import ascii_json
from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.cassettes import (
    UNKNOWN_SHAPE,
    KeyReport,
    RecordingFacts,
    cassettes_fresh,
    cassettes_keys_match,
    cassettes_model_metadata,
    cassettes_no_secrets,
    cassettes_per_turn,
    cassettes_pruned,
    key_report,
    parse_time,
)
from cassettes_app.checks.catalog import MODEL_METADATA
from cassettes_app.checks.docs.entrypoints import docs_entrypoints
from cassettes_app.checks.docs.replay_notes import docs_replay_notes
from cassettes_app.checks.ledger import ledger_consistent
from cassettes_app.checks.provenance import History, NoHistory, cassettes_provenance
from cassettes_app.checks.runlog import RUN_LOG
from cassettes_app.checks.trace import (
    trace_idempotency_keys_logged,
    trace_no_invented_ids,
    trace_stub_hops_present,
    trace_tool_calls_reach_stub,
)
from cassettes_app.config import AnalysisConfig
from cassettes_app.formats import parse_file
from cassettes_app.formats.base import OWN_FIELD as OWN_TIME
from cassettes_app.formats.base import find_model
from cassettes_app.formats.conversation import SYNTHETIC
from cassettes_app.formats.sniff import looks_binary
from cassettes_app.keys import (
    DEFAULT_KEY_LENGTH,
    canonical_request,
    is_key_shape,
    key_line,
    mismatch_variants,
    recompute_key,
    scheme_keys,
)
from cassettes_app.parsed import LedgerEntry, ParsedFinding, ParsedRecording, ParseResult, TraceHop
from cassettes_app.providers import Exchange, normalise
from cassettes_app.secrets import SecretHit, TextProfile
from cassettes_app.text import clipped

ROLES = ("ledger", "trace", "recording")  # a file matched by several roles takes the first

_HINTS = {"ledger": "ledger", "trace": "trace", "recording": None}
OWN_MODEL = "the recording's own `model` field"


# Characters of a recomputed canonical request kept in the evidence of a key that differs.
CANONICAL_CHARS = 4_000


class Analyzer:
    """Discovers, parses and checks the recordings of one unpacked submission tree."""

    def __init__(self, root: Path, config: AnalysisConfig) -> None:
        """Nothing is read until `files()` is iterated."""
        self.root = Path(root)
        self.config = config
        self.findings: list[ParsedFinding] = []
        self.facts: list[RecordingFacts] = []
        self.hops: list[TraceHop] = []
        self.ledger: list[LedgerEntry] = []
        # (path, interaction index) and the exchange's message keys, for threading; what the
        # turns show is spooled to a temporary file.
        self.exchanges: list[tuple[tuple[str, int], threads.KeyedExchange]] = []
        self.key_report = KeyReport()
        self.trace_path: str | None = None
        self.ledger_path: str | None = None
        self.reports: int = 0  # files yielded by files()
        # Hits from parsed structure, and from the text scan of whole files (merged when read).
        self._hits: dict[tuple[str, str], SecretHit] = {}
        self._text_hits: dict[tuple[str, str], SecretHit] = {}
        self._text_scanned: set[str] = set()  # files whose text scan is done
        self._scanned = False
        self._files_done = False
        self._analysed: tuple[list[threads.Thread], list[Any]] | None = None
        self._skipped: set[str] = set()
        self._spool: TurnSpool | None = None
        self._keys: dict[tuple, tuple] = {}  # one shared object per distinct message key

    # -- discovery and parsing --------------------------------------------------------

    def _discover(self) -> list[tuple[str, str]]:
        """(path, role) of every file the globs name, sorted by path; findings for the rest."""
        entries = walk_tree(self.root, self.findings)
        cfg = self.config
        role_globs = {
            "ledger": cfg.ledger_globs,
            "trace": cfg.trace_globs,
            "recording": cfg.recording_globs,
        }
        chosen: dict[str, str] = {}
        for role in ROLES:
            for pattern in role_globs[role]:
                glob = compile_glob(pattern)
                if glob is None:
                    self.findings.append(
                        ParsedFinding(
                            "bad_glob",
                            "warn",
                            pattern,
                            None,
                            f"{role} glob {pattern!r} is empty or leaves the repository; ignored",
                        )
                    )
                    continue
                hits = 0
                for entry in entries:
                    if entry.kind == "dir_link":
                        if glob.matches(entry.rel) or glob.may_contain(entry.rel):
                            hits += 1
                            self._skip(entry, "symbolic link to a directory; not followed")
                        continue
                    if not glob.matches(entry.rel):
                        continue
                    hits += 1
                    if entry.kind == "link":
                        self._skip(entry, "symbolic link; not followed")
                    elif entry.kind == "other":
                        self._skip(entry, "not a regular file; not read")
                    else:
                        chosen.setdefault(entry.rel, role)
                if not hits:
                    self.findings.append(
                        ParsedFinding(
                            "glob_no_match",
                            "info",
                            pattern,
                            None,
                            f"{role} glob {pattern!r} matched no file",
                        )
                    )
        return sorted(chosen.items())

    def _skip(self, entry: Entry, why: str) -> None:
        finding = ParsedFinding(
            "symlink_skipped" if "link" in entry.kind else "not_regular_file",
            "warn",
            entry.rel,
            None,
            why,
        )
        if entry.rel not in self._skipped:  # several globs may name the same link
            self._skipped.add(entry.rel)
            self.findings.append(finding)

    def files(self) -> Iterator[FileReport]:
        """Parse every discovered file, yielding each report as soon as it is parsed."""
        self.findings.clear()
        self.facts.clear()
        self.hops.clear()
        self.ledger.clear()
        self.exchanges.clear()
        self._hits.clear()
        self._text_hits.clear()
        self._text_scanned.clear()
        self._scanned = False
        self._files_done = False
        self._analysed = None
        self._skipped.clear()
        self._keys.clear()
        if self._spool is not None:
            self._spool.close()
        self._spool = TurnSpool()
        self.key_report = KeyReport()
        self.trace_path = self.ledger_path = None
        self.reports = 0
        limits = self.config.limits
        for rel, role in self._discover():
            try:
                data, size, sha = read_capped(self.root, rel, limits.max_file_bytes)
            except OSError as exc:
                why = (
                    "symbolic link; not followed"
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR)
                    else f"cannot read: {exc.strerror or exc}"
                )
                self.findings.append(ParsedFinding("unreadable", "warn", rel, None, why))
                continue
            if data is None:
                result = ParseResult(
                    "unknown",
                    findings=[
                        ParsedFinding(
                            "file_too_large",
                            "error",
                            rel,
                            None,
                            f"file is {size} bytes, over max_file_bytes "
                            f"({limits.max_file_bytes}); not parsed",
                        )
                    ],
                )
            else:
                result = parse_file(rel, data, limits, format_hint=_HINTS[role])
            profile = self._scan_file(rel, data)
            if profile is not None and not literal_bodies(result, data):
                profile = None
            exchanges = len(self.exchanges)
            self._absorb(rel, role, data, size, sha, result)
            self.reports += 1
            report = FileReport(
                rel, role, size, sha, result, profile, len(self.exchanges) - exchanges
            )
            del data, result  # the caller owns the bodies from here on
            yield report
            del report
        self.key_report = key_report(self.facts, infer=self.config.shape != "cassette")
        self._files_done = True

    def _absorb(
        self, rel: str, role: str, data: bytes | None, size: int, sha: str, result: ParseResult
    ) -> None:
        """Keep the compact facts of one parsed file; scan its structured parts for secrets."""
        self.findings.extend(result.findings)
        if result.hops:
            self.hops.extend(result.hops)
            self.trace_path = self.trace_path or rel
            for hop in result.hops:
                self._hop_secrets(rel, hop)
        if result.ledger:
            self.ledger.extend(result.ledger)
            self.ledger_path = self.ledger_path or rel
        # Bodies whose text is literally in a text-scanned file need no second scan.
        text_scanned = (
            data is not None
            and size <= self.config.max_scan_file_bytes
            and not looks_binary(data[:8192])
        )
        cache: list[Any] = []

        def load_doc() -> Any:
            """The file's JSON, loaded once and only when a check needs more than the parse."""
            if not cache:
                try:
                    cache.append(
                        safeload.load_json(data, self.config.limits) if data is not None else None
                    )
                except (safeload.LoadError, ValueError, RecursionError):
                    cache.append(None)
            return cache[0]

        for recording in result.recordings:
            for interaction in recording.interactions:
                self._interaction_secrets(rel, interaction, text_scanned)
            if role != "recording":
                continue
            self.facts.append(self._facts(rel, size, sha, recording, load_doc, data))
            for interaction in recording.interactions:
                exchange = normalise(
                    body_payload(interaction.request_body),
                    body_payload(interaction.response_body),
                    interaction.url,
                )
                if exchange.provider == "unknown":
                    continue  # fixtures, plain HTTP: nothing a conversation can be built from
                self.exchanges.append(((rel, interaction.index), self._keyed(exchange)))
        if role == "recording" and not result.recordings and result.format == UNKNOWN_SHAPE:
            # Matched as a recording but in a shape no reader knows: still one of the
            # submission's recordings (the replay counts it), with what can be read of it.
            # A file that is not even a JSON object is a broken one, reported as such.
            doc = load_doc()
            if isinstance(doc, dict):
                self.facts.append(unknown_shape_facts(rel, size, sha, doc))

    def _keyed(self, ex: Exchange) -> threads.KeyedExchange:
        """What threading needs of an exchange (message keys); the rest goes to the spool."""
        assert self._spool is not None
        keys = self._keys
        if len(keys) >= MEMO_MAX:
            keys.clear()  # keys already handed out stay shared; new ones start a new table
        request = [m for m in map(compact_message, ex.request_messages) if m is not None]
        response = compact_message(ex.response)
        request_keys = []
        offsets = []
        for message in request:
            key = lean_key(threads.message_key(message))
            request_keys.append(keys.setdefault(key, key))
            offsets.append(self._spool.add(message_dict(message), shared=True))
        reply = reply_at = None
        if response is not None:
            reply = lean_key(threads.message_key(response))
            reply = keys.setdefault(reply, reply)
            reply_at = self._spool.add(message_dict(response), shared=True)
        payload = self._spool.add((small_usage(ex.usage), tuple(offsets), reply_at))
        model = ex.model
        if isinstance(model, str):
            model = sys.intern(model) if len(model) <= 200 else model
        return threads.KeyedExchange(tuple(request_keys), reply, model, payload)

    def _facts(
        self,
        rel: str,
        size: int,
        sha: str,
        rec: ParsedRecording,
        load_doc: Callable[[], Any],
        data: bytes | None = None,
    ) -> RecordingFacts:
        """Compact facts of one recording: key comparison, model, times, size."""
        volatile = tuple(self.config.volatile_fields)
        first = rec.interactions[0] if rec.interactions else None
        payload = first.request_body.json if first is not None else None
        recomputed = None
        canonical = None
        labels: tuple[str, ...] = ()
        kept: tuple[str, ...] = ()
        also: tuple[str, ...] = ()
        present: tuple[str, ...] = ()
        # Only the cassette task's {key, request, ...} files are keyed by the canonical request.
        if rec.format == "cassette_json" and rec.key is not None and isinstance(payload, dict):
            shaped = is_key_shape(rec.key)
            length = len(rec.key) if shaped else DEFAULT_KEY_LENGTH
            present = tuple(v for v in volatile if v in payload)
            try:
                ascii_likely = data is not None and ascii_json(data)
                recomputed = recompute_key(payload, volatile, length, ascii_likely=ascii_likely)
            except (TypeError, ValueError, RecursionError):
                recomputed = None
            if recomputed is not None and recomputed != rec.key:
                canonical = clipped(canonical_request(payload, volatile), CANONICAL_CHARS)
                if not shaped:
                    labels = ("stored key is not 8-64 hex digits, so no sha256 prefix",)
                else:
                    doc = load_doc()
                    variants = mismatch_variants(
                        payload, rec.key, volatile, doc if isinstance(doc, dict) else None
                    )
                    labels = tuple(v.label for v in variants)
                    kept = tuple(
                        dict.fromkeys(
                            f for v in variants if v.kind in ("kept", "all_kept") for f in v.fields
                        )
                    )
                    also = tuple(
                        dict.fromkeys(f for v in variants if v.kind == "dropped" for f in v.fields)
                    )
        schemes: tuple[tuple[str, str], ...] = ()
        if rec.key is not None and self.config.shape != "cassette":
            # The brief only shows a sample key: every scheme a hand-in may use is tried.
            doc = load_doc()
            schemes = scheme_keys(
                rec.key, payload, doc if isinstance(doc, dict) else None, volatile
            )
        embedded = 0
        if "turns" in rec.meta.get("extra_fields", ()):
            doc = load_doc()
            turns = doc.get("turns") if isinstance(doc, dict) else None
            embedded = len(turns) if isinstance(turns, list) else 1
        served = [rec.meta.get("payload_model"), *rec.meta.get("models", ())]
        raw_times = _raw_times(rec)
        times = [t for t in (parse_time(r) for r in dict.fromkeys(raw_times) if r) if t]
        return RecordingFacts(
            path=rel,
            format=rec.format,
            key=rec.key,
            recomputed_key=recomputed,
            key_labels=labels,
            kept_fields=kept,
            also_dropped=also,
            volatile_present=present,
            key_schemes=schemes,
            key_line=key_line(data, rec.key) if rec.key is not None else None,
            canonical=canonical,
            model=rec.model,
            model_source=rec.meta.get("model_source") or (OWN_MODEL if rec.model else None),
            served_models=tuple(dict.fromkeys(m for m in served if isinstance(m, str) and m)),
            recorded_at=own_time(rec),
            time_source=rec.meta.get("time_source") or (OWN_TIME if rec.recorded_at else None),
            oldest=min(times) if times else None,
            newest=max(times) if times else None,
            size=size,
            sha256=sha,
            interactions=len(rec.interactions),
            embedded_turns=embedded,
        )

    # -- secrets ---------------------------------------------------------------------

    def _scan_file(self, rel: str, data: bytes | None) -> TextProfile | None:
        """The tree scan's text scan of one discovered file, done while its bytes are here.

        Returns the text's secrets profile, or None when it was not scanned here (too large,
        unreadable: `_scan_tree` reads it, or reports it, as for any other file) or is
        binary.
        """
        if data is None or len(data) > self.config.max_scan_file_bytes:
            return None
        self._text_scanned.add(rel)
        if not data or looks_binary(data[:8192]):
            return None
        hits, profile = secrets.scan_and_profile(data.decode("utf-8", "replace"), rel)
        self._add_text_hits(hits)
        return profile

    def _add_text_hits(self, hits: list[SecretHit]) -> None:
        for hit in hits:
            self._text_hits.setdefault((hit.fingerprint, hit.path), hit)

    def _add_hits(self, hits: list[SecretHit]) -> None:
        for hit in hits:
            key = (hit.fingerprint, hit.path)
            known = self._hits.get(key)
            if known is None:
                self._hits[key] = hit
            elif known.line is None and hit.line is not None:
                # Keep the structured context ("request header Authorization"), add the line.
                self._hits[key] = replace(known, line=hit.line, column=hit.column)

    def _interaction_secrets(self, rel: str, interaction: Any, text_scanned: bool) -> None:
        self._add_hits(secrets.scan_headers(interaction.request_headers, rel, where="request"))
        self._add_hits(secrets.scan_headers(interaction.response_headers, rel, where="response"))
        if interaction.url:
            self._add_hits(secrets.scan_url(interaction.url, rel))
        for body in (interaction.request_body, interaction.response_body):
            if body is interaction.request_body and body.encoding_note == SYNTHETIC:
                # A transcript's call repeats the conversation so far: each of its messages
                # is scanned once, in the file's text or as the reply it was.
                continue
            notes = set((body.encoding_note or "").split("; "))
            if text_scanned and not notes & DECODED_NOTES:
                continue
            if body.json is not None and not any(n.startswith("sse") for n in notes):
                self._add_hits(secrets.scan_json(body.json, rel))
            elif body.text:
                self._add_hits(secrets.scan_text(body.text, rel))

    def _hop_secrets(self, rel: str, hop: TraceHop) -> None:
        line = hop.line
        self._add_hits(secrets.scan_headers(hop.request_headers, rel, where="request", line=line))
        if hop.url:
            self._add_hits(secrets.scan_url(hop.url, rel, line=line))
        for value in (hop.req, hop.resp):
            if value is not None:
                self._add_hits(secrets.scan_json(value, rel, line=line))

    def secret_hits(self) -> Iterator[SecretHit]:
        """Every credential in the tree's text files and in the parsed recordings and traces."""
        if not self._files_done:
            for _ in self.files():
                pass
        if not self._scanned:
            self._scan_tree()
            self._scanned = True
        # As if the text scan came after all structured scans: a structured hit keeps its
        # context and takes the line and column of the first text hit of the same secret.
        merged = dict(self._hits)
        for key, hit in self._text_hits.items():
            known = merged.get(key)
            if known is None:
                merged[key] = hit
            elif known.line is None and hit.line is not None:
                merged[key] = replace(known, line=hit.line, column=hit.column)
        yield from sorted(merged.values(), key=lambda h: (h.path, h.line or 0, h.rule))

    def _scan_tree(self) -> None:
        """Scan every regular text file (links never followed) up to max_scan_file_bytes."""
        cap = self.config.max_scan_file_bytes
        for entry in walk_tree(self.root, []):
            if entry.kind != "file" or entry.rel in self._text_scanned:
                continue
            try:
                data, size, _ = read_capped(self.root, entry.rel, cap, hash_large=False)
            except OSError:
                continue
            if data is None:
                self.findings.append(
                    ParsedFinding(
                        "not_scanned",
                        "info",
                        entry.rel,
                        None,
                        f"{size} bytes, over max_scan_file_bytes ({cap}); not scanned for secrets",
                    )
                )
                continue
            if not data or looks_binary(data[:8192]):
                continue
            text = data.decode("utf-8", "replace")
            del data
            self._add_text_hits(secrets.scan_text(text, entry.rel))

    # -- conversations ---------------------------------------------------------------

    def _analyse(self) -> tuple[list[threads.Thread], list[Any]]:
        if self._analysed is None:
            if not self._files_done:
                for _ in self.files():
                    pass
            self._analysed = threads.analyse(self.exchanges)
        return self._analysed

    @property
    def blobs(self) -> list[tuple[str, int]]:
        """(path, interaction index) of requests carrying several unrecorded earlier turns."""
        return list(self._analyse()[1])

    def turn_views(self) -> Iterator[tuple[int, TurnView]]:
        """Every turn of the rebuilt conversations as (thread index, turn), one at a time.

        Threads come in order, and each thread's turns in order; only the turn being
        yielded holds its message texts.
        """
        for index, thread in enumerate(self._analyse()[0]):
            for turn in thread.turns:
                yield index, self._turn_view(turn)

    def _turn_view(self, turn: threads.ParsedTurn) -> TurnView:
        path, interaction_index = turn.exchange_ref
        if turn.payload is None:  # a plain Exchange (never from files(), kept for callers)
            new_messages = [message_dict(m) for m in turn.new_messages]
            response = message_dict(turn.response) if turn.response else None
            usage = dict(turn.usage)
        else:
            if self._spool is None:
                raise RuntimeError("turn texts were dropped by close(); run files() again")
            usage, offsets, reply_at = self._spool.get(turn.payload)
            new_messages = [self._spool.get(offset) for offset in offsets[turn.cut :]]
            response = self._spool.get(reply_at) if reply_at is not None else None
            usage = dict(usage) if isinstance(usage, dict) else {}
        return TurnView(
            index=turn.index,
            path=path,
            interaction_index=interaction_index,
            new_messages=new_messages,
            response=response,
            model=turn.model,
            usage=usage,
        )

    def close(self) -> None:
        """Drop the spooled turn texts: turn_views and threads need files() again after."""
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def threads(self) -> list[ThreadView]:
        """Conversations rebuilt over all recordings' interactions, as plain data."""
        views = [
            ThreadView(index, [], thread.forked_from)
            for index, thread in enumerate(self._analyse()[0])
        ]
        for index, view in self.turn_views():
            views[index].turns.append(view)
        return views

    # -- checks ----------------------------------------------------------------------

    @property
    def key_findings(self) -> list[dict[str, Any]]:
        """`key_report` entries as JSON-able dicts (for docs.replay_notes)."""
        return [entry.as_dict() for entry in self.key_report.entries]

    def _model_metadata(self) -> CheckOutcome:
        """Where the brief puts the model: in each recording, or (run-twice) in the run log,
        which only a replay writes, so the replay job judges it there."""
        if self.config.shape == "run-twice":
            return skip(
                MODEL_METADATA,
                f"run-twice fixtures carry no model: the replay looks in {RUN_LOG}",
            )
        return cassettes_model_metadata(self.facts)

    def checks(self, history: History | NoHistory | None = None) -> list[CheckOutcome]:
        """Every static outcome: `cassettes.*`, `trace.*` and `ledger.consistent` when the
        tree or the assignment has a trace or a ledger, and `docs.*` (parsing and scanning
        first if not done yet). `history`: the hand-in's git history, when it has one."""
        hits = list(self.secret_hits())
        _, blobs = self._analyse()
        cfg = self.config
        return [
            cassettes_keys_match(self.facts, cfg),
            cassettes_no_secrets(hits),
            self._model_metadata(),
            cassettes_fresh(self.facts, cfg),
            cassettes_pruned(self.facts, cfg),
            cassettes_per_turn(blobs, self.facts),
            cassettes_provenance(history or NoHistory(), self.recording_paths, self.file_times),
            *self._trace_checks(),
            *self._ledger_checks(),
            docs_entrypoints(self.root, cfg.shape, cfg.replay_command),
            docs_replay_notes(
                self.root,
                volatile_fields=list(cfg.volatile_fields),
                key_findings=self.key_report.as_dict(),
                shape=cfg.shape,
            ),
        ]

    @property
    def recording_paths(self) -> list[str]:
        """The paths of the recordings found (after `files()`), each once, in order."""
        return list(dict.fromkeys(f.path for f in self.facts))

    def file_times(self, rel: str, data: bytes) -> tuple[str, ...]:
        """The recording times of one version of a recording file, read as `files()` reads
        them: each recording's own time (its field, else a Date header or an interaction's)."""
        result = parse_file(rel, data, self.config.limits, format_hint=_HINTS["recording"])
        if result.recordings:
            return tuple(own_time(rec) or "" for rec in result.recordings)
        if result.format != UNKNOWN_SHAPE:
            return ()
        try:
            doc = safeload.load_json(data, self.config.limits)
        except (safeload.LoadError, ValueError, RecursionError):
            return ()
        if not isinstance(doc, dict):
            return ()
        return (unknown_shape_facts(rel, len(data), "", doc).recorded_at or "",)

    def _trace_checks(self) -> list[CheckOutcome]:
        """The four static `trace.*` outcomes, when there is a trace or the assignment
        names one (its first glob stands for the missing file)."""
        cfg = self.config
        if not (self.hops or cfg.trace_globs):
            return []
        path = self.trace_path or (cfg.trace_globs[0] if cfg.trace_globs else "")
        return [
            trace_stub_hops_present(self.hops, path),
            trace_tool_calls_reach_stub(self.hops, path),
            trace_no_invented_ids(self.hops, path, cfg.id_pattern),
            trace_idempotency_keys_logged(self.hops, path),
        ]

    def _ledger_checks(self) -> list[CheckOutcome]:
        """`ledger.consistent`, when there is a ledger or the assignment names one."""
        cfg = self.config
        if not (self.ledger or cfg.ledger_globs):
            return []
        return [ledger_consistent(self.ledger, self.ledger_path or (cfg.ledger_globs or ("",))[0])]


def _raw_times(rec: ParsedRecording) -> list[str | None]:
    return [
        rec.recorded_at,
        *(i.recorded_at for i in rec.interactions),
        *rec.meta.get("times", ()),
    ]


def own_time(rec: ParsedRecording) -> str | None:
    """A recording's own time as the analysis reads it: its field, else the first time its
    interactions or payloads carry (a Date header, a `created`)."""
    return rec.recorded_at or next((r for r in _raw_times(rec) if r), None)


# A recording time at the top of a file of a shape no reader knows, in the usual spellings.
_TIME_FIELDS = ("recorded_at", "recordedAt", "created_at", "createdAt", "created", "timestamp")


def unknown_shape_facts(rel: str, size: int, sha: str, doc: Any) -> RecordingFacts:
    """The facts of a recording no reader knows: its model where a payload keeps one (any
    usual nesting), its time from a top-level time field; the rest unknown."""
    found = find_model(doc) if isinstance(doc, dict) else None
    raw = next(
        (doc[k] for k in _TIME_FIELDS if isinstance(doc, dict) and doc.get(k) is not None), None
    )
    when = parse_time(raw)
    return RecordingFacts(
        path=rel,
        format=UNKNOWN_SHAPE,
        model=found[0] if found else None,
        model_source=f"the file's `{found[1]}`" if found else None,
        recorded_at=str(raw) if raw is not None else None,
        time_source="a top-level time field" if when else None,
        oldest=when,
        newest=when,
        size=size,
        sha256=sha,
    )
