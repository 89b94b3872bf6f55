"""What the service probe sends (the built-in log lines, the requests) and what came back."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from cassettes_app.formats import parse_file
from cassettes_app.parsed import LedgerEntry
from cassettes_app.text import clipped, one_line
from submissions import sandbox
from submissions.models import Assignment
from submissions.redact import redact_text

DEFAULT_PORT = 8000


DEFAULT_REQUEST = {"method": "POST", "path": "/extract", "field": "line"}


EVIDENCE_CHARS = 2048


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
    out: list[dict[str, Any]] = []
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
        return f"the {self.line.label} log line {excerpt(self.line.text)!r} ({nth})"

    def evidence(self, message: str, **extra: Any) -> dict[str, Any]:
        item: dict[str, Any] = {
            "message": redact_text(message),
            "probe": self.line.label,
            "repeat": self.repeat,
            "request": cap_text(self.request),
        }
        if self.answered:
            item["status"] = self.status
            item["response"] = cap_text(self.body) + (" [truncated]" if self.truncated else "")
        else:
            item["error"] = redact_text(self.error or "no answer")
        if self.ledger:
            item["ledger"] = cap_text(
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


def excerpt(text: str, limit: int = 60) -> str:
    return clipped(one_line(text), limit)


def cap_text(text: str, limit: int = EVIDENCE_CHARS) -> str:
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
