"""The service probe job: start the candidate's ticket service in the sandbox and probe it.

With no network in the sandbox the model is unavailable by construction, so every answer
shows how the service degrades. A stdlib driver inside the same sandbox starts the service
(PORT set), waits for its port, sends each built-in log line twice, watches the ledger grow
after every request, stops the service and prints what it saw after a random nonce.

Writes service.starts, service.schema_valid, service.degrades_gracefully, service.caches and
(judged on the ledger lines appended during the probe) ledger.consistent, which replaces the
static result.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import secrets
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.ledger import (
    CACHE_HIT,
    FALLBACK,
    MAX_ATTEMPTS,
    MODEL_CALL,
    classify_event,
    ledger_consistent,
)
from cassettes_app.formats import parse_file
from cassettes_app.formats.base import LedgerEntry
from submissions import sandbox
from submissions.analysis import checks_store
from submissions.intake import submission_tree
from submissions.jobs import JobError, Outcome, Progress, handler
from submissions.models import Assignment, Job, Submission
from submissions.redact import redact_text
from submissions.replay import (
    _layers,
    _sandbox_kwargs,
    _slot,
    _work_parent,
    sandbox_limits,
    sandbox_problems,
)

log = logging.getLogger(__name__)

STARTS = "service.starts"
SCHEMA_VALID = "service.schema_valid"
DEGRADES = "service.degrades_gracefully"
CACHES = "service.caches"
LEDGER = "ledger.consistent"
PROBE_CHECKS = (STARTS, SCHEMA_VALID, DEGRADES, CACHES)

DEFAULT_PORT = 8000
DEFAULT_REQUEST = {"method": "POST", "path": "/extract", "field": "line"}
SPEC_NAME = ".cr-probe.json"
EVIDENCE_CHARS = 2048
LOW_CONFIDENCE = 0.5
SEVERITIES = ("low", "medium", "high", "critical")
TICKET_FIELDS = ("service", "severity", "first_seen", "evidence", "confidence", "needs_human")
UNKNOWN_WORDS = frozenset({"", "unknown", "n/a", "none", "null"})
DID_NOT_START = "the service did not start"

# A date and time as log lines write them: 2024-03-09T14:02:11Z, 2024-03-09 14:05:42,531, ...
ISO_TS = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)


# ------------------------------------------------------------------ what is sent


@dataclass(frozen=True)
class ProbeLine:
    """One log line the probe sends (twice).

    `timestamp` is the timestamp written in the line (None: the line has none, so
    first_seen must stay unknown). `may_reject`: a 4xx with a JSON error is a fair answer.
    """

    label: str
    text: str
    timestamp: str | None = None
    may_reject: bool = False


def _big_line(size: int = 100 * 1024) -> str:
    head = "2024-03-09T14:11:00Z ERROR bulk-import: batch 77 rejected, rows follow: "
    row = "row=1042 sku=ZX-1042 qty=3 price=19.99 status=rejected reason=invalid_tax_code; "
    return (head + row * (size // len(row) + 1))[:size]


PROBE_LINES: tuple[ProbeLine, ...] = (
    ProbeLine(
        "panic",
        "panic: runtime error: invalid memory address or nil pointer dereference "
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x4a7c3e]",
    ),
    ProbeLine(
        "error",
        "2024-03-09T14:02:11Z payments ERROR charge failed for order 8812: upstream timeout "
        "after 30s",
        "2024-03-09T14:02:11Z",
    ),
    ProbeLine(
        "warning",
        "2024-03-09 14:05:42 WARN auth-service: token refresh took 2.4s (threshold 1s)",
        "2024-03-09 14:05:42",
    ),
    ProbeLine(
        "ISO timestamp",
        "2024-03-09T14:07:30.125+01:00 INFO scheduler: nightly export finished, 1824 rows",
        "2024-03-09T14:07:30.125+01:00",
    ),
    ProbeLine(
        "no timestamp",
        "worker-3 ERROR could not connect to redis at cache:6379 (connection refused)",
    ),
    ProbeLine(
        "non-ASCII",
        "zahlungen: Überweisung fehlgeschlagen — Konto gesperrt (код 51, 支払い失敗) ⚠",
    ),
    ProbeLine("empty", "", may_reject=True),
    ProbeLine("100 KB", _big_line(), "2024-03-09T14:11:00Z", may_reject=True),
)


@dataclass(frozen=True)
class ProbeConfig:
    """What to start and how to ask it, from the assignment and settings."""

    command: str
    port: int = DEFAULT_PORT
    method: str = "POST"
    path: str = "/extract"
    field: str = "line"
    ledger_globs: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None
    start_timeout: float = 20.0
    request_timeout: float = 10.0
    probe_seconds: float = 120.0
    settle_seconds: float = 0.05
    lines: tuple[ProbeLine, ...] = PROBE_LINES

    @classmethod
    def from_assignment(cls, assignment: Assignment) -> ProbeConfig:
        request = {**DEFAULT_REQUEST, **(assignment.service_request or {})}
        return cls(
            command=assignment.service_start_command.strip(),
            port=assignment.service_port or DEFAULT_PORT,
            method=str(request["method"] or "POST").upper(),
            path=str(request["path"] or "/extract"),
            field=str(request["field"] or "line"),
            ledger_globs=tuple(assignment.ledger_globs or ()),
            schema=assignment.ticket_schema or None,
            start_timeout=float(getattr(settings, "SERVICE_START_TIMEOUT_SECONDS", 20.0)),
            request_timeout=float(getattr(settings, "SERVICE_REQUEST_TIMEOUT_SECONDS", 10.0)),
            probe_seconds=float(getattr(settings, "SERVICE_PROBE_SECONDS", 120.0)),
            settle_seconds=float(getattr(settings, "SERVICE_SETTLE_SECONDS", 0.05)),
        )

    @property
    def endpoint(self) -> str:
        return f"{self.method} {self.path}"


def build_requests(config: ProbeConfig) -> list[dict[str, Any]]:
    """Each line twice in a row (the repeat must come from the cache), as the driver sends them."""
    base = f"http://127.0.0.1:{config.port}{config.path}"
    out = []
    for line in config.lines:
        for repeat in (1, 2):
            if config.method in ("GET", "HEAD", "DELETE"):
                sep = "&" if "?" in config.path else "?"
                url = base + sep + urllib.parse.urlencode({config.field: line.text})
                body, headers = None, {"Accept": "application/json"}
            else:
                url = base
                body = json.dumps({config.field: line.text}, ensure_ascii=False)
                headers = {"Content-Type": "application/json", "Accept": "application/json"}
            out.append(
                {
                    "index": len(out),
                    "label": line.label,
                    "repeat": repeat,
                    "method": config.method,
                    "url": url,
                    "body": body,
                    "headers": headers,
                }
            )
    return out


# ------------------------------------------------------------------ the driver

# Runs inside the sandbox with the runtime's python, stdlib only. It reads (and deletes) its
# spec, nonce included, before the service starts and makes itself non-dumpable, so the
# service (same uid) can neither learn the nonce nor write into this process's stdout.
# Events are printed one per line as they happen: a run cut short still tells what it saw.
DRIVER = r"""
import ctypes, glob, json, os, signal, socket, stat, subprocess, sys, time
import urllib.error, urllib.request
try:
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
except Exception:
    pass
spec = json.load(open(sys.argv[1], encoding="utf-8"))
os.unlink(sys.argv[1])
NONCE = spec["nonce"]
def emit(kind, **data):
    data["type"] = kind
    sys.stdout.write(NONCE + json.dumps(data) + "\n")
    sys.stdout.flush()
LOG = "/tmp/cr-service.log"
logf = open(LOG, "wb")
def tail():
    logf.flush()
    with open(LOG, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - spec["log_tail"]))
        return f.read().decode("utf-8", "replace")
def regular(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd
def ledgers():
    found = []
    for pattern in spec["ledgers"]:
        for p in sorted(glob.glob(pattern, recursive=True))[:20]:
            if p not in found and not p.startswith(".cr-"):
                found.append(p)
    return found[:20]
tracked = {}
budget = [spec["ledger_max_bytes"]]
def snapshot():
    for p in ledgers():
        fd = regular(p)
        if fd is None:
            continue
        try:
            size, lines, done = os.fstat(fd).st_size, 0, 0
            while done < min(size, 32 << 20):
                chunk = os.read(fd, min(1 << 20, size - done))
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                done += len(chunk)
            tracked[p] = {"offset": size, "lines": lines if done >= size else None}
        finally:
            os.close(fd)
    emit("ledger_start", files={p: s["offset"] for p, s in tracked.items()})
def collect(after, final=False):
    for p in ledgers():
        state = tracked.setdefault(p, {"offset": 0, "lines": 0})
        fd = regular(p)
        if fd is None:
            continue
        try:
            size = os.fstat(fd).st_size
            if size < state["offset"]:
                emit("ledger_note", path=p, note="%s shrank from %d to %d bytes during the "
                     "probe: rewritten, not appended" % (p, state["offset"], size))
                state["offset"], state["lines"] = 0, None
            want = min(size - state["offset"], budget[0])
            if size > state["offset"] and want <= 0:
                if not state.get("capped"):
                    emit("ledger_note", path=p, note="ledger output cap reached; later lines "
                         "of %s not read" % p)
                state["capped"] = True
                continue
            data = b""
            if want > 0:
                os.lseek(fd, state["offset"], 0)
                while len(data) < want:
                    chunk = os.read(fd, want - len(data))
                    if not chunk:
                        break
                    data += chunk
        finally:
            os.close(fd)
        if not final:
            data = data[: data.rfind(b"\n") + 1]
        if not data:
            continue
        budget[0] -= len(data)
        emit("ledger", path=p, after=after, line_base=state["lines"],
             text=data.decode("utf-8", "replace"))
        state["offset"] += len(data)
        if state["lines"] is not None:
            state["lines"] += data.count(b"\n")
snapshot()
env = dict(os.environ, PORT=str(spec["port"]))
started = time.time()
service = subprocess.Popen(["/bin/sh", "-c", spec["command"]], env=env, stdin=subprocess.DEVNULL,
                           stdout=logf, stderr=logf, start_new_session=True)
def stop():
    if service.poll() is None:
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 3)):
            try:
                os.killpg(service.pid, sig)
            except OSError:
                pass
            try:
                service.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
    return service.poll()
while True:
    try:
        socket.create_connection(("127.0.0.1", spec["port"]), timeout=0.5).close()
        break
    except OSError:
        code = service.poll()
        if code is not None or time.time() - started > spec["start_timeout"]:
            if code is None:
                reason = "did not answer on port %d within %g s" % (
                    spec["port"], spec["start_timeout"])
            else:
                reason = "exited with code %s before answering on port %d" % (code, spec["port"])
            code = stop()
            emit("not_started", reason=reason, seconds=time.time() - started, exit_code=code,
                 log=tail())
            sys.exit(0)
        time.sleep(0.05)
emit("started", seconds=time.time() - started)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
body_budget = spec["body_max_total"]
deadline = time.time() + spec["probe_seconds"]
for r in spec["requests"]:
    if time.time() > deadline:
        emit("answer", index=r["index"], error="not sent: the probe's time budget ran out")
        continue
    data = r["body"].encode("utf-8") if r["body"] is not None else None
    req = urllib.request.Request(r["url"], data=data, method=r["method"], headers=r["headers"])
    t0 = time.time()
    try:
        try:
            resp = opener.open(req, timeout=spec["timeout"])
        except urllib.error.HTTPError as err:
            resp = err
        cap = max(1024, min(spec["body_max"], body_budget))
        raw = resp.read(cap + 1) or b""
        body_budget -= min(len(raw), cap)
        emit("answer", index=r["index"], status=getattr(resp, "status", None) or resp.code,
             content_type=resp.headers.get("Content-Type", "") if resp.headers else "",
             body=raw[:cap].decode("utf-8", "replace"), truncated=len(raw) > cap,
             seconds=time.time() - t0)
    except Exception as err:
        emit("answer", index=r["index"], error=(type(err).__name__ + ": " + str(err))[:300],
             seconds=time.time() - t0)
    time.sleep(spec["settle"])
    collect(r["index"])
code = stop()
collect("end", final=True)
emit("done", exit_code=code, log=tail())
"""


# ------------------------------------------------------------------ what came back


@dataclass
class Exchange:
    """One request of the probe and what came of it."""

    index: int
    line: ProbeLine
    repeat: int
    request: str
    status: int | None = None
    body: str = ""
    truncated: bool = False
    error: str | None = None
    seconds: float | None = None
    ledger: list[LedgerEntry] = field(default_factory=list)
    ledger_path: str = ""
    _parsed: Any = field(default=None, repr=False)
    _parsed_ok: bool | None = field(default=None, repr=False)

    @property
    def answered(self) -> bool:
        return self.status is not None

    def data(self) -> tuple[bool, Any]:
        """(is JSON, the parsed body)."""
        if self._parsed_ok is None:
            try:
                self._parsed = json.loads(self.body) if self.answered else None
                self._parsed_ok = self.answered and not self.truncated
            except ValueError:
                self._parsed, self._parsed_ok = None, False
        return bool(self._parsed_ok), self._parsed

    def ticket(self) -> dict[str, Any] | None:
        ok, value = self.data()
        return value if ok and isinstance(value, dict) else None

    @property
    def who(self) -> str:
        """The line as messages name it: its label, an excerpt, and which of the two sends."""
        nth = "first request" if self.repeat == 1 else "repeat"
        return f"{self.line.label} line {_excerpt(self.line.text)!r} ({nth})"

    def evidence(self, message: str, **extra: Any) -> dict[str, Any]:
        item: dict[str, Any] = {
            "message": redact_text(message),
            "probe": self.line.label,
            "repeat": self.repeat,
            "request": _cap(self.request),
        }
        if self.answered:
            item["status"] = self.status
            item["response"] = _cap(self.body) + (" [truncated]" if self.truncated else "")
        else:
            item["error"] = redact_text(self.error or "no answer")
        if self.ledger:
            item["ledger"] = _cap(
                "\n".join(json.dumps(e.data, ensure_ascii=False) for e in self.ledger)
            )
        item.update(extra)
        return item


@dataclass
class ProbeReport:
    """Everything the driver reported, in judging form."""

    config: ProbeConfig
    started: bool
    start_seconds: float | None = None
    start_error: str = ""
    log: str = ""
    exchanges: list[Exchange] = field(default_factory=list)
    ledger_entries: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    ledger_notes: list[str] = field(default_factory=list)
    ledger_sizes: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    exit_code: int | None = None
    run: sandbox.RunResult | None = None

    @property
    def all_entries(self) -> list[LedgerEntry]:
        return [e for entries in self.ledger_entries.values() for e in entries]


def _excerpt(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cap(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Redacted, and at most `limit` characters with a note of what was cut."""
    if len(text) > limit:
        text = text[:limit] + f"… [{len(text) - limit} more characters]"
    return redact_text(text)


def _request_text(req: dict[str, Any]) -> str:
    url = urllib.parse.urlsplit(req["url"])
    target = url.path + (f"?{url.query}" if url.query else "")
    return f"{req['method']} {target}" + (f" {req['body']}" if req["body"] is not None else "")


def _entries(path: str, text: str, line_base: int | None) -> list[LedgerEntry]:
    result = parse_file(path, text.encode("utf-8"), format_hint="ledger")
    base = line_base or 0
    return [LedgerEntry(line=e.line + base, event=e.event, data=e.data) for e in result.ledger]


def parse_driver_output(
    stdout: bytes, nonce: str, config: ProbeConfig, requests: Sequence[dict[str, Any]]
) -> ProbeReport | None:
    """The driver's events as a report; None when it printed none (it never ran)."""
    events = []
    for raw in stdout.decode("utf-8", "replace").splitlines():
        if raw.startswith(nonce):
            try:
                event = json.loads(raw[len(nonce) :])
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
    kinds = {e.get("type") for e in events}
    if not kinds & {"started", "not_started"}:
        return None
    lines = {line.label: line for line in config.lines}
    exchanges = [
        Exchange(
            index=r["index"],
            line=lines[r["label"]],
            repeat=r["repeat"],
            request=_request_text(r),
            error="no answer recorded: the probe was cut short",
        )
        for r in requests
    ]
    by_index = {ex.index: ex for ex in exchanges}
    report = ProbeReport(config=config, started="started" in kinds, exchanges=exchanges)
    report.complete = "done" in kinds or "not_started" in kinds
    for event in events:
        kind = event.get("type")
        if kind == "started":
            report.start_seconds = float(event.get("seconds") or 0)
        elif kind == "not_started":
            report.start_error = str(event.get("reason") or "")
            report.log = str(event.get("log") or "")
            report.exit_code = event.get("exit_code")
        elif kind == "done":
            report.log = str(event.get("log") or "")
            report.exit_code = event.get("exit_code")
        elif kind == "ledger_start":
            report.ledger_sizes = {str(k): int(v) for k, v in (event.get("files") or {}).items()}
        elif kind == "ledger_note":
            report.ledger_notes.append(str(event.get("note") or ""))
        elif kind == "answer" and event.get("index") in by_index:
            ex = by_index[event["index"]]
            ex.seconds = event.get("seconds")
            if event.get("error"):
                ex.error = str(event["error"])
            else:
                ex.error = None
                ex.status = int(event.get("status") or 0)
                ex.body = str(event.get("body") or "")
                ex.truncated = bool(event.get("truncated"))
        elif kind == "ledger":
            path = str(event.get("path") or "")
            entries = _entries(path, str(event.get("text") or ""), event.get("line_base"))
            report.ledger_entries.setdefault(path, []).extend(entries)
            after = event.get("after")
            if after in by_index:
                by_index[after].ledger.extend(entries)
                by_index[after].ledger_path = path
    return report


# ------------------------------------------------------------------ judging (pure)


def ticket_problems(ticket: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Why `ticket` is not a valid ticket: the assignment's JSON Schema, else the built-in shape."""
    if schema is not None:
        from jsonschema import Draft202012Validator

        errors = sorted(
            Draft202012Validator(schema).iter_errors(ticket),
            key=lambda e: [str(p) for p in e.absolute_path],
        )
        out = []
        for error in errors[:5]:
            where = "/".join(str(p) for p in error.absolute_path) or "(the ticket)"
            out.append(f"{where}: {_excerpt(error.message, 200)}")
        return out
    if not isinstance(ticket, dict):
        return ["not a JSON object"]
    problems = [f"missing {name}" for name in TICKET_FIELDS if name not in ticket]
    if "service" in ticket and not isinstance(ticket["service"], str):
        problems.append("service must be a string")
    if "severity" in ticket and ticket["severity"] not in SEVERITIES:
        problems.append(f"severity {ticket['severity']!r} not one of {'|'.join(SEVERITIES)}")
    if (
        "first_seen" in ticket
        and ticket["first_seen"] is not None
        and not isinstance(ticket["first_seen"], str)
    ):
        problems.append("first_seen must be a string or null")
    if "evidence" in ticket and not isinstance(ticket["evidence"], str):
        problems.append("evidence must be a string")
    if "confidence" in ticket:
        c = ticket["confidence"]
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c <= 1:
            problems.append(f"confidence {c!r} is not a number in [0, 1]")
    if "needs_human" in ticket and not isinstance(ticket["needs_human"], bool):
        problems.append("needs_human must be a boolean")
    return problems


def _fair_rejection(ex: Exchange) -> bool:
    """A 4xx with a JSON body for a line the service may refuse (empty, 100 KB)."""
    ok, _ = ex.data()
    return ex.line.may_reject and ex.status is not None and 400 <= ex.status < 500 and ok


def judge_starts(report: ProbeReport) -> CheckOutcome:
    """service.starts: the service answers on its port within the start timeout."""
    c = report.config
    evidence: list[dict[str, Any]] = [
        {"message": "service output (tail)", "output": _cap(report.log, 4000)},
        {"message": f"started with: {c.command}", "command": c.command, "port": c.port},
    ]
    if report.run is not None:
        evidence.append(_layers(report.run))
    if report.started:
        return CheckOutcome(
            STARTS,
            "pass",
            f"answered on port {c.port} after {report.start_seconds or 0:.1f} s",
            evidence,
        )
    return CheckOutcome(
        STARTS, "fail", f"`{c.command}` {report.start_error or 'did not start'}", evidence
    )


def judge_schema(
    exchanges: Sequence[Exchange], schema: dict[str, Any] | None = None
) -> CheckOutcome:
    """service.schema_valid: every response is JSON and a valid ticket."""
    bad: list[dict[str, Any]] = []
    good: list[dict[str, Any]] = []
    notes = []
    for ex in exchanges:
        if not ex.answered:
            bad.append(ex.evidence(f"{ex.who}: no answer: {ex.error}"))
            continue
        if _fair_rejection(ex):
            notes.append(f"the {ex.line.label} line was refused with {ex.status}")
            good.append(ex.evidence(f"{ex.who}: refused with {ex.status} and a JSON error (fair)"))
            continue
        if not 200 <= (ex.status or 0) < 300:
            bad.append(ex.evidence(f"{ex.who}: answered {ex.status}, not a ticket"))
            continue
        ok, value = ex.data()
        if not ok:
            why = "larger than the probe reads" if ex.truncated else "not JSON"
            bad.append(ex.evidence(f"{ex.who}: the response is {why}"))
            continue
        problems = ticket_problems(value, schema)
        if problems:
            bad.append(ex.evidence(f"{ex.who}: {'; '.join(problems)}", problems=problems))
        else:
            good.append(ex.evidence(f"{ex.who}: a valid ticket"))
    against = "the assignment's ticket schema" if schema is not None else "the ticket fields"
    if not exchanges:
        return skip(SCHEMA_VALID, "no request was sent")
    if bad:
        first = bad[0]["message"]
        return CheckOutcome(
            SCHEMA_VALID,
            "fail",
            f"{len(bad)} of {len(exchanges)} responses are not valid tickets ({against}); "
            f"first: {_excerpt(first, 300)}",
            bad + good,
        )
    extra = f" ({'; '.join(dict.fromkeys(notes))})" if notes else ""
    return CheckOutcome(
        SCHEMA_VALID,
        "pass",
        f"all {len(exchanges)} responses are valid tickets per {against}{extra}",
        good,
    )


def _unknown(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in UNKNOWN_WORDS)


def _parse_time(text: str) -> dt.datetime | None:
    match = ISO_TS.search(text)
    if not match:
        return None
    raw = match.group(0).replace(" ", "T", 1).replace(",", ".")
    raw = re.sub(r"Z$", "+00:00", raw)
    raw = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", raw)
    try:
        return dt.datetime.fromisoformat(raw)
    except ValueError:
        return None


def same_time(value: Any, timestamp: str) -> bool:
    """True when first_seen names the line's timestamp (same instant, or same wall clock)."""
    if not isinstance(value, str) or not value.strip():
        return False
    a, b = _parse_time(value), _parse_time(timestamp)
    if a is None or b is None:
        return timestamp in value or value.strip() in timestamp
    a, b = a.replace(microsecond=0), b.replace(microsecond=0)
    if a.tzinfo is not None and b.tzinfo is not None:
        return a == b
    return a.replace(tzinfo=None) == b.replace(tzinfo=None)


def degrade_problems(ex: Exchange) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one answer given while the model is unavailable."""
    if not ex.answered:
        return [f"no answer: {ex.error}"], []
    status = ex.status or 0
    if status >= 500:
        return [f"answered {status} with the model unavailable"], []
    if not ex.line.text.strip():
        return [], []  # the empty line: only "no 5xx" applies here
    if _fair_rejection(ex):
        return [], []
    if not 200 <= status < 300:
        return [f"answered {status} instead of a fallback ticket"], []
    ticket = ex.ticket()
    if ticket is None:
        return ["the answer is not a JSON ticket"], []
    fails, warns = [], []
    if ticket.get("needs_human") is not True:
        fails.append(f"needs_human is {ticket.get('needs_human')!r}, not true")
    c = ticket.get("confidence")
    if isinstance(c, bool) or not isinstance(c, int | float) or c > LOW_CONFIDENCE:
        fails.append(f"confidence {c!r} is not low (at most {LOW_CONFIDENCE})")
    evidence = ticket.get("evidence")
    if not isinstance(evidence, str) or not evidence.strip():
        fails.append("evidence is empty")
    elif evidence.strip() not in ex.line.text:
        fails.append(f"evidence {_excerpt(evidence)!r} is not a quote from the line")
    first_seen = ticket.get("first_seen")
    if ex.line.timestamp is None:
        if not _unknown(first_seen):
            fails.append(
                f"invented first_seen {_excerpt(str(first_seen), 40)!r}: the line has no timestamp"
            )
    elif _unknown(first_seen):
        warns.append(f"first_seen left unknown though the line says {ex.line.timestamp}")
    elif not same_time(first_seen, ex.line.timestamp):
        fails.append(
            f"first_seen {_excerpt(str(first_seen), 40)!r} is not the line's timestamp "
            f"{ex.line.timestamp}"
        )
    return fails, warns


def judge_degrades(exchanges: Sequence[Exchange]) -> CheckOutcome:
    """service.degrades_gracefully: fallback tickets, needs_human, quoted, nothing invented."""
    failing: list[dict[str, Any]] = []
    warning: list[dict[str, Any]] = []
    fine: list[dict[str, Any]] = []
    for ex in exchanges:
        fails, warns = degrade_problems(ex)
        if fails:
            failing.append(ex.evidence(f"{ex.who}: {'; '.join(fails + warns)}"))
        elif warns:
            warning.append(ex.evidence(f"{ex.who}: {'; '.join(warns)}"))
        else:
            fine.append(ex.evidence(f"{ex.who}: degrades gracefully"))
    if not exchanges:
        return skip(DEGRADES, "no request was sent")
    if failing:
        return CheckOutcome(
            DEGRADES,
            "fail",
            f"{len(failing)} of {len(exchanges)} answers with the model unavailable are "
            f"wrong; first: {_excerpt(failing[0]['message'], 300)}",
            failing + warning + fine,
        )
    if warning:
        return CheckOutcome(
            DEGRADES,
            "warn",
            f"{len(warning)} answers miss a timestamp the line gives; first: "
            f"{_excerpt(warning[0]['message'], 300)}",
            warning + fine,
        )
    tickets = sum(1 for ex in exchanges if ex.line.text.strip() and not _fair_rejection(ex))
    return CheckOutcome(
        DEGRADES,
        "pass",
        f"with the model unavailable, no 5xx in {len(exchanges)} answers and all {tickets} "
        "tickets are fallbacks marked needs_human, low confidence, evidence quoted, no "
        "invented timestamp",
        fine,
    )


def _kinds(entries: Iterable[LedgerEntry]) -> list[str]:
    return [classify_event(e.event) for e in entries]


def judge_caches(exchanges: Sequence[Exchange], *, ledger_tracked: bool) -> CheckOutcome:
    """service.caches: the repeat of each line comes from the cache, with no model attempt."""
    pairs: dict[str, list[Exchange]] = {}
    for ex in exchanges:
        pairs.setdefault(ex.line.label, []).append(ex)
    bad: list[dict[str, Any]] = []
    good: list[dict[str, Any]] = []
    warned: list[dict[str, Any]] = []
    ledger_seen = any(ex.ledger for ex in exchanges)
    for pair in pairs.values():
        first = next((e for e in pair if e.repeat == 1), None)
        second = next((e for e in pair if e.repeat == 2), None)
        if first is None or second is None:
            continue
        kinds = _kinds(second.ledger)
        attempts = kinds.count(MODEL_CALL)
        hit = CACHE_HIT in kinds
        ticket = second.ticket()
        flagged = ticket is not None and ticket.get("cached") is True
        first_ticket = first.ticket()
        first_ok = first_ticket is not None and 200 <= (first.status or 0) < 300
        if attempts:
            bad.append(
                second.evidence(
                    f"{second.who}: the repeat made {attempts} more model "
                    f"attempt{'s' if attempts != 1 else ''} (ledger)"
                )
            )
        elif not first_ok:
            continue  # nothing was cached to serve: no verdict for this line
        elif flagged or hit:
            how = " and ".join(
                x
                for x, on in (('"cached": true', flagged), ("a cache hit in the ledger", hit))
                if on
            )
            good.append(second.evidence(f"{second.who}: served from the cache ({how})"))
        else:
            why = (
                "a fresh fallback in the ledger"
                if FALLBACK in kinds
                else "no cached flag and no cache hit in the ledger"
            )
            bad.append(second.evidence(f"{second.who}: not served from the cache ({why})"))
        if first_ticket is not None and first_ticket.get("cached") is True:
            warned.append(first.evidence(f"{first.who}: claims cached on the first sight of it"))
    if not bad and not good:
        return skip(CACHES, "no line got a ticket, so caching could not be judged")
    note = (
        ""
        if ledger_seen
        else " (the ledger recorded nothing per request: judged by the cached flag only)"
        if ledger_tracked
        else " (no ledger named: judged by the cached flag only)"
    )
    if bad:
        return CheckOutcome(
            CACHES,
            "fail",
            f"{len(bad)} of {len(bad) + len(good)} repeated lines not served from the cache; "
            f"first: {_excerpt(bad[0]['message'], 300)}{note}",
            bad + warned + good,
        )
    if warned:
        return CheckOutcome(
            CACHES,
            "warn",
            f"repeats served from the cache, but {len(warned)} first answers claim to be "
            f"cached{note}",
            warned + good,
        )
    return CheckOutcome(
        CACHES,
        "pass",
        f"all {len(good)} repeated lines served from the cache with no model attempt{note}",
        good,
    )


_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "error": 3}


def judge_ledger(report: ProbeReport) -> CheckOutcome | None:
    """ledger.consistent on the lines written during the probe (None: no ledger is named)."""
    globs = report.config.ledger_globs
    if not globs:
        return None
    answered = sum(1 for ex in report.exchanges if ex.answered)
    paths = ", ".join(report.ledger_entries) or ", ".join(globs)
    head = {
        "message": f"written during the probe: {len(report.all_entries)} ledger lines appended "
        f"to {paths} while {answered} requests were answered",
        "path": paths,
    }
    notes = [{"message": f"written during the probe: {n}"} for n in report.ledger_notes]
    if not report.all_entries:
        return CheckOutcome(
            LEDGER,
            "warn",
            f"written during the probe: the service appended nothing to {paths} while it "
            f"answered {answered} requests",
            [head, *notes],
        )
    outcomes = [ledger_consistent(entries, path) for path, entries in report.ledger_entries.items()]
    extra: list[dict[str, Any]] = []
    for ex in report.exchanges:
        kinds = _kinds(ex.ledger)
        attempts = kinds.count(MODEL_CALL)
        if attempts > MAX_ATTEMPTS:
            extra.append(
                ex.evidence(
                    f"{ex.who}: {attempts} model attempts for one request; at most "
                    f"{MAX_ATTEMPTS} (one retry) before the fallback",
                    path=ex.ledger_path,
                )
            )
        ticket = ex.ticket()
        if FALLBACK in kinds and ticket is not None and ticket.get("needs_human") is not True:
            extra.append(
                ex.evidence(
                    f"{ex.who}: the ledger records a fallback but the answer has needs_human "
                    f"{ticket.get('needs_human')!r}",
                    path=ex.ledger_path,
                )
            )
    status = max((o.status for o in outcomes), key=_RANK.__getitem__)
    if extra:
        status = "fail"
    if status == "skip":
        status = "pass"
    summaries = "; ".join(o.summary for o in outcomes)
    if extra:
        summaries = f"{_excerpt(extra[0]['message'], 200)}; {summaries}"
    evidence = [head, *notes, *extra]
    for o in outcomes:
        evidence += o.evidence
    return CheckOutcome(LEDGER, status, f"written during the probe: {summaries}", evidence)


def judge_probe(report: ProbeReport) -> list[CheckOutcome]:
    """All the probe's verdicts."""
    starts = judge_starts(report)
    if not report.started:
        return [starts, *(skip(cid, DID_NOT_START) for cid in PROBE_CHECKS[1:])]
    sent = [
        ex for ex in report.exchanges if ex.error is None or not ex.error.startswith("not sent")
    ]
    outcomes = [
        starts,
        judge_schema(sent, report.config.schema),
        judge_degrades(sent),
        judge_caches(sent, ledger_tracked=bool(report.config.ledger_globs)),
    ]
    unsent = len(report.exchanges) - len(sent)
    if unsent or not report.complete:
        why = (
            f"{unsent} requests not sent: the probe's time budget ran out"
            if unsent
            else "the probe was cut short"
            + (f" ({report.run.killed_reason})" if report.run and report.run.killed_reason else "")
        )
        for o in outcomes[1:]:
            o.evidence.insert(0, {"message": why})
            if o.status == "pass":
                o.status, o.summary = "warn", f"{o.summary}; {why}"
    ledger = judge_ledger(report)
    if ledger is not None:
        outcomes.append(ledger)
    return outcomes


# ------------------------------------------------------------------ running it


class ProbeDriverError(RuntimeError):
    """The driver printed nothing usable; `output` is its (redacted) tail."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def probe_in_sandbox(tree: Path, config: ProbeConfig, *, slot: int) -> ProbeReport:
    """Start the service in a fresh copy of the tree and probe it.

    Raises sandbox.SandboxUnavailable when the sandbox cannot start, ProbeDriverError when
    the driver reported nothing at all.
    """
    requests = build_requests(config)
    limits = sandbox_limits()
    nonce = "CR-" + secrets.token_hex(16) + ":"
    output = limits.output_bytes
    budget = max(10.0, min(config.probe_seconds, limits.wall_seconds - config.start_timeout - 15))
    spec = {
        "nonce": nonce,
        "port": config.port,
        "command": config.command,
        "requests": requests,
        "ledgers": list(config.ledger_globs),
        "start_timeout": config.start_timeout,
        "timeout": config.request_timeout,
        "probe_seconds": budget,
        "settle": config.settle_seconds,
        "body_max": min(256 * 1024, output // 4),
        "body_max_total": output // 2,
        "ledger_max_bytes": output // 5,
        "log_tail": 4000,
    }
    uid = sandbox.slot_uid(slot, settings.SANDBOX_UID_BASE)
    workspace = sandbox.prepare_workspace(tree, _work_parent(), uid)
    try:
        # Written before any candidate code runs; the driver deletes it once read.
        (workspace / SPEC_NAME).write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        result = sandbox.run(
            ["python3", "-c", DRIVER, SPEC_NAME],
            workspace=workspace,
            limits=limits,
            slot=slot,
            allow_unsandboxed=settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
            **_sandbox_kwargs(),
        )
    finally:
        sandbox.remove_workspace(workspace)
    report = parse_driver_output(result.stdout, nonce, config, requests)
    if report is None:
        tail = (result.stderr or result.stdout)[-1500:].decode("utf-8", "replace")
        why = f", {result.killed_reason}" if result.killed_reason else ""
        raise ProbeDriverError(
            f"the probe driver gave no answer (exit {result.exit_code}{why})", redact_text(tail)
        )
    report.run = result
    if result.stdout_truncated:
        report.complete = False
    return report


def _errors(reason: str, evidence: list[dict[str, Any]] | None = None) -> list[CheckOutcome]:
    return [CheckOutcome(cid, "error", reason, list(evidence or [])) for cid in PROBE_CHECKS]


@handler(Job.Kind.PROBE)
def probe_run(job: Job, progress: Progress) -> Outcome:
    """Start the candidate's service in the sandbox, probe it, write the service checks."""
    submission: Submission = job.submission
    assignment = submission.assignment
    if not assignment.service_start_command.strip():
        reason = "the assignment names no service start command"
        checks_store(submission, job, [skip(cid, reason) for cid in PROBE_CHECKS])
        return Outcome(Job.State.PASSED, reason)
    config = ProbeConfig.from_assignment(assignment)
    problems = sandbox_problems()
    if problems and not settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED:
        reason = "the service probe needs the sandbox: " + "; ".join(problems)
        checks_store(submission, job, _errors(reason))
        raise JobError(reason)
    progress.step("start the service", 10)
    tree = submission_tree(submission)
    try:
        with _slot() as slot:
            report = probe_in_sandbox(tree, config, slot=slot)
    except sandbox.SandboxUnavailable as exc:
        reason = f"the sandbox cannot run here: {exc.cause}"
        checks_store(submission, job, _errors(reason))
        raise JobError(reason) from None
    except ProbeDriverError as exc:
        checks_store(
            submission, job, _errors(str(exc), [{"message": "driver output", "output": exc.output}])
        )
        raise JobError(str(exc)) from None
    progress.step("judge", 90)
    outcomes = judge_probe(report)
    checks_store(submission, job, outcomes)
    summary = "; ".join(f"{o.id}: {o.status}" for o in outcomes)
    progress.log(f"probe of `{config.command}` on port {config.port}: {summary}")
    progress.step("done", 100)
    return Outcome(Job.State.PASSED, summary)
