"""Log line -> ticket. The model first; a rule-based fallback marked needs_human when it fails."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

MODEL = "gpt-4o-mini-2024-07-18"
SEVERITIES = ("low", "medium", "high", "critical")
FIELDS = ("service", "severity", "first_seen", "evidence", "confidence", "needs_human")
MAX_ATTEMPTS = 2  # the first call and at most one retry
FALLBACK_CONFIDENCE = 0.2
MAX_EVIDENCE = 200

SYSTEM_PROMPT = (
    "Turn one log line into a ticket. Reply with one JSON object only: service (string), "
    "severity (low|medium|high|critical), first_seen (the timestamp written in the line, or "
    "null if it has none), evidence (an exact quote copied from the line), confidence (0..1), "
    "needs_human (boolean)."
)

ISO_TS = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
SYSLOG_TS = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{2}:\d{2}:\d{2}\b")
LEVEL_SEVERITY = {
    "FATAL": "critical", "CRITICAL": "critical", "CRIT": "critical", "PANIC": "critical", "EMERG": "critical",
    "ERROR": "high", "ERR": "high", "WARNING": "medium", "WARN": "medium",
    "INFO": "low", "NOTICE": "low", "DEBUG": "low",
}
# The log level is the first level word written in capitals ("WARN ... failed" is a warning).
LEVEL = re.compile(r"\b(" + "|".join(LEVEL_SEVERITY) + r")\b")
# Without a level word, fall back to what the words say.
KEYWORDS = [
    ("critical", re.compile(r"\b(?:fatal|panic|outage|down)\b", re.I)),
    ("high", re.compile(r"\b(?:error|failed|failure|exception|timed out)\b", re.I)),
    ("medium", re.compile(r"\b(?:warn|warning|slow|degraded)\b", re.I)),
]
SERVICE = re.compile(
    r"^\W*([a-z][a-z0-9_.-]*?)(?:\[\d+\])?(?::|\s+(?:FATAL|CRITICAL|CRIT|PANIC|EMERG|ERROR|ERR|WARN|WARNING|INFO|DEBUG)\b)",
    re.I,
)


def line_sha(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def cassette_key(payload: dict[str, Any]) -> str:
    kept = {k: v for k, v in payload.items() if k not in ("user", "request_id", "id", "created")}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def find_timestamp(line: str) -> tuple[str | None, int]:
    """(first_seen, index where the timestamp ends). Never invents a date, a year or a zone."""
    iso = ISO_TS.search(line)
    if iso:
        return iso.group(0).replace(" ", "T", 1), iso.end()
    syslog = SYSLOG_TS.search(line)
    if syslog:  # no year in the line: keep the text as written
        return syslog.group(0), syslog.end()
    return None, 0


def fallback_ticket(line: str) -> dict[str, Any]:
    first_seen, end = find_timestamp(line)
    rest = line[end:].lstrip(" ]):\t") if first_seen else line.strip()
    evidence = (rest or line.strip())[:MAX_EVIDENCE]
    match = SERVICE.match(rest)
    level = LEVEL.search(line)
    if level:
        severity = LEVEL_SEVERITY[level.group(1)]
    else:
        severity = next((name for name, pattern in KEYWORDS if pattern.search(line)), "low")
    return {
        "service": match.group(1) if match else "unknown",
        "severity": severity,
        "first_seen": first_seen,
        "evidence": evidence,
        "confidence": FALLBACK_CONFIDENCE,
        "needs_human": True,
    }


def ticket_problem(ticket: Any, line: str) -> str | None:
    if not isinstance(ticket, dict):
        return "not a JSON object"
    missing = [f for f in FIELDS if f not in ticket]
    if missing:
        return "missing " + ", ".join(missing)
    if not isinstance(ticket["service"], str) or not ticket["service"].strip():
        return "service must be a non-empty string"
    if ticket["severity"] not in SEVERITIES:
        return f"severity {ticket['severity']!r} not in {SEVERITIES}"
    if ticket["first_seen"] is not None and not isinstance(ticket["first_seen"], str):
        return "first_seen must be a string or null"
    if not isinstance(ticket["evidence"], str) or not ticket["evidence"] or ticket["evidence"] not in line:
        return "evidence is not a quote from the line"
    confidence = ticket["confidence"]
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        return "confidence must be a number in 0..1"
    if not isinstance(ticket["needs_human"], bool):
        return "needs_human must be a boolean"
    return None


def build_payload(line: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": line}],
    }


class ModelUnavailable(Exception):
    pass


class ModelJunk(Exception):
    pass


class ModelClient:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 5.0) -> None:
        self.url, self.api_key, self.timeout = url, api_key, timeout

    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise ModelUnavailable(f"HTTP {err.code}") from err
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            raise ModelUnavailable(str(getattr(err, "reason", err))) from err
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            raise ModelJunk("response body is not JSON") from err


def ticket_from_response(response: dict[str, Any], line: str) -> dict[str, Any]:
    try:
        content = response["choices"][0]["message"]["content"]
        ticket = json.loads(content)
    except (KeyError, IndexError, TypeError, json.JSONDecodeError) as err:
        raise ModelJunk("no JSON ticket in the reply") from err
    problem = ticket_problem(ticket, line)
    if problem:
        raise ModelJunk(problem)
    ticket = {f: ticket[f] for f in FIELDS}
    # The line is the source of truth for when it happened, not the model.
    ticket["first_seen"] = find_timestamp(line)[0]
    return ticket


class Ledger:
    """ledger.jsonl: one JSON object per model call, cache hit or fallback."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.lock = threading.Lock()

    def write(self, event: str, sha: str, attempt: int, reason: str, needs_human: bool | None, **extra: Any) -> None:
        if not self.path:
            return
        entry = {"event": event, "line_sha": sha, "attempt": attempt, "reason": reason, "needs_human": needs_human, **extra}
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")


class TicketService:
    def __init__(
        self,
        model: ModelClient | None,
        ledger: Ledger,
        fallback_ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model, self.ledger, self.fallback_ttl, self.clock = model, ledger, fallback_ttl, clock
        self.cache: dict[str, tuple[dict[str, Any], float | None]] = {}
        self.lock = threading.Lock()

    def extract(self, line: str) -> dict[str, Any]:
        sha = line_sha(line)
        with self.lock:
            hit = self.cache.get(sha)
        if hit and (hit[1] is None or hit[1] > self.clock()):
            self.ledger.write("cache_hit", sha, 0, "cache", hit[0]["needs_human"])
            return {**hit[0], "cached": True}

        reason, attempts = "model not configured (MODEL_URL unset)", 0
        if self.model is not None:
            payload = build_payload(line)
            key = cassette_key(payload)
            for attempt in range(1, MAX_ATTEMPTS + 1):
                attempts = attempt
                try:
                    ticket = ticket_from_response(self.model.complete(payload), line)
                except ModelUnavailable as err:
                    reason = f"model unavailable: {err}"
                except ModelJunk as err:
                    reason = f"model junk: {err}"
                else:
                    self.ledger.write("model_call", sha, attempt, "ok", ticket["needs_human"], key=key, model=MODEL)
                    self._remember(sha, ticket, None)
                    return {**ticket, "cached": False}
                self.ledger.write("model_call", sha, attempt, reason, None, key=key, model=MODEL)

        ticket = fallback_ticket(line)
        self.ledger.write("fallback", sha, attempts, reason, True)
        # Fallbacks are cached briefly: a retry storm must not hammer a sick model,
        # but the line gets a real answer once the model is back.
        self._remember(sha, ticket, self.clock() + self.fallback_ttl)
        return {**ticket, "cached": False}

    def _remember(self, sha: str, ticket: dict[str, Any], expires: float | None) -> None:
        with self.lock:
            self.cache[sha] = (ticket, expires)
