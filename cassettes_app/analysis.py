"""Analyse one unpacked submission: discover, parse, scan for secrets, thread, and check.

Pure Python (no Django): the job in `submissions` streams `Analyzer.files()` into the
database, then asks for secret hits, threads and check outcomes. Only compact facts are
kept per recording, so memory does not grow with body sizes.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import pickle
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cassettes_app import safeload, secrets, threads
from cassettes_app.checks import CheckOutcome
from cassettes_app.checks.cassettes import (
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
from cassettes_app.formats import parse_file
from cassettes_app.formats.base import (
    Body,
    LedgerEntry,
    ParsedFinding,
    ParsedRecording,
    ParseResult,
    TraceHop,
    looks_binary,
)
from cassettes_app.keys import (
    DEFAULT_KEY_LENGTH,
    is_key_shape,
    mismatch_variants,
    recompute_key,
)
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.providers import Exchange, Message, ToolCall, ToolResult, normalise
from cassettes_app.secrets import SecretHit, TextProfile

__all__ = [
    "TEXT_CAP",
    "AnalysisConfig",
    "Analyzer",
    "FileReport",
    "ThreadView",
    "TurnView",
    "glob_match",
]

MiB = 2**20
TEXT_CAP = 20_000  # characters of one message text kept for threads and display
ROLES = ("ledger", "trace", "recording")  # a file matched by several roles takes the first
_HINTS = {"ledger": "ledger", "trace": "trace", "recording": None}
_CHUNK = 1 * MiB
# Marks a text cut to TEXT_CAP; the digest after it keeps distinct long texts distinct when
# threads compare messages.
_CUT = "\x00cut\x00"  # ASCII, so a cut text stays one byte per character
_DECODED = {"base64", "gzip", "x-gzip", "deflate", "br"}
# Formats whose bodies are the file's own JSON strings or a json.dumps of its values, so a
# body holds no literal its file lacks when the file uses no \u or \/ escape (the only
# escapes that can spell a letter, a digit or a slash).
_LITERAL_FORMATS = {"cassette_json", "fixture_json", "agent_log", "trace"}


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
    id_pattern: str = "ord_[0-9a-f]+"
    now: dt.datetime = field(default_factory=_utcnow)  # aware UTC; the upload time
    max_recordings_bytes: int = 100 * MiB
    max_scan_file_bytes: int = 8 * MiB
    limits: ParseLimits = DEFAULT_LIMITS

    def __post_init__(self) -> None:
        """Read a naive `now` as UTC, so comparisons with recording times never raise."""
        if self.now.tzinfo is None:
            object.__setattr__(self, "now", self.now.replace(tzinfo=dt.UTC))


@dataclass
class FileReport:
    """One discovered recording, trace or ledger file, with everything parsed from it."""

    path: str  # relative to the root, "/"-separated
    role: str  # "recording" | "trace" | "ledger"
    size: int
    sha256: str
    result: ParseResult
    # `secrets.text_profile` of the file's text when every body parsed from it holds only
    # literals of that text (see `body_profile`); None when that is not known.
    profile: TextProfile | None = None
    turns: int = 0  # conversation turns its recordings add (one per model exchange)

    @property
    def secret_free(self) -> bool:
        """True when no secret rule can fire on the file, nor on any body parsed from it."""
        return self.profile is not None and self.profile.empty

    def body_profile(self, body: Body | None = None) -> TextProfile | None:
        """The profile that `secrets.redact_text` may trust for a body of this file.

        None (redact with every rule) for a body decoded from base64 or a compression, whose
        bytes are not in the file.
        """
        if self.profile is None or body is None:
            return self.profile
        notes = set((body.encoding_note or "").split("; "))
        return None if notes & _DECODED else self.profile


@dataclass(frozen=True, slots=True)
class TurnView:
    """One model call of a rebuilt conversation, as plain JSON-able data."""

    index: int
    path: str
    interaction_index: int
    new_messages: list[dict[str, Any]]
    response: dict[str, Any] | None
    model: str | None
    usage: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ThreadView:
    """One rebuilt conversation; a fork names (thread index, turn position) it left."""

    index: int
    turns: list[TurnView]
    forked_from: tuple[int, int] | None = None


# --------------------------------------------------------------------------- globbing


def _segment_regex(segment: str) -> re.Pattern[str]:
    """One path component of a glob: `*`, `?` and `[...]` never cross a `/`."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


@dataclass(frozen=True, slots=True)
class _Glob:
    text: str
    parts: tuple[re.Pattern[str] | None, ...]  # None stands for `**`

    def _states(self, segments: Sequence[str]) -> set[int]:
        """Pattern positions reachable after consuming `segments` (an NFA over components)."""
        states = self._close({0})
        for seg in segments:
            nxt: set[int] = set()
            for i in states:
                if i >= len(self.parts):
                    continue
                part = self.parts[i]
                if part is None:
                    nxt.add(i)  # `**` swallows this component and may swallow more
                elif part.fullmatch(seg):
                    nxt.add(i + 1)
            states = self._close(nxt)
            if not states:
                break
        return states

    def _close(self, states: set[int]) -> set[int]:
        out = set(states)
        for i in sorted(states):
            while i < len(self.parts) and self.parts[i] is None:
                i += 1
                out.add(i)
        return out

    def matches(self, rel: str) -> bool:
        """True when the "/"-separated relative path matches the whole pattern."""
        segments = rel.split("/")
        # A file cannot end on `**` (pathlib's `**` names directories).
        return any(
            i == len(self.parts) and (i == 0 or self.parts[i - 1] is not None)
            for i in self._states(segments)
        )

    def may_contain(self, rel_dir: str) -> bool:
        """True when some file under this directory could match."""
        return any(i < len(self.parts) for i in self._states(rel_dir.split("/")))


def _compile_glob(pattern: str) -> _Glob | None:
    """A pathlib-style pattern relative to the root; None when it escapes the root."""
    text = pattern.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    segments = [s for s in text.split("/") if s not in ("", ".")]
    if not segments or ".." in segments:
        return None
    if segments[-1] == "**":
        segments.append("*")  # `dir/**` means every file below dir, as people expect
    parts = tuple(None if s == "**" else _segment_regex(s.replace("**", "*")) for s in segments)
    return _Glob(pattern, parts)


def glob_match(pattern: str, rel: str) -> bool:
    """pathlib-style `**` glob match of a "/"-separated path relative to the root."""
    compiled = _compile_glob(pattern)
    return compiled is not None and compiled.matches(rel)


# --------------------------------------------------------------------------- safe file access


@dataclass(frozen=True, slots=True)
class _Entry:
    rel: str
    kind: str  # "file" | "link" | "dir_link" | "other"


def _walk(root: Path, findings: list[ParsedFinding]) -> list[_Entry]:
    """Every entry of the tree, sorted; symlinks are listed, never followed."""
    out: list[_Entry] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = list(it)
        except OSError as exc:
            findings.append(
                ParsedFinding(
                    "unreadable", "warn", rel_dir or ".", None, f"cannot list: {exc.strerror}"
                )
            )
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    try:
                        is_dir = entry.is_dir(follow_symlinks=True)
                    except OSError:
                        is_dir = False
                    out.append(_Entry(rel, "dir_link" if is_dir else "link"))
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif entry.is_file(follow_symlinks=False):
                    out.append(_Entry(rel, "file"))
                else:
                    out.append(_Entry(rel, "other"))
            except OSError:
                out.append(_Entry(rel, "other"))
    out.sort(key=lambda e: e.rel)
    return out


def _open_nofollow(root: Path, rel: str) -> int:
    """Open root/rel read-only without following a link at any component (races included)."""
    parts = rel.split("/")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = nxt
        # O_NONBLOCK: a FIFO planted after the walk must not hang the worker.
        return os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


class _NotRegular(OSError):
    """The path is not a regular file."""


def _read(
    root: Path, rel: str, cap: int, *, hash_large: bool = True
) -> tuple[bytes | None, int, str]:
    """(data, size, sha256) of a regular file; data is None when over `cap`.

    An over-cap file is still hashed (for duplicate detection) unless `hash_large` is False.
    """
    fd = _open_nofollow(root, rel)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular(errno.EINVAL, "not a regular file")
        digest = hashlib.sha256()
        if info.st_size > cap:
            if not hash_large:
                return None, info.st_size, ""
            return None, *_hash_rest(handle, digest, 0)
        # read(n) allocates n bytes up front: ask for the known size, not the cap.
        data = handle.read(info.st_size + 1)
        if len(data) > info.st_size:  # grew since fstat: read on in chunks, up to the cap
            parts = [data]
            size = len(data)
            while size <= cap and (chunk := handle.read(_CHUNK)):
                parts.append(chunk)
                size += len(chunk)
            data = b"".join(parts)
        digest.update(data)
        if len(data) > cap:
            return None, *_hash_rest(handle, digest, len(data))
        return data, len(data), digest.hexdigest()


def _hash_rest(handle: Any, digest: Any, size: int) -> tuple[int, str]:
    """Hash the rest of an open file in chunks; (total size, hex digest)."""
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


# --------------------------------------------------------------------------- compact turns


def _cap(text: str) -> str:
    """Cut a long text to TEXT_CAP, keeping a digest so distinct texts stay distinct."""
    if len(text) <= TEXT_CAP:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:TEXT_CAP]}{_CUT}{digest}:{len(text)}"


def _shown(text: str) -> tuple[str, bool]:
    """The display form of a possibly cut text, and whether it was cut."""
    head, cut, _ = text.partition(_CUT)
    return (head, True) if cut else (text, False)


def _compact_call(call: ToolCall) -> ToolCall:
    raw = call.arguments_raw
    args = call.arguments
    if isinstance(raw, str) and len(raw) > TEXT_CAP:
        raw = _cap(raw)
        if call.arguments_valid:
            args = raw
    elif call.arguments_valid and not isinstance(args, str | int | float | bool | type(None)):
        try:
            text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = ""
        if len(text) > TEXT_CAP:
            args = _cap(text)
    elif isinstance(args, str) and len(args) > TEXT_CAP:
        args = _cap(args)
    return ToolCall(call.id, call.name, args, raw, call.arguments_valid)


def _compact_message(message: Message | None) -> Message | None:
    """The message without its raw payload, long texts capped (threads compare what is left)."""
    if message is None:
        return None
    return Message(
        role=message.role,
        text=_cap(message.text if isinstance(message.text, str) else str(message.text)),
        tool_calls=[_compact_call(c) for c in message.tool_calls],
        tool_results=[
            ToolResult(r.tool_call_id, _cap(str(r.content)), r.is_error, r.name)
            for r in message.tool_results
        ],
        raw=None,
    )


def _small_usage(usage: Any) -> dict[str, Any]:
    if not isinstance(usage, dict):
        return {}
    try:
        return usage if len(json.dumps(usage, default=str)) <= 4096 else {}
    except (TypeError, ValueError, RecursionError):
        return {}


def _message_dict(message: Message) -> dict[str, Any]:
    """A message as plain JSON-able data; cut texts carry "truncated": true."""
    truncated = False

    def show(text: Any) -> str:
        nonlocal truncated
        shown, cut = _shown(text if isinstance(text, str) else str(text))
        truncated = truncated or cut
        return shown

    calls = []
    for call in message.tool_calls:
        args = call.arguments
        if isinstance(args, str):
            args = show(args)
        calls.append(
            {
                "id": call.id,
                "name": call.name,
                "arguments": args,
                "arguments_valid": call.arguments_valid,
            }
        )
    out: dict[str, Any] = {
        "role": message.role,
        "text": show(message.text),
        "tool_calls": calls,
        "tool_results": [
            {"tool_call_id": r.tool_call_id, "content": show(r.content)}
            for r in message.tool_results
        ],
    }
    if truncated:
        out["truncated"] = True
    return out


# Key parts longer than this are kept as a 128-bit digest: threads only compare keys.
_KEY_PART_MAX = 32


def _key_part(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _KEY_PART_MAX:
        return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return value


def _lean_key(key: tuple) -> tuple:
    """`threads.message_key` with every long text replaced by its digest.

    Equal keys stay equal and distinct ones distinct (short parts are kept as text, long
    ones as bytes, so a text can never equal a digest); the role stays first.
    """
    role, text, calls, results = key
    return (
        _key_part(role),
        _key_part(text),
        tuple([(_key_part(name), _key_part(args)) for name, args in calls]),
        tuple([_key_part(r) for r in results]),
    )


# Entries of the spool's and the key interner's lookup tables before they start afresh.
# Forgetting costs a second copy of a message on disk, or of a key in memory, never a
# difference in results; remembering all would grow with the archive.
_MEMO_MAX = 65_536


class _TurnSpool:
    """What the turns of a conversation show, kept in a temporary file instead of memory.

    Each distinct message (as `_message_dict` renders it) is written once, whatever the
    number of requests repeating it (within the last _MEMO_MAX distinct ones); an exchange
    keeps only the offsets of its messages.
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the analyser
        self._size = 0
        self._reading = False
        self._offsets: dict[bytes, int] = {}

    def _write(self, data: bytes) -> int:
        if self._reading:
            self._file.seek(self._size)
            self._reading = False
        offset = self._size
        self._file.write(len(data).to_bytes(8, "little"))
        self._file.write(data)
        self._size += 8 + len(data)
        return offset

    def add(self, value: Any, *, shared: bool = False) -> int:
        """Store a value; `shared` ones are stored once per distinct content."""
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        if not shared:
            return self._write(data)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        offset = self._offsets.get(digest)
        if offset is None:
            if len(self._offsets) >= _MEMO_MAX:
                self._offsets.clear()
            offset = self._offsets[digest] = self._write(data)
        return offset

    def get(self, offset: int) -> Any:
        """The value stored at `offset` (a fresh copy each time)."""
        if not self._reading:
            self._file.flush()
            self._reading = True
        self._file.seek(offset)
        size = int.from_bytes(self._file.read(8), "little")
        return pickle.loads(self._file.read(size))  # noqa: S301 - our own temporary file

    def close(self) -> None:
        self._file.close()


def _payload(body: Body) -> Any:
    """What providers.normalise reads: parsed JSON when there is some, else the text."""
    if body.json is not None:
        return body.json
    return body.text or None


def _literal_bodies(result: ParseResult, data: bytes | None) -> bool:
    """True when every body of the parse holds only literals of the file's text.

    The formats in _LITERAL_FORMATS take bodies from JSON strings or json.dumps of JSON
    values; once decoded, an escape can add a literal only if it is \\uXXXX or \\/.
    """
    if data is None or result.format not in _LITERAL_FORMATS:
        return False
    return b"\\" not in data or (b"\\u" not in data and b"\\/" not in data)


# --------------------------------------------------------------------------- the analyser


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
        self._spool: _TurnSpool | None = None
        self._keys: dict[tuple, tuple] = {}  # one shared object per distinct message key

    # -- discovery and parsing --------------------------------------------------------

    def _discover(self) -> list[tuple[str, str]]:
        """(path, role) of every file the globs name, sorted by path; findings for the rest."""
        entries = _walk(self.root, self.findings)
        cfg = self.config
        role_globs = {
            "ledger": cfg.ledger_globs,
            "trace": cfg.trace_globs,
            "recording": cfg.recording_globs,
        }
        chosen: dict[str, str] = {}
        for role in ROLES:
            for pattern in role_globs[role]:
                glob = _compile_glob(pattern)
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

    def _skip(self, entry: _Entry, why: str) -> None:
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
        self._spool = _TurnSpool()
        self.key_report = KeyReport()
        self.trace_path = self.ledger_path = None
        self.reports = 0
        limits = self.config.limits
        for rel, role in self._discover():
            try:
                data, size, sha = _read(self.root, rel, limits.max_file_bytes)
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
            if profile is not None and not _literal_bodies(result, data):
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
        self.key_report = key_report(self.facts)
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
            self.facts.append(self._facts(rel, size, sha, recording, load_doc))
            for interaction in recording.interactions:
                exchange = normalise(
                    _payload(interaction.request_body),
                    _payload(interaction.response_body),
                    interaction.url,
                )
                if exchange.provider == "unknown":
                    continue  # fixtures, plain HTTP: nothing a conversation can be built from
                self.exchanges.append(((rel, interaction.index), self._keyed(exchange)))

    def _keyed(self, ex: Exchange) -> threads.KeyedExchange:
        """What threading needs of an exchange (message keys); the rest goes to the spool."""
        assert self._spool is not None
        keys = self._keys
        if len(keys) >= _MEMO_MAX:
            keys.clear()  # keys already handed out stay shared; new ones start a new table
        request = [m for m in map(_compact_message, ex.request_messages) if m is not None]
        response = _compact_message(ex.response)
        request_keys = []
        offsets = []
        for message in request:
            key = _lean_key(threads.message_key(message))
            request_keys.append(keys.setdefault(key, key))
            offsets.append(self._spool.add(_message_dict(message), shared=True))
        reply = reply_at = None
        if response is not None:
            reply = _lean_key(threads.message_key(response))
            reply = keys.setdefault(reply, reply)
            reply_at = self._spool.add(_message_dict(response), shared=True)
        payload = self._spool.add((_small_usage(ex.usage), tuple(offsets), reply_at))
        model = ex.model
        if isinstance(model, str):
            model = sys.intern(model) if len(model) <= 200 else model
        return threads.KeyedExchange(tuple(request_keys), reply, model, payload)

    def _facts(
        self, rel: str, size: int, sha: str, rec: ParsedRecording, load_doc: Callable[[], Any]
    ) -> RecordingFacts:
        """Compact facts of one recording: key comparison, model, times, size."""
        volatile = tuple(self.config.volatile_fields)
        first = rec.interactions[0] if rec.interactions else None
        payload = first.request_body.json if first is not None else None
        recomputed = None
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
                recomputed = recompute_key(payload, volatile, length)
            except (TypeError, ValueError, RecursionError):
                recomputed = None
            if recomputed is not None and recomputed != rec.key:
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
        embedded = 0
        if "turns" in rec.meta.get("extra_fields", ()):
            doc = load_doc()
            turns = doc.get("turns") if isinstance(doc, dict) else None
            embedded = len(turns) if isinstance(turns, list) else 1
        served = [rec.meta.get("payload_model"), *rec.meta.get("models", ())]
        raw_times = [rec.recorded_at, *(i.recorded_at for i in rec.interactions)]
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
            model=rec.model,
            served_models=tuple(dict.fromkeys(m for m in served if isinstance(m, str) and m)),
            recorded_at=rec.recorded_at or next((r for r in raw_times if r), None),
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
            notes = set((body.encoding_note or "").split("; "))
            if text_scanned and not notes & _DECODED:
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
        for entry in _walk(self.root, []):
            if entry.kind != "file" or entry.rel in self._text_scanned:
                continue
            try:
                data, size, _ = _read(self.root, entry.rel, cap, hash_large=False)
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
            new_messages = [_message_dict(m) for m in turn.new_messages]
            response = _message_dict(turn.response) if turn.response else None
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

    def checks(self) -> list[CheckOutcome]:
        """The six `cassettes.*` outcomes (parsing and scanning first if not done yet)."""
        hits = list(self.secret_hits())
        _, blobs = self._analyse()
        cfg = self.config
        return [
            cassettes_keys_match(self.facts, cfg),
            cassettes_no_secrets(hits),
            cassettes_model_metadata(self.facts),
            cassettes_fresh(self.facts, cfg),
            cassettes_pruned(self.facts, cfg),
            cassettes_per_turn(blobs, self.facts),
        ]
