"""The record pass: the hand-in's own record mode, run in the sandbox against the team's model.

The assignment's `record_command` runs in a fresh copy of the hand-in in the sandbox, whose
only network is its own loopback. Our relay (`sandbox/runtime/relay.py`, started first, from
the read-only runtime) listens on 127.0.0.1:RELAY_PORT there and forwards each connection to
a Unix socket bound in from the host, where the model proxy (`net/model_proxy.py`) swaps the
placeholder key for the team's, allows one method and path to the endpoint's host through
the outbound guard, counts calls and tokens, and answers 429 past the caps (the endpoint's
per-check caps; the month caps through the spend ledger, under the assignment row's lock).

The sandbox sees the variables the assignment names (`record_env`): the relay's base URL
and a placeholder key, never the key. What the pass wrote under the recording globs is
stored as a re-record (never over the hand-in) and compared like an uploaded one. A pass that
made more calls than the hand-in declares its record mode is capped at is a finding.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from cassettes_app.analysis.globs import glob_match
from cassettes_app.checks import counted
from submissions.assignments import DEFAULT_RECORD_ENV
from submissions.checks.spot_spend import CapReached, spend_reserve, spend_settle
from submissions.intake.rerecord import rerecord_create
from submissions.jobs.queue import job_create
from submissions.models import Job, Rerecord, Submission
from submissions.net.endpoints import Endpoint, EndpointKeyMissing, endpoint_key
from submissions.net.model_proxy import PLACEHOLDER, CapRefused, ModelProxy
from submissions.redact import json_storable, redact_text
from submissions.sandbox.slots import Slot, work_parent
from submissions.sandbox.types import RUNTIME_FILES, Bind, RunResult

RELAY_PORT = 8765
SOCKET_MOUNT = "/run/cr-model"
SOCKET_NAME = "model.sock"
RELAY = (RUNTIME_FILES / "relay.py").read_text(encoding="utf-8")
MAX_FILE_BYTES = 5_000_000  # a recording the pass wrote, read back
MAX_TOTAL_BYTES = 50_000_000
_DECLARED = re.compile(
    r"(?i)\b(?:record[_ -]?)?(?:max[_ -]?(?:model[_ -]?)?calls|call[_ -]?cap|record[_ -]?cap)"
    r"\b\s*(?:[:=?]+|\bis\b|\bof\b)?\s*(\d{1,6})\b"
)
_DECLARING_FILES = ("REPLAY.md", "README.md", "RUNBOOK.md", "Makefile", ".env.example", "run.sh")


class RecordPassRefused(Exception):
    """The record pass cannot run; the message says why (nothing was spent)."""


@dataclass(slots=True)
class RecordPassResult:
    """What a record pass did: the run, the proxy's exchanges, what it wrote."""

    exit_code: int | None
    killed: str | None
    calls: int
    tokens: int
    exchanges: list[dict[str, Any]]
    written: list[str]
    declared_cap: dict[str, Any] | None
    findings: list[str] = field(default_factory=list)
    output_tail: str = ""
    rerecord: Rerecord | None = None

    def as_dict(self) -> dict[str, Any]:
        """Stored form (strings without NUL: PostgreSQL's JSON refuses them)."""
        return json_storable(
            {
                "exit_code": self.exit_code,
                "killed": self.killed,
                "calls": self.calls,
                "tokens": self.tokens,
                "exchanges": self.exchanges,
                "written": self.written,
                "declared_cap": self.declared_cap,
                "findings": self.findings,
                "output_tail": self.output_tail,
            }
        )


def declared_cap(tree: Path) -> dict[str, Any] | None:
    """The call cap the hand-in declares for its record mode (`MAX_CALLS=20`, "record cap:
    20"), with the file and line it was read from; None when it declares none."""
    for name in _DECLARING_FILES:
        path = tree / name
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            text = path.read_bytes()[:200_000].decode("utf-8", "replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if match := _DECLARED.search(line):
                return {"calls": int(match.group(1)), "path": name, "line": number}
    return None


def _endpoint(name: str | None) -> Endpoint:
    endpoints: tuple[Endpoint, ...] = settings.SPOT_CHECK_ENDPOINTS
    if not endpoints:
        raise RecordPassRefused("no team model endpoint is configured (SPOT_CHECK_ENDPOINTS)")
    found = endpoints[0] if name is None else next((e for e in endpoints if e.name == name), None)
    if found is None:
        raise RecordPassRefused(f"no endpoint named {name!r} is configured")
    return found


def sandbox_env(record_env: dict[str, str], proxy: ModelProxy) -> dict[str, str]:
    """The variables the sandbox sees: the relay's addresses and the placeholder, no key."""
    origin = f"http://127.0.0.1:{RELAY_PORT}"
    values = {"base_url": origin + proxy.base_path(), "origin": origin, "key": PLACEHOLDER}
    return {name: values[kind] for name, kind in record_env.items()}


@contextlib.contextmanager
def _socket_dir() -> Iterator[Path]:
    """A fresh root-owned folder for the proxy's socket, readable by the sandbox uid (it
    holds the socket alone; only this run's sandbox has it mounted)."""
    path = Path(tempfile.mkdtemp(prefix=".cr-model-", dir=work_parent()))
    os.chmod(path, 0o755)  # noqa: S103
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _ledger(submission: Submission, endpoint: Endpoint) -> Callable:
    """The proxy's `reserve`: one spend row per call, taken under the assignment's lock."""

    # Called on the proxy's own threads (one per request): each closes the database
    # connection it opened, or every call would leave one open behind it.
    def reserve(estimate: int) -> Callable[[int | None], None]:
        try:
            spend = spend_reserve(submission=submission, endpoint=endpoint, estimate=estimate)
        except CapReached as exc:
            connection.close()
            raise CapRefused(str(exc)) from None

        def settle(tokens: int | None) -> None:
            try:
                spend_settle(spend=spend, tokens=tokens)
            finally:
                connection.close()

        return settle

    return reserve


def _snapshot(root: Path, globs: list[str]) -> dict[str, tuple[int, int, int]]:
    """(inode, size, mtime) of each regular file under the globs: what a run changed."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if not any(glob_match(g, rel) for g in globs):
                continue
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _read_written(root: Path, rel: str) -> bytes | None:
    """A file the pass wrote, read without following links, or None (a link, a FIFO, huge)."""
    try:
        fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        return f.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]


def _findings(result: RecordPassResult, proxy: ModelProxy) -> list[str]:
    out = []
    cap = result.declared_cap
    if cap is not None and result.calls + _refused_by_cap(proxy) > cap["calls"]:
        asked = result.calls + _refused_by_cap(proxy)
        out.append(
            f"the record pass asked for {asked} model calls; the hand-in declares a cap of "
            f"{cap['calls']} ({cap['path']} line {cap['line']}): record is not capped as declared"
        )
    elif cap is None:
        out.append("the hand-in declares no cap on its record mode's model calls")
    if _refused_by_cap(proxy):
        out.append(f"{counted(_refused_by_cap(proxy), 'call')} refused at the proxy's cap (429)")
    refused = [e for e in proxy.exchanges if e.refused and e.status != 429]
    if refused:
        out.append(
            f"{counted(len(refused), 'request')} refused by the proxy "
            "(another method, path or host): "
            + "; ".join(f"{e.method} {e.path} ({e.status})" for e in refused[:5])
        )
    return out


def _refused_by_cap(proxy: ModelProxy) -> int:
    return sum(1 for e in proxy.exchanges if e.status == 429)


def record_pass_run(
    *,
    submission: Submission,
    tree: Path,
    slot: Slot,
    endpoint: str | None = None,
    environ: Any = None,
    uploaded_by: Any = None,
) -> RecordPassResult:
    """Run the record command behind the proxy; store what it wrote as a re-record."""
    assignment = submission.assignment
    if not assignment.record_command.strip():
        raise RecordPassRefused("the assignment names no record command")
    found = _endpoint(endpoint)
    try:
        key = endpoint_key(found, environ)
    except EndpointKeyMissing as exc:
        raise RecordPassRefused(str(exc)) from None
    globs = list(assignment.recording_globs or [])
    with _socket_dir() as sockets:
        proxy = ModelProxy(
            endpoint=found,
            key=key,
            socket_path=sockets / SOCKET_NAME,
            allow=settings.OUTBOUND_ALLOW,
            max_calls=found.check_calls,
            max_tokens=found.check_tokens,
            timeout=settings.SPOT_CHECK_TIMEOUT_SECONDS,
            reserve=_ledger(submission, found),
        )
        with proxy, slot.workspace(tree) as workspace:
            before = _snapshot(workspace, globs)
            socket = f"{SOCKET_MOUNT}/{SOCKET_NAME}"
            command = ["/bin/sh", "-c", assignment.record_command]
            run: RunResult = slot.run(
                [*slot.trusted_python, "-c", RELAY, str(RELAY_PORT), socket, *command],
                workspace=workspace,
                env=sandbox_env(assignment.record_env or DEFAULT_RECORD_ENV, proxy),
                binds=[Bind(sockets, SOCKET_MOUNT)],
            )
            after = _snapshot(workspace, globs)
            written = sorted(p for p, mark in after.items() if before.get(p) != mark)
            files = {p: data for p in written if (data := _read_written(workspace, p)) is not None}
    # NUL dropped: the tail goes to the job log, a PostgreSQL text field.
    tail = (run.stderr or run.stdout)[-1500:].decode("utf-8", "replace").replace("\x00", "")
    result = RecordPassResult(
        exit_code=run.exit_code,
        killed=run.killed_reason,
        calls=proxy.calls,
        tokens=proxy.tokens,
        exchanges=[e.as_dict() for e in proxy.exchanges],
        written=written,
        declared_cap=declared_cap(tree),
        output_tail=redact_text(tail.replace(key, "[key removed]")),
    )
    result.findings = _findings(result, proxy)
    if files:
        result.rerecord = _store(submission, files, key, result, uploaded_by)
    return result


def _store(
    submission: Submission,
    files: dict[str, bytes],
    key: str,
    result: RecordPassResult,
    uploaded_by: Any,
) -> Rerecord:
    """What the pass wrote, as a re-record archive (the key scrubbed, should it be there)."""
    buffer = io.BytesIO()
    total = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel, data in sorted(files.items()):
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                result.findings.append(f"the pass wrote over {MAX_TOTAL_BYTES} bytes; cut")
                break
            # Under one top folder, which intake takes as the root (as a "download ZIP"
            # is): without it, files all under `cassettes/` would lose that folder.
            archive.writestr(f"record-pass/{rel}", data.replace(key.encode(), b"[key removed]"))
    buffer.seek(0)
    rerecord, _ = rerecord_create(
        submission=submission, upload=buffer, filename="record-pass.zip", uploaded_by=uploaded_by
    )
    Rerecord.objects.filter(pk=rerecord.pk).update(record_pass=result.as_dict())
    rerecord.record_pass = result.as_dict()
    return rerecord


def record_pass_queue(*, submission: Submission, endpoint: str | None = None) -> Job:
    """Queue a record pass of the hand-in; RecordPassRefused when it cannot run now."""
    if not submission.assignment.record_command.strip():
        raise RecordPassRefused("the assignment names no record command")
    found = _endpoint(endpoint)
    with transaction.atomic():
        # The submission row orders two requests: the second sees the first one's job.
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        pending = locked.jobs.filter(kind=Job.Kind.RECORD).exclude(state__in=Job.FINAL_STATES)
        if pending.exists():
            raise RecordPassRefused("a record pass of this hand-in is already queued or running")
        return job_create(submission=locked, kind=Job.Kind.RECORD, params={"endpoint": found.name})
