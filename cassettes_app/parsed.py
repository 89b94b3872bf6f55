"""The parsed vocabulary: what the recording parsers hand back.

The ground floor of cassettes_app: bodies, parsers, checks, analysis and the other apps
import these types from here; this module imports nothing of the app but the providers'
ToolCall.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cassettes_app.providers.common import ToolCall

Severity = Literal["info", "warn", "error"]


@dataclass(frozen=True, slots=True)
class ParsedFinding:
    """One problem found while reading a file."""

    kind: str
    severity: Severity
    path: str
    line: int | None
    message: str


@dataclass(frozen=True, slots=True)
class Body:
    """A decoded request or response body."""

    data: bytes = b""
    text: str | None = None
    json: Any | None = None
    content_type: str | None = None
    encoding_note: str | None = None
    is_binary: bool = False
    truncated: bool = False
    # Finding-worthy problems met while decoding (bad JSON, capped gzip, ...).
    problems: tuple[str, ...] = ()


EMPTY_BODY = Body()


@dataclass(slots=True)
class ParsedInteraction:
    """One request/response pair of a recording."""

    index: int
    method: str | None
    url: str | None
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    request_body: Body = EMPTY_BODY
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: Body = EMPTY_BODY
    recorded_at: str | None = None
    duration_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ParsedRecording:
    """One cassette, fixture, HAR file or agent-log request set."""

    path: str
    format: str
    key: str | None = None
    model: str | None = None
    recorded_at: str | None = None
    interactions: list[ParsedInteraction] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TraceHop:
    """One HTTP hop of a `replay.jsonl` trace."""

    line: int
    url: str | None
    method: str | None
    status: int | None
    trace_id: str | None
    idempotency_key: str | None
    request_headers: list[tuple[str, str]]
    req: Any
    resp: Any


@dataclass(slots=True)
class LedgerEntry:
    """One ledger line: a model call, cache hit, fallback, ..."""

    line: int
    event: str | None
    data: dict[str, Any]


@dataclass(slots=True)
class ParsedMessage:
    """One agent-log chat message (OpenAI, Anthropic or Gemini style)."""

    role: str | None
    content: Any
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    raw: Any = None
    line: int | None = None


@dataclass(slots=True)
class ParseResult:
    """Everything one parser got out of one file."""

    format: str
    recordings: list[ParsedRecording] = field(default_factory=list)
    hops: list[TraceHop] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)
    messages: list[ParsedMessage] = field(default_factory=list)
    findings: list[ParsedFinding] = field(default_factory=list)
