"""Supervising a running sandbox: capped output capture, the wall clock, the kill and the reap."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time

from submissions.sandbox.types import CHUNK, DRAIN_GRACE_S, OUTPUT_KILL_FACTOR, SandboxLimits


class Capture:
    """Keep the head and tail of one output stream within a byte cap, counting the rest."""

    def __init__(self, cap: int) -> None:
        """Start empty."""
        self.cap = cap
        self.tail_keep = min(cap // 8, 64 * 1024)
        self.head = bytearray()
        self.ring = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk, never holding much more than cap bytes."""
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.ring += data
            if len(self.ring) > 2 * self.tail_keep + CHUNK:
                del self.ring[: len(self.ring) - self.tail_keep]

    @property
    def truncated(self) -> bool:
        """Whether output went past the cap."""
        return self.total > self.cap

    def value(self) -> bytes:
        """Return the captured bytes, with the truncation marker lines when over the cap."""
        if not self.truncated:
            return bytes(self.head)
        kept = self.cap - self.tail_keep
        tail = (
            (bytes(self.head[kept:]) + bytes(self.ring))[-self.tail_keep :]
            if self.tail_keep
            else b""
        )
        omitted = self.total - kept - len(tail)
        marker = (
            f"\n[… output truncated at {self.cap} bytes …]\n"
            f"[… {omitted} bytes omitted of {self.total}; the last {len(tail)} bytes follow …]\n"
        )
        return bytes(self.head[:kept]) + marker.encode() + tail


def signal_reason(exit_code: int | None) -> str | None:
    """Name the limit or signal behind an exit status of 128+N (inferred, not proven)."""
    if exit_code is None or exit_code <= 128:
        return None
    sig = exit_code - 128
    if sig == signal.SIGXCPU:
        return "cpu time"
    if sig == signal.SIGXFSZ:
        return "file size"
    try:
        return f"signal {signal.Signals(sig).name}"
    except ValueError:
        return None


CANCELLED = "cancelled"


def supervise(
    proc: subprocess.Popen[bytes],
    limits: SandboxLimits,
    started: float,
    status_fd: int | None,
    cancel_fd: int | None = None,
) -> tuple[Capture, Capture, bytes, str | None, int | None]:
    """Read output and status concurrently under the wall clock; kill the group on a limit,
    or as CANCELLED once `cancel_fd` (a pipe's read end) becomes readable."""
    out, err = Capture(limits.output_bytes), Capture(limits.output_bytes)
    status = bytearray()
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    if status_fd is not None:
        sel.register(status_fd, selectors.EVENT_READ, status)
    if cancel_fd is not None:
        sel.register(cancel_fd, selectors.EVENT_READ, CANCELLED)
    try:
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):
        pidfd = None
    deadline = started + limits.wall_seconds
    kill_at_output = OUTPUT_KILL_FACTOR * limits.output_bytes
    killed: str | None = None
    exited_at: float | None = None
    returncode: int | None = None

    def kill(reason: str) -> None:
        nonlocal killed
        if killed is None and returncode is None:
            killed = reason
            # The group holds setpriv->prlimit->bwrap (one exec'd process); bwrap's pid 1
            # inside dies by PDEATHSIG, and with it every process of the pid namespace.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def reap() -> None:
        nonlocal returncode, exited_at
        # No rusage here: bwrap's outer process learns the exit status from its pid 1
        # without reaping it, so wait4() would only show bwrap's own few milliseconds.
        if proc.poll() is not None:
            returncode = proc.returncode
            exited_at = time.monotonic()

    try:
        while True:
            streams_open = any(not isinstance(k.data, str) for k in sel.get_map().values())
            if returncode is not None and not streams_open:
                break
            now = time.monotonic()
            if now >= deadline and killed is None:
                kill("wall time")
            if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
                break  # something still holds a pipe; the uid sweep ends it
            if returncode is None and pidfd is None:
                reap()
                timeout = 0.05
            else:
                timeout = max(0.0, min(deadline - now, 1.0)) if killed is None else 0.2
            for key, _ in sel.select(timeout=timeout):
                if key.data == CANCELLED:  # the caller no longer needs this run
                    sel.unregister(key.fd)
                    kill(CANCELLED)
                    continue
                if isinstance(key.data, str):  # the pidfd: bwrap exited
                    sel.unregister(key.fd)
                    reap()
                    continue
                data = os.read(key.fd, CHUNK)
                if not data:
                    sel.unregister(key.fd)
                    continue
                if isinstance(key.data, Capture):
                    key.data.feed(data)
                    if out.total + err.total > kill_at_output:
                        kill("output limit")
                elif len(key.data) < 65536:
                    key.data.extend(data)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        if returncode is None:
            kill("supervisor error")
            proc.wait()
            returncode = proc.returncode
        proc.stdout.close()
        proc.stderr.close()
    return out, err, bytes(status), killed, returncode
