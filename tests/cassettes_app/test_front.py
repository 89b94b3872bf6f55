"""Tests for cassettes_app.analysis.front: a pool of processes gives the analysis one process
gives, file for file, and a small tree is never handed to one."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cassettes_app.analysis import AnalysisConfig, Analyzer, front
from cassettes_app.analysis.front import FrontConfig
from cassettes_app.analysis.turns import SEGMENT_SHIFT, SegmentWriter, TurnSpool
from cassettes_app.limits import ParseLimits
from tests.paths import DEMO_REPOS, FIXTURES

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
WILD = FIXTURES.parent / "wild"
KEY = "sk-proj-FAKEq8Zr2LmT5vXc9NwB4hJ7kP3sD6fG1aQ0eRyUiOpZxCvBnM2FAKEtest"


def _mixed_tree(root: Path) -> None:
    """Real recordings of many tools, the demo hand-ins, and hostile files, in one tree."""
    shutil.copytree(WILD, root / "wild", ignore=shutil.ignore_patterns("SOURCES.md"))
    shutil.copytree(FIXTURES, root / "fixtures")
    shutil.copytree(DEMO_REPOS, root / "demo")
    odd = root / "odd"
    odd.mkdir()
    (odd / "secret.json").write_text(json.dumps({"headers": {"Authorization": f"Bearer {KEY}"}}))
    (odd / "broken.json").write_text('{"key": "abc", "request": ')
    (odd / "huge.json").write_text(json.dumps({"pad": "x" * 300_000}))
    (odd / "zipped.json.gz").write_bytes(gzip.compress(json.dumps({"key": KEY}).encode()))
    (odd / "binary.json").write_bytes(b"\x00\x01\x02" * 100)
    (odd / "escaped.json").write_text('{"text": "\\u0073k-not-a-key"}')
    os.symlink("/etc/passwd", odd / "link.json")


def _config() -> AnalysisConfig:
    return AnalysisConfig(
        shape="cassette",
        recording_globs=("**/*.json", "**/*.yaml", "**/*.yml", "**/*.har", "**/*.gz"),
        trace_globs=("**/replay.jsonl",),
        ledger_globs=("**/ledger*.jsonl",),
        now=NOW,
        limits=ParseLimits(max_file_bytes=200_000),
    )


def _everything(
    root: Path, processes: int, pools: list[front.PoolStats] | None = None
) -> dict[str, Any]:
    """All an analysis yields and keeps, as comparable plain values (`pools` gets what its
    pool cost)."""
    analyzer = Analyzer(root, _config(), processes)
    reports = [
        (
            r.path,
            r.role,
            r.size,
            r.sha256,
            r.result.format,
            r.profile,
            r.turns,
            r.response_ids,
            [
                (i.method, i.url, i.status, i.request_body, i.response_body)
                for rec in r.result.recordings
                for i in rec.interactions
            ],
            r.result.hops,
            r.result.ledger,
        )
        for r in analyzer.files()
    ]
    hits = list(analyzer.secret_hits())
    threads = analyzer.threads()
    turns = list(analyzer.turn_views())
    checks = analyzer.checks()
    analyzer.close()
    if pools is not None:
        pools.append(analyzer.pool)
    return {
        "reports": reports,
        "findings": analyzer.findings,
        "facts": analyzer.facts,
        "hits": hits,
        "threads": threads,
        "turns": turns,
        "checks": checks,
        "key_report": analyzer.key_report,
    }


def test_a_pool_analyses_a_mixed_tree_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mixed_tree(tmp_path)
    serial = _everything(tmp_path, 1)
    monkeypatch.setattr(front, "POOL_MIN_BYTES", 1)
    started: list[int] = []
    real_worker = front._Worker

    def counting_worker(config: Any, segment: Any) -> Any:
        worker = real_worker(config, segment)
        started.append(worker.process.pid)
        return worker

    monkeypatch.setattr(front, "_Worker", counting_worker)
    # Messages a pool process examined arrive as the addresses it spooled them at.
    spooled: list[type] = []
    real_add = TurnSpool.add_shared

    def noting_add(spool: TurnSpool, data: bytes | int, digest: bytes) -> int:
        spooled.append(type(data))
        return real_add(spool, data, digest)

    monkeypatch.setattr(TurnSpool, "add_shared", noting_add)
    pooled = _everything(tmp_path, 2)
    assert len(set(started)) == 2, "the tree was not handed to two processes"
    assert int in spooled, "no message was spooled by a pool process"
    # Something of every kind was found, so the comparison below compares something.
    assert len(serial["reports"]) >= front.POOL_MIN_FILES
    assert serial["hits"] and serial["threads"] and serial["facts"]
    assert {r[1] for r in serial["reports"]} >= {"recording", "trace"}
    assert any(f.kind == "file_too_large" for f in serial["findings"])
    assert any(f.kind == "symlink_skipped" for f in serial["findings"])
    for name, value in serial.items():
        assert pooled[name] == value, name


def test_the_analyser_examines_files_itself_while_the_pool_is_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pool processes slow to start: the analyser does not wait for them, it examines the
    next chunks itself, and the analysis is still the one a single process makes."""
    _mixed_tree(tmp_path)
    serial = _everything(tmp_path, 1)
    monkeypatch.setattr(front, "POOL_MIN_BYTES", 1)
    slow = "import time; time.sleep(2); from cassettes_app.analysis.front import serve; serve()"
    monkeypatch.setattr(front, "WORKER_COMMAND", [sys.executable, "-c", slow])
    pools: list[front.PoolStats] = []
    pooled = _everything(tmp_path, 2, pools)
    assert pools[0].processes == 2
    assert 0 < pools[0].examined_here < len(serial["reports"]), "nothing was examined here"
    for name, value in serial.items():
        assert pooled[name] == value, name


class _FakeWorker:
    """A pool process that answers a chunk only when asked (`receive`), or at once, with
    answers of `size` bytes."""

    def __init__(self, at_once: bool, size: int = 1000) -> None:
        self.at_once = at_once
        self.size = size
        self.answers: Any = __import__("queue").SimpleQueue()
        self.held: list[list[tuple[str, str]]] = []
        self.taken = 0
        self.most_held = 0

    @property
    def pending(self) -> int:
        return len(self.held)

    def answer_bytes(self) -> float:
        return self.size if self.taken else float("inf")

    def send(self, chunk: list[tuple[str, str]]) -> None:
        self.held.append(chunk)
        self.most_held = max(self.most_held, len(self.held))
        if self.at_once:
            self.answers.put(chunk)

    def receive(self) -> list[Any]:
        chunk = self.held.pop(0)
        self.taken += 1
        if self.at_once:
            self.answers.get()
        return [("pool", rel) for rel, _ in chunk]


@pytest.mark.parametrize("at_once", [False, True])
def test_every_chunk_is_examined_once_and_yielded_in_order(at_once: bool) -> None:
    files = [(f"f{i:03d}", "recording") for i in range(203)]
    chunks = [files[i : i + front._CHUNK] for i in range(0, len(files), front._CHUNK)]
    pool = [_FakeWorker(at_once), _FakeWorker(at_once)]
    stats = front.PoolStats()
    out: list[Any] = []
    ahead_most = 0  # chunks examined here beyond the one the caller waits for

    def here(chunk: list[tuple[str, str]]) -> list[Any]:
        nonlocal ahead_most
        ahead_most = max(ahead_most, (files.index(chunk[0]) - len(out)) // front._CHUNK)
        return [("here", rel) for rel, _ in chunk]

    for item in front._ordered(pool, chunks, here, stats):  # type: ignore[arg-type]
        out.append(item)
    assert [rel for _, rel in out] == [rel for rel, _ in files]
    here_count = sum(1 for who, _ in out if who == "here")
    assert stats.examined_here == here_count
    if at_once:
        assert here_count == 0, "a ready pool was not waited on"
    else:
        # Never ready until asked: every wait is spent examining here, a bounded number of
        # chunks ahead; the pool still gets its share.
        assert 0 < here_count < len(files)
        assert 0 < ahead_most <= front._AHEAD_MAX * len(pool) + front._AHEAD
    assert all(not w.held for w in pool)


@pytest.mark.parametrize(
    ("size", "most"),
    [
        (1000, front._AHEAD_MAX),  # small answers: as many chunks as it may hold
        (front._HELD_BYTES // 10, 10),  # ten answers of this size fill the budget
        (front._HELD_BYTES, front._AHEAD),  # large ones: no more than before
    ],
)
def test_a_process_holds_more_chunks_the_smaller_its_answers(size: int, most: int) -> None:
    """Processes run further ahead of a busy analyser while their answers waiting for it
    stay within _HELD_BYTES; a process always holds _AHEAD, whatever their size."""
    files = [(f"f{i:04d}", "recording") for i in range(front._CHUNK * 200)]
    chunks = [files[i : i + front._CHUNK] for i in range(0, len(files), front._CHUNK)]
    pool = [_FakeWorker(True, size), _FakeWorker(True, size)]
    out = list(front._ordered(pool, chunks, lambda chunk: [], front.PoolStats()))  # type: ignore[arg-type]
    assert [rel for _, rel in out] == [rel for rel, _ in files]
    assert [w.most_held for w in pool] == [most, most]


def test_a_small_tree_is_examined_in_the_analysers_own_process(tmp_path: Path) -> None:
    files = [(f"f{i}.json", "recording") for i in range(front.POOL_MIN_FILES)]
    for rel, _ in files:
        (tmp_path / rel).write_text("{}")
    # Many files, few bytes: no pool.
    assert front.pool_size(4, files, tmp_path) == 0
    (tmp_path / "f0.json").write_bytes(b" " * front.POOL_MIN_BYTES)
    assert front.pool_size(4, files, tmp_path) == 4
    assert front.pool_size(1, files, tmp_path) == 0
    # Big bytes, few files: no pool.
    assert front.pool_size(4, files[:3], tmp_path) == 0


@pytest.mark.parametrize(
    ("program", "error"),
    [
        ("import sys; sys.exit(3)", "ended unexpectedly (exit code 3)"),
        # A process that answers with a failure (here: the settings it cannot use).
        (
            "from cassettes_app.analysis.front import serve; serve()",
            "an analysis process failed: AttributeError",
        ),
    ],
)
def test_a_failing_pool_process_fails_the_analysis_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str, error: str
) -> None:
    _mixed_tree(tmp_path)
    monkeypatch.setattr(front, "POOL_MIN_BYTES", 1)
    monkeypatch.setattr(front, "WORKER_COMMAND", [sys.executable, "-c", program])
    broken = FrontConfig(tmp_path, None)  # type: ignore[arg-type]
    real_worker = front._Worker
    monkeypatch.setattr(front, "_Worker", lambda config, segment: real_worker(broken, segment))
    analyzer = Analyzer(tmp_path, _config(), 2)
    with pytest.raises(RuntimeError, match=re.escape(error)):
        list(analyzer.files())


def test_pool_processes_end_when_the_analysis_stops_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mixed_tree(tmp_path)
    monkeypatch.setattr(front, "POOL_MIN_BYTES", 1)
    workers: list[Any] = []
    real_worker = front._Worker

    def keeping_worker(config: Any, segment: Any) -> Any:
        workers.append(real_worker(config, segment))
        return workers[-1]

    monkeypatch.setattr(front, "_Worker", keeping_worker)
    files = Analyzer(tmp_path, _config(), 2).files()
    next(files)
    files.close()  # the caller gives up after one file (an error, a cancelled job)
    assert len(workers) == 2
    assert all(w.process.poll() is not None for w in workers)


def test_a_busy_pool_process_dies_with_the_analysis_that_started_it(tmp_path: Path) -> None:
    """A worker child killed mid-analysis (time limit, OOM) leaves no pool process behind,
    even one stuck on a file and reading no pipe."""
    pid_file = tmp_path / "pid"
    program = f"""
import sys, time
from cassettes_app.analysis import front
front.WORKER_COMMAND = [sys.executable, "-c",
    "import sys, time; from cassettes_app.analysis.front import die_with_parent; "
    "die_with_parent(int(sys.argv[1])); open({str(pid_file)!r}, 'w').write('ok'); "
    "time.sleep(120)"]
worker = front._Worker(None)
print(worker.process.pid, flush=True)
time.sleep(120)
"""
    parent = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, cwd=front._PACKAGE_ROOT
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_file.exists(), "the pool process never started"
    assert _alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child), "the pool process outlived the analysis"


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by init, is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


_SENDER = """
import signal, sys
from cassettes_app.analysis import front
signal.signal(signal.SIGUSR1, lambda *_: None)
print("ready", flush=True)
for i in range(20):
    front._write(sys.stderr.buffer, [bytes([i]) * 300_000 for _ in range(8)])
"""


def test_frames_arrive_whole_while_signals_interrupt_the_writes() -> None:
    """Each signal cuts a pipe write short; the buffered file objects then lost bytes and
    every later frame was read from the wrong place ('invalid load key')."""
    sender = subprocess.Popen(
        [sys.executable, "-c", _SENDER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=front._PACKAGE_ROOT,
    )
    assert sender.stdout is not None and sender.stderr is not None
    assert sender.stdout.readline() == b"ready\n"
    stop = threading.Event()

    def interrupt() -> None:
        while not stop.is_set() and sender.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sender.pid, signal.SIGUSR1)
            time.sleep(0.0002)

    hammer = threading.Thread(target=interrupt)
    hammer.start()
    try:
        for i in range(20):
            value = front._read(sender.stderr)
            assert value == [bytes([i]) * 300_000] * 8, f"frame {i}"
            time.sleep(0.005)  # the pipe fills while the reader is away
    finally:
        stop.set()
        hammer.join()
        sender.kill()
        sender.wait()


def test_pool_processes_go_on_while_the_analyser_is_busy(tmp_path: Path) -> None:
    """A process's answers are read as it writes them: it examines every chunk it holds
    without waiting for the analyser to ask (an answer is larger than a pipe holds)."""
    for i in range(front._AHEAD * front._CHUNK):
        body = {
            "key": f"{i:08x}",
            "request": {"messages": [{"role": "user", "content": "x" * 100_000}]},
        }
        (tmp_path / f"r{i}.json").write_text(json.dumps(body))
    files = sorted((p.name, "recording") for p in tmp_path.iterdir())
    worker = front._Worker(FrontConfig(tmp_path, _config()))
    try:
        for start in range(0, len(files), front._CHUNK):
            worker.send(files[start : start + front._CHUNK])
        deadline = time.monotonic() + 30
        while worker.answers.qsize() < front._AHEAD and time.monotonic() < deadline:
            time.sleep(0.02)
        assert worker.answers.qsize() == front._AHEAD, "the process waited to be read"
        assert [d.rel for d in worker.receive()] == [rel for rel, _ in files[: front._CHUNK]]
    finally:
        worker.close()
    assert worker.process.poll() is not None


def test_answers_come_through_a_pipe_wide_enough_to_take_one_whole(tmp_path: Path) -> None:
    """A process writes an answer (hundreds of KiB) and goes on, without waiting for the
    analyser's reader, which shares the analyser's time, to come round once per 64 KiB."""
    import fcntl

    allowed = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    worker = front._Worker(FrontConfig(tmp_path, _config()))
    try:
        assert worker.process.stdout is not None
        size = fcntl.fcntl(worker.process.stdout.fileno(), fcntl.F_GETPIPE_SZ)
        assert size >= min(front._PIPE_BYTES, allowed)
    finally:
        worker.close()


def test_a_spool_reads_back_what_other_processes_wrote_into_its_segments() -> None:
    """Each segment is read where its writer put each value, beside the spool's own file;
    a content written twice into one segment is stored once."""
    spool = TurnSpool()
    try:
        own = spool.add_shared(b'{"own": 1}', b"d-own")
        payload = spool.add({"usage": 1})
        writers = [SegmentWriter(*spool.segment()) for _ in range(2)]
        first = writers[0].add_shared(b'{"a": 1}', b"d-a")
        again = writers[0].add_shared(b'{"a": 1}', b"d-a")
        big = writers[1].add_shared(b"x" * 300_000, b"d-x")
        second = writers[1].add_shared(b'{"b": 2}', b"d-b")
        assert first == again and first >> SEGMENT_SHIFT == 1 and big >> SEGMENT_SHIFT == 2
        assert spool.add_shared(first, b"d-a") == first  # an address passes as it is
        assert spool.get_bytes(first) == b'{"a": 1}'
        assert spool.get_bytes(big) == b"x" * 300_000
        assert spool.get_bytes(second) == b'{"b": 2}'
        assert spool.get_bytes(own) == b'{"own": 1}'
        assert spool.get(payload) == {"usage": 1}
        assert os.fstat(writers[0].fd).st_size == 8 + len(b'{"a": 1}')
    finally:
        spool.close()
