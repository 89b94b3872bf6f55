"""The first half of analysing one file: read, parse, scan and digest it, in any process.

`examine` needs only the file's place and the analysis settings, and returns plain data, so
a large tree's files can be examined by a pool of processes (`examined`) while the
analyser goes on with the files already done, in the tree's order. The results are the
same either way: one function does the work in both.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import io
import math
import os
import pickle
import queue
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from cassettes_app import safeload, secrets, threads
from cassettes_app.analysis.facts import recording_facts, unknown_shape_facts
from cassettes_app.analysis.files import read_capped
from cassettes_app.analysis.reports import DECODED_NOTES, literal_bodies
from cassettes_app.analysis.turns import (
    SegmentWriter,
    body_payload,
    compact_message,
    lean_key,
    message_json,
    small_usage,
    spool_digest,
)
from cassettes_app.checks.cassettes import UNKNOWN_SHAPE, RecordingFacts
from cassettes_app.config import AnalysisConfig
from cassettes_app.formats import parse_file
from cassettes_app.formats.conversation import SYNTHETIC
from cassettes_app.formats.sniff import looks_binary
from cassettes_app.parsed import (
    Body,
    LedgerEntry,
    ParsedFinding,
    ParsedInteraction,
    ParsedRecording,
    ParseResult,
    TraceHop,
)
from cassettes_app.providers import Exchange, Message, normalise
from cassettes_app.response_ids import ResponseIdFound, response_ids
from cassettes_app.secrets import SecretHit, TextProfile

HINTS = {"ledger": "ledger", "trace": "trace", "recording": None}

# A tree is examined by a pool only when it is this large: below it, starting processes
# costs more than it saves.
POOL_MIN_FILES = 64
POOL_MIN_BYTES = 16 * 1024 * 1024
# Files handed to one process at a time, and the chunks a process holds (given, their
# answers not yet taken): _AHEAD, and up to _AHEAD_MAX while that many answers of the size
# it has answered so far come to under _HELD_BYTES. Holding more keeps the processes busy
# through the analyser's pauses (its commits, the chunks it examines itself); the bytes keep
# the answers waiting in the analyser's memory few when they are large.
_CHUNK = 8
_AHEAD = 4
_AHEAD_MAX = 32
_HELD_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Spooled:
    """One message of an exchange as threading keys it and the spool keeps it (its JSON), or
    the spool address a pool process stored that JSON at (see turns.SegmentWriter)."""

    key: tuple
    data: bytes | int
    digest: bytes


@dataclass(frozen=True, slots=True)
class ExchangeParts:
    """What threading needs of one exchange, ready for the analyser's spool and key table."""

    where: tuple[str, int]  # (path, interaction index)
    request: tuple[Spooled, ...]
    reply: Spooled | None
    usage: dict[str, Any]
    model: Any
    completed: tuple | None = None  # threads.KeyedExchange.completed_key


@dataclass(slots=True)
class Examined:
    """One discovered file, read, parsed and text-scanned (or why it could not be read)."""

    rel: str
    role: str
    data: bytes | None = None  # the file's bytes while it is examined; dropped after
    size: int = 0
    sha: str = ""
    result: ParseResult | None = None  # None when unreadable
    unreadable: str | None = None  # why the file could not be read
    scanned: bool = False  # its text scan is done (hits holds what it found)
    hits: tuple[SecretHit, ...] = ()
    profile: TextProfile | None = None  # the text's profile, when every body is literal in it
    # What the parse adds to the analysis: secrets in its structured parts (in the order
    # they are met), each recording's facts, and each model exchange's keys and messages.
    found: list[SecretHit] = field(default_factory=list)
    facts: list[RecordingFacts] = field(default_factory=list)
    exchanges: list[ExchangeParts] = field(default_factory=list)
    # Each recording's response ids (`response_ids`), read before its bodies are made lean.
    response_ids: list[tuple[ResponseIdFound, ...]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FrontConfig:
    """Where the tree is and the analysis settings (picklable)."""

    root: Path
    analysis: AnalysisConfig


def examine(front: FrontConfig, rel: str, role: str) -> Examined:
    """Read, parse, text-scan and digest one discovered file."""
    config = front.analysis
    limits = config.limits
    try:
        data, size, sha = read_capped(front.root, rel, limits.max_file_bytes)
    except OSError as exc:
        why = (
            "symbolic link; not followed"
            if exc.errno in (errno.ELOOP, errno.ENOTDIR)
            else f"cannot read: {exc.strerror or exc}"
        )
        return Examined(rel, role, unreadable=why)
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
        result = parse_file(rel, data, limits, format_hint=HINTS[role])
    done = Examined(rel, role, data, size, sha, result)
    # The tree scan's text scan of the file, done while its bytes are here; a file too
    # large (or unreadable) is left to the tree scan, which reads or reports it.
    text_scanned = False
    if data is not None and len(data) <= config.max_scan_file_bytes:
        done.scanned = True
        text_scanned = not looks_binary(data[:8192])
        if data and text_scanned:
            hits, profile = secrets.scan_and_profile(data.decode("utf-8", "replace"), rel)
            done.hits = tuple(hits)
            done.profile = profile if literal_bodies(result, data) else None
    _digest(config, done, result, text_scanned)
    done.response_ids = [tuple(response_ids(r.interactions)) for r in result.recordings]
    # All the analyser needs of the file's bytes, and of its bodies' text and JSON, is
    # above: only the bodies' bytes (what is stored) go on.
    done.data = None
    _lean(result)
    return done


def _lean(result: ParseResult) -> None:
    """Drop the decoded text and JSON of every body of the parse, keeping its bytes."""
    for recording in result.recordings:
        for inter in recording.interactions:
            inter.request_body = _lean_body(inter.request_body)
            inter.response_body = _lean_body(inter.response_body)


def _lean_body(body: Body) -> Body:
    if body.text is None and body.json is None:
        return body
    return replace(body, text=None, json=None)


def _digest(
    config: AnalysisConfig, done: Examined, result: ParseResult, text_scanned: bool
) -> None:
    """The compact facts of one parsed file; the secrets of its structured parts (bodies
    whose text is literally in a text-scanned file need no second scan)."""
    rel, role, data, size, sha = done.rel, done.role, done.data, done.size, done.sha
    found = done.found
    for hop in result.hops:
        _hop_secrets(found, rel, hop)
    cache: list[Any] = []

    def load_doc() -> Any:
        """The file's JSON, loaded once and only when a check needs more than the parse."""
        if not cache:
            try:
                cache.append(safeload.load_json(data, config.limits) if data is not None else None)
            except (safeload.LoadError, ValueError, RecursionError):
                cache.append(None)
        return cache[0]

    for recording in result.recordings:
        for interaction in recording.interactions:
            _interaction_secrets(found, rel, interaction, text_scanned)
        if role != "recording":
            continue
        done.facts.append(recording_facts(config, rel, size, sha, recording, load_doc, data))
        for interaction in recording.interactions:
            exchange = normalise(
                body_payload(interaction.request_body),
                body_payload(interaction.response_body),
                interaction.url,
            )
            if exchange.provider == "unknown":
                continue  # fixtures, plain HTTP: nothing a conversation can be built from
            done.exchanges.append(_parts((rel, interaction.index), exchange))
    if role == "recording" and not result.recordings and result.format == UNKNOWN_SHAPE:
        # Matched as a recording but in a shape no reader knows: still one of the
        # submission's recordings (the replay counts it), with what can be read of it.
        # A file that is not even a JSON object is a broken one, reported as such.
        doc = load_doc()
        if isinstance(doc, dict):
            done.facts.append(unknown_shape_facts(rel, size, sha, doc))


def _spooled(message: Message) -> Spooled:
    data = message_json(message)
    return Spooled(lean_key(threads.message_key(message)), data, spool_digest(data))


def _parts(where: tuple[str, int], ex: Exchange) -> ExchangeParts:
    """What threading needs of an exchange: its messages' keys, and what its turn shows."""
    request = [m for m in map(compact_message, ex.request_messages) if m is not None]
    response = compact_message(ex.response)
    joined = compact_message(threads.prefilled(ex.request_messages, ex.response))
    return ExchangeParts(
        where,
        tuple(_spooled(m) for m in request),
        _spooled(response) if response is not None else None,
        small_usage(ex.usage),
        ex.model,
        lean_key(threads.message_key(joined)) if joined is not None else None,
    )


def _spooled_out(parts: ExchangeParts, writer: SegmentWriter) -> ExchangeParts:
    """The exchange with its messages' JSON written to the spool segment, their addresses
    in its place."""

    def out(message: Spooled) -> Spooled:
        assert isinstance(message.data, bytes)
        return Spooled(message.key, writer.add_shared(message.data, message.digest), message.digest)

    reply = parts.reply
    return replace(
        parts,
        request=tuple(map(out, parts.request)),
        reply=out(reply) if reply is not None else None,
    )


def _interaction_secrets(
    found: list[SecretHit], rel: str, interaction: Any, text_scanned: bool
) -> None:
    found.extend(secrets.scan_headers(interaction.request_headers, rel, where="request"))
    found.extend(secrets.scan_headers(interaction.response_headers, rel, where="response"))
    if interaction.url:
        found.extend(secrets.scan_url(interaction.url, rel))
    for body in (interaction.request_body, interaction.response_body):
        if body is interaction.request_body and body.encoding_note == SYNTHETIC:
            # A transcript's call repeats the conversation so far: each of its messages
            # is scanned once, in the file's text or as the reply it was.
            continue
        notes = set((body.encoding_note or "").split("; "))
        if text_scanned and not notes & DECODED_NOTES:
            continue
        if body.json is not None and not any(n.startswith("sse") for n in notes):
            found.extend(secrets.scan_json(body.json, rel))
        elif body.text:
            found.extend(secrets.scan_text(body.text, rel))


def _hop_secrets(found: list[SecretHit], rel: str, hop: TraceHop) -> None:
    line = hop.line
    found.extend(secrets.scan_headers(hop.request_headers, rel, where="request", line=line))
    if hop.url:
        found.extend(secrets.scan_url(hop.url, rel, line=line))
    for value in (hop.req, hop.resp):
        if value is not None:
            found.extend(secrets.scan_json(value, rel, line=line))


def pool_size(processes: int, files: list[tuple[str, str]], root: Path) -> int:
    """Processes worth starting for these files: 0 (examine here) for a small tree."""
    if processes <= 1 or len(files) < POOL_MIN_FILES:
        return 0
    total = 0
    for rel, _ in files:
        try:
            total += os.lstat(root / rel).st_size
        except OSError:
            continue
        if total >= POOL_MIN_BYTES:
            return min(processes, (len(files) + _CHUNK - 1) // _CHUNK)
    return 0


@dataclass(slots=True)
class PoolStats:
    """What a pool cost: its processes, and the largest peak resident memory of one; and
    the files the analyser's own process examined while it would have waited on them."""

    processes: int = 0
    peak_rss_kib: int = 0
    examined_here: int = 0


def examined(
    config: FrontConfig,
    files: list[tuple[str, str]],
    workers: int = 0,
    stats: PoolStats | None = None,
    segment: Callable[[], tuple[int, int]] | None = None,
) -> Iterator[Examined]:
    """`examine` each file, yielded in the order given.

    With `workers` (see `pool_size`), the files are examined by that many processes of
    their own (started afresh, never forked: the caller may hold database connections), a
    bounded number of results ahead of the caller; else in this process. `stats` gets
    what the pool cost once it has ended. `segment` (a TurnSpool's) gives each process a
    segment of the spool to write its files' messages into: their results then carry the
    messages' addresses instead of their JSON.
    """
    if not workers:
        for rel, role in files:
            yield examine(config, rel, role)
        return
    chunks = [files[i : i + _CHUNK] for i in range(0, len(files), _CHUNK)]
    pool = [
        _Worker(config, segment() if segment else None) for _ in range(min(workers, len(chunks)))
    ]
    stats = stats if stats is not None else PoolStats()
    try:
        yield from _ordered(pool, chunks, lambda chunk: [examine(config, *f) for f in chunk], stats)
    finally:
        peaks = [worker.close() for worker in pool]
        stats.processes = len(pool)
        stats.peak_rss_kib = max(peaks)


def _ordered(
    pool: list[_Worker],
    chunks: list[list[tuple[str, str]]],
    here: Callable[[list[tuple[str, str]]], list[Examined]],
    stats: PoolStats,
) -> Iterator[Examined]:
    """Each chunk's results, in order. Chunks go to the pool's processes in order, each
    holding _AHEAD and more while its answers are small (see _AHEAD_MAX); whenever the next
    result is not ready, this process examines the next chunk nobody holds (`here`) instead
    of waiting: it was idle half the time while the pool parsed, with a core to spare, and
    the time to the verdict is the pool's.
    """
    owner: list[_Worker | None] = [None] * len(chunks)
    done_here: dict[int, list[Examined]] = {}  # examined here, ahead of their turn
    # Chunks before this one are held by a process, examined here, or yielded. A process
    # always holds at least _AHEAD unanswered chunks while any is left, so the chunk
    # awaited next is always before it.
    sent = 0

    def give(worker: _Worker) -> None:
        nonlocal sent
        if sent < len(chunks):
            worker.send(chunks[sent])
            owner[sent] = worker
            sent += 1

    def room(worker: _Worker) -> bool:
        held = worker.pending
        if held < _AHEAD:
            return True
        return held < _AHEAD_MAX and (held + 1) * worker.answer_bytes() <= _HELD_BYTES

    def top_up(worker: _Worker) -> None:
        while sent < len(chunks) and room(worker):
            give(worker)

    for _ in range(_AHEAD):
        for each in pool:
            give(each)
    for index in range(len(chunks)):
        worker = owner[index]
        if worker is None:  # examined here while an earlier one was awaited
            yield from done_here.pop(index)
            continue
        # A chunk goes to a process only while the ones before it are taken (`sent`), and a
        # process answers in the order it was given chunks: this is its oldest unanswered.
        while worker.answers.empty() and sent < len(chunks) and len(done_here) < _AHEAD:
            stats.examined_here += len(chunks[sent])
            done_here[sent] = here(chunks[sent])
            sent += 1
        done = worker.receive()
        top_up(worker)  # the freed places go to the next chunks
        yield from done


# How a pool process is started: this interpreter, serving from this module (see serve).
WORKER_COMMAND = [sys.executable, "-c", "from cassettes_app.analysis.front import serve; serve()"]
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class _Worker:
    """One pool process: chunks of files in through its stdin, their results out of its
    stdout, each a length-prefixed pickle. A thread of the analyser's reads each answer as
    soon as it is written, so the process goes on with its next chunk instead of waiting
    on a full pipe for the analyser to get to it (it did: half the pool's time). It exits
    when its stdin closes, and is killed when the process that started it dies (even in the
    middle of a file), so it never outlives the analysis, whatever ends that (a finished
    job, an error, a killed worker).
    """

    def __init__(self, config: FrontConfig, segment: tuple[int, int] | None = None) -> None:
        self.process = subprocess.Popen(
            [*WORKER_COMMAND, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=_PACKAGE_ROOT,
            pass_fds=(segment[1],) if segment else (),
        )
        self.peak_kib = 0
        _widen(self.process.stdout)
        self.pending = 0  # chunks sent and not received
        self.taken = self.taken_bytes = 0  # answers received, and their bytes
        # Answers read and not yet taken; None once its stdout has ended.
        self.answers: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
        self.reader = threading.Thread(target=self._drain, name="analysis-pool", daemon=True)
        self.reader.start()
        self._write((config, segment))

    def _drain(self) -> None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        try:
            while True:
                self.answers.put(_frame(fd))
        except (EOFError, OSError):
            self.answers.put(None)

    def _write(self, value: Any) -> None:
        assert self.process.stdin is not None
        try:
            _write(self.process.stdin, value)
        except BrokenPipeError:
            raise RuntimeError(self._ended()) from None

    def send(self, chunk: list[tuple[str, str]]) -> None:
        self._write(chunk)
        self.pending += 1

    def receive(self) -> list[Examined]:
        frame = self.answers.get()
        if frame is None:
            self.answers.put(None)  # any later receive ends the same way
            raise RuntimeError(self._ended())
        self.pending -= 1
        self.taken += 1
        self.taken_bytes += len(frame)
        ok, value, peak = _loads(frame)
        self.peak_kib = max(self.peak_kib, peak)
        if not ok:
            raise RuntimeError(f"an analysis process failed: {value}")
        return value

    def answer_bytes(self) -> float:
        """The mean size of this process's answers so far (infinite before the first)."""
        return self.taken_bytes / self.taken if self.taken else math.inf

    def _ended(self) -> str:
        code = self.process.wait(timeout=10)
        return f"an analysis process ended unexpectedly (exit code {code})"

    def close(self) -> int:
        """End the process: close its stdin, so an idle one exits; kill one that still has
        work nobody will read (the analysis stopped early) or that does not go. Returns its
        peak resident memory in KiB, as it last told (0 if it never answered)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if self.pending:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)  # its stdout has ended with the process
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.peak_kib


# The pipe an answer comes through, when the system lets it be this large: a process then
# writes most answers whole and goes on, where a 64 KiB pipe held it until the analyser's
# reader thread, which shares the analyser's time, came round once per 64 KiB (each pool
# process spent a fifth of its time waiting so; a tenth with this size).
_PIPE_BYTES = 1 << 20


def _widen(pipe: IO[bytes] | None) -> None:
    if pipe is None:
        return
    with contextlib.suppress(OSError, AttributeError):  # capped by the system, or not Linux
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)


def _peak_kib() -> int:
    """This process's peak resident memory in KiB since it started its program.

    /proc's VmHWM, which exec resets: getrusage's ru_maxrss also counts the parent's pages
    the process held between fork and exec.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _by_fields(cls: type) -> Callable[[Any], tuple[type, tuple[Any, ...]]]:
    """Pickle a dataclass as its constructor and field values, in order.

    The default for a slots dataclass calls a Python __getstate__ and __setstate__ per
    object, which cost a third of moving a result between processes.
    """
    names = tuple(f.name for f in dataclasses.fields(cls))
    assert all(f.init for f in dataclasses.fields(cls)), cls
    return lambda obj: (cls, tuple([getattr(obj, name) for name in names]))


# The classes a result is made of, many of each per file.
_DISPATCH: dict[type, Callable[[Any], Any]] = {
    cls: _by_fields(cls)
    for cls in (
        Examined,
        ExchangeParts,
        Spooled,
        ParseResult,
        ParsedRecording,
        ParsedInteraction,
        Body,
        ParsedFinding,
        TraceHop,
        LedgerEntry,
        RecordingFacts,
        SecretHit,
        ResponseIdFound,
    )
}


def _write(stream: IO[bytes], value: Any) -> None:
    """Send one value: its pickle's length (8 bytes), then the pickle (see _read).

    Written to the descriptor itself, in a loop over partial writes: the buffered file
    objects lost bytes of a large answer whose write a signal cut short (a tracer's stops,
    any handled signal), after which every later frame was read from the wrong place.
    """
    buffer = io.BytesIO()
    buffer.write(bytes(8))
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(value)
    data = buffer.getbuffer()
    data[:8] = (len(data) - 8).to_bytes(8, "little")
    fd = stream.fileno()
    view = data.cast("B")
    while view:
        view = view[os.write(fd, view) :]


def _read(stream: IO[bytes]) -> Any:
    return _loads(_frame(stream.fileno()))


def _frame(fd: int) -> bytearray:
    """One value's pickle, as _write sent it; EOFError when the descriptor ends first."""
    return _exactly(fd, int.from_bytes(_exactly(fd, 8), "little"))


def _loads(data: bytearray) -> Any:
    return pickle.loads(data)  # noqa: S301 - our own analysis, or the process it started


def _exactly(fd: int, size: int) -> bytearray:
    """`size` bytes from the descriptor, read into one buffer; EOFError if it ends first."""
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        count = os.readv(fd, [view[got:]])
        if not count:
            raise EOFError
        got += count
    return data


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """A pool process's loop: the settings (and its spool segment, if any), then chunks of
    files until stdin closes."""
    try:
        config, segment = _read(stdin)
        writer = SegmentWriter(*segment) if segment else None
        while True:
            chunk = _read(stdin)
            try:
                done = [examine(config, rel, role) for rel, role in chunk]
                if writer is not None:
                    for one in done:
                        one.exchanges = [_spooled_out(parts, writer) for parts in one.exchanges]
                answer: tuple[bool, Any, int] = (True, done, _peak_kib())
            except Exception as exc:
                answer = (False, f"{type(exc).__name__}: {exc}", _peak_kib())
            _write(stdout, answer)
    except (EOFError, BrokenPipeError):
        return


def serve() -> None:
    """A pool process's program (WORKER_COMMAND, then the pid of the analysis's process).

    It ends without flushing anything: its stdout may be closed under it, and it holds
    nothing else to close.
    """
    die_with_parent(int(sys.argv[1]))
    _serve(sys.stdin.buffer, sys.stdout.buffer)
    os._exit(0)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have Linux kill this process when `parent`, which started it, dies (PDEATHSIG): a
    file that keeps it busy must not keep it running after the job that asked is gone.
    Elsewhere only the closed pipes end it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)
