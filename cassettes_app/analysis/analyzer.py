"""The analyser: discovers, parses and checks the recordings of one unpacked tree."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from cassettes_app import safeload, secrets, threads
from cassettes_app.analysis.facts import own_time, unknown_shape_facts
from cassettes_app.analysis.files import Entry, read_capped, walk_tree
from cassettes_app.analysis.front import (
    HINTS,
    Examined,
    ExchangeParts,
    FrontConfig,
    PoolStats,
    examined,
    pool_size,
)
from cassettes_app.analysis.globs import compile_glob
from cassettes_app.analysis.reports import FileReport
from cassettes_app.analysis.turns import (
    MEMO_MAX,
    ThreadView,
    TurnJson,
    TurnSpool,
    TurnView,
    message_dict,
)
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
from cassettes_app.formats.sniff import looks_binary
from cassettes_app.parsed import LedgerEntry, ParsedFinding, ParseResult, TraceHop
from cassettes_app.secrets import SecretHit

ROLES = ("ledger", "trace", "recording")  # a file matched by several roles takes the first


class Analyzer:
    """Discovers, parses and checks the recordings of one unpacked submission tree."""

    def __init__(self, root: Path, config: AnalysisConfig, processes: int = 1) -> None:
        """Nothing is read until `files()` is iterated.

        `processes` > 1 lets `files()` read, parse and text-scan a large tree's files in
        that many processes (`front.examined`); the results are the same.
        """
        self.root = Path(root)
        self.config = config
        self.processes = processes
        self.pool = PoolStats()  # what the last files() started: none for a small tree
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
        front = FrontConfig(self.root, self.config)
        discovered = self._discover()
        workers = pool_size(self.processes, discovered, self.root)
        self.pool = PoolStats()
        spool = self._spool
        for done in examined(front, discovered, workers, self.pool, spool.segment):
            rel, role, size, sha = done.rel, done.role, done.size, done.sha
            result = done.result
            if result is None:
                why = done.unreadable or "cannot read"
                self.findings.append(ParsedFinding("unreadable", "warn", rel, None, why))
                continue
            if done.scanned:
                self._text_scanned.add(rel)
                self._add_text_hits(done.hits)
            profile = done.profile
            exchanges = len(self.exchanges)
            self._take(done, result)
            ids = tuple(done.response_ids)
            del done
            self.reports += 1
            report = FileReport(
                rel, role, size, sha, result, profile, len(self.exchanges) - exchanges, ids
            )
            del result  # the caller owns the bodies from here on
            yield report
            del report
        self.key_report = key_report(self.facts, infer=self.config.shape != "cassette")
        self._files_done = True

    def _take(self, done: Examined, result: ParseResult) -> None:
        """Keep what one examined file adds: findings, hops, ledger, facts, hits, exchanges."""
        rel = done.rel
        self.findings.extend(result.findings)
        if result.hops:
            self.hops.extend(result.hops)
            self.trace_path = self.trace_path or rel
        if result.ledger:
            self.ledger.extend(result.ledger)
            self.ledger_path = self.ledger_path or rel
        self._add_hits(done.found)
        self.facts.extend(done.facts)
        for parts in done.exchanges:
            self.exchanges.append((parts.where, self._keyed(parts)))

    def _keyed(self, parts: ExchangeParts) -> threads.KeyedExchange:
        """What threading needs of an exchange (message keys); the rest goes to the spool."""
        assert self._spool is not None
        spool = self._spool
        keys = self._keys
        if len(keys) >= MEMO_MAX:
            keys.clear()  # keys already handed out stay shared; new ones start a new table
        request_keys = []
        offsets = []
        for message in parts.request:
            request_keys.append(keys.setdefault(message.key, message.key))
            offsets.append(spool.add_shared(message.data, message.digest))
        reply = reply_at = None
        if parts.reply is not None:
            reply = keys.setdefault(parts.reply.key, parts.reply.key)
            reply_at = spool.add_shared(parts.reply.data, parts.reply.digest)
        payload = spool.add((parts.usage, tuple(offsets), reply_at))
        model = parts.model
        if isinstance(model, str):
            model = sys.intern(model) if len(model) <= 200 else model
        completed = parts.completed
        if completed is not None:
            completed = keys.setdefault(completed, completed)
        return threads.KeyedExchange(tuple(request_keys), reply, model, payload, completed)

    # -- secrets ---------------------------------------------------------------------

    def _add_text_hits(self, hits: Iterable[SecretHit]) -> None:
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

    def turn_json(self) -> Iterator[tuple[int, TurnJson]]:
        """`turn_views` with each message as the JSON text the spool keeps (what a JSON
        column stores), not parsed again."""
        for index, thread in enumerate(self._analyse()[0]):
            for turn in thread.turns:
                if turn.payload is None:
                    view = self._turn_view(turn)
                    yield (
                        index,
                        TurnJson(
                            view.index,
                            view.path,
                            view.interaction_index,
                            [json.dumps(m, default=str) for m in view.new_messages],
                            json.dumps(view.response, default=str) if view.response else None,
                            view.model,
                            view.usage,
                        ),
                    )
                    continue
                path, interaction_index = turn.exchange_ref
                spool = self._open_spool()
                usage, offsets, reply_at = spool.get(turn.payload)
                yield (
                    index,
                    TurnJson(
                        turn.index,
                        path,
                        interaction_index,
                        [spool.get_bytes(o).decode() for o in offsets[turn.cut :]],
                        spool.get_bytes(reply_at).decode() if reply_at is not None else None,
                        turn.model,
                        dict(usage) if isinstance(usage, dict) else {},
                    ),
                )

    def _open_spool(self) -> TurnSpool:
        if self._spool is None:
            raise RuntimeError("turn texts were dropped by close(); run files() again")
        return self._spool

    def _turn_view(self, turn: threads.ParsedTurn) -> TurnView:
        path, interaction_index = turn.exchange_ref
        if turn.payload is None:  # a plain Exchange (never from files(), kept for callers)
            new_messages = [message_dict(m) for m in turn.new_messages]
            response = message_dict(turn.response) if turn.response else None
            usage = dict(turn.usage)
        else:
            spool = self._open_spool()
            usage, offsets, reply_at = spool.get(turn.payload)
            new_messages = [json.loads(spool.get_bytes(o)) for o in offsets[turn.cut :]]
            response = json.loads(spool.get_bytes(reply_at)) if reply_at is not None else None
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
        result = parse_file(rel, data, self.config.limits, format_hint=HINTS["recording"])
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
