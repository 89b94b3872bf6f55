"""Static trace checks: what a `replay.jsonl` (one object per HTTP hop) shows on its own.

These read parsed `TraceHop`s only; nothing here talks to a stub (that is `trace.live_match`
and `trace.idempotency_enforced`). Every function is pure and never raises on odd hops:
None fields, non-JSON bodies and invalid tool arguments are findings or ignored, not errors.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import (
    IDEMPOTENCY_KEYS_LOGGED,
    NO_INVENTED_IDS,
    STUB_HOPS_PRESENT,
    TOOL_CALLS_REACH_STUB,
)
from cassettes_app.config import DEFAULT_ID_PATTERN
from cassettes_app.hops import MODEL, STUB, hop_kind, is_model_hop
from cassettes_app.jsonvalues import json_key, maybe_json
from cassettes_app.parsed import TraceHop
from cassettes_app.providers import normalise
from cassettes_app.text import clipped

__all__ = [
    "DEFAULT_ID_PATTERN",
    "IDEMPOTENCY_KEYS_LOGGED",
    "NO_INVENTED_IDS",
    "STUB_HOPS_PRESENT",
    "TOOL_CALLS_REACH_STUB",
    "is_model_hop",
    "trace_idempotency_keys_logged",
    "trace_no_invented_ids",
    "trace_stub_hops_present",
    "trace_tool_calls_reach_stub",
]

STUB_HOPS_PRESENT = STUB_HOPS_PRESENT
TOOL_CALLS_REACH_STUB = TOOL_CALLS_REACH_STUB
NO_INVENTED_IDS = NO_INVENTED_IDS
IDEMPOTENCY_KEYS_LOGGED = IDEMPOTENCY_KEYS_LOGGED


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})

# Header spellings of the idempotency key besides the canonical one the parser reads.
_IDEMPOTENCY_HEADERS = frozenset({"idempotency-key", "idempotency_key", "x-idempotency-key"})

# Bounds that keep evidence-building linear on hostile traces.
_NEAR_MISS_WINDOW = 200
_NEAR_MISS_CALLS = 50
_NEAR_MISS_PER_CALL = 3
_LOCATIONS_PER_ID = 5
_SHOW = 200


# --------------------------------------------------------------------------- helpers


def _short(value: Any, limit: int = _SHOW) -> str:
    """Compact JSON (original key order) cut to `limit` characters."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (ValueError, TypeError, RecursionError):
            text = repr(value)
    return clipped(text, limit)


# An encoder built once: `json.dumps` with options builds a new encoder on every call, which
# is most of the cost on a 100,000-hop trace.
_PLAIN = json.JSONEncoder(ensure_ascii=False, default=str)


def _real_status(status: Any) -> TypeGuard[int]:
    return isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599


def _where(hop: TraceHop) -> str:
    """`POST http://host/path` for messages; the query string is left out."""
    method = hop.method or "?"
    url = hop.url if isinstance(hop.url, str) and hop.url else "(no url)"
    return f"{method} {url.split('?', 1)[0][:_SHOW]}"


def _endpoint(hop: TraceHop) -> str:
    """Method plus path (no scheme, host or query), the unit stub hops are summarised by."""
    path = "(no url)"
    if isinstance(hop.url, str) and hop.url:
        rest = hop.url.partition("://")[2] if "://" in hop.url else hop.url
        slash = rest.find("/")
        path = rest[slash:].split("?", 1)[0].split("#", 1)[0] if slash >= 0 else "/"
        # `/orders/ord_1f3a` and `/orders/ord_9b2c` are one endpoint, `/orders/{id}`.
        path = "/".join(
            "{id}" if _ID_SEGMENT.search(segment) and not _VERSION.match(segment) else segment
            for segment in path[:300].split("/")
        )
    return f"{hop.method or '?'} {path[:100]}"


_ID_SEGMENT = re.compile(r"\d")
_VERSION = re.compile(r"^v\d+(?:beta\d*|alpha\d*)?$")


@dataclass(slots=True)
class _Call:
    """One tool call a model hop's response asked for."""

    hop_index: int
    line: int
    call_id: str | None
    name: str
    arguments: Any
    raw: str | None
    valid: bool

    def label(self) -> str:
        shown = self.raw if self.raw is not None else _short(self.arguments)
        return f"{self.name or '(unnamed tool)'}({_short(shown)})"


def _fast_openai_output(resp: Any) -> tuple[str, list[tuple[Any, Any, Any]]] | None:
    """Text and (id, name, arguments) of a plain OpenAI chat completion, or None.

    A shortcut for the dominant shape so a 100,000-hop trace stays fast; anything less
    regular goes through `providers.normalise`, which knows every provider.
    """
    if not isinstance(resp, dict) or resp.get("object") != "chat.completion":
        return None
    choices = resp.get("choices")
    if not isinstance(choices, list):
        return None
    texts: list[str] = []
    calls: list[tuple[Any, Any, Any]] = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or "function_call" in message:
            return None
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            return None
        if content:
            texts.append(content)
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            return None
        for call in tool_calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                return None
            calls.append((call.get("id"), function.get("name"), function.get("arguments")))
    return "\n".join(texts), calls


def _parse_arguments(arguments: Any) -> tuple[Any, str | None, bool]:
    """(parsed, raw text, valid) the way `providers` reads tool-call arguments."""
    if arguments is None:
        return {}, None, True
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}, arguments, True
        try:
            return json.loads(arguments), arguments, True
        except (ValueError, RecursionError):
            return arguments, arguments, False
    return arguments, None, True


def _model_output(index: int, hop: TraceHop) -> tuple[str, list[_Call]]:
    """Assistant text and tool calls of one model hop's response."""
    fast = _fast_openai_output(maybe_json(hop.resp))
    if fast is not None:
        text, raw_calls = fast
        calls = []
        for call_id, name, arguments in raw_calls:
            parsed, raw, valid = _parse_arguments(arguments)
            calls.append(
                _Call(
                    index,
                    hop.line,
                    call_id if isinstance(call_id, str) else None,
                    name if isinstance(name, str) else "",
                    parsed,
                    raw,
                    valid,
                )
            )
        return text, calls
    exchange = normalise(hop.req, hop.resp, hop.url)
    message = exchange.response
    if message is None:
        return "", []
    calls = [
        _Call(index, hop.line, c.id, c.name or "", c.arguments, c.arguments_raw, c.arguments_valid)
        for c in message.tool_calls
    ]
    return message.text or "", calls


# JSON escapes (\n, \", \u00e9, ...) become spaces so "\nord_1" still reads as a boundary.
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.DOTALL)


def _flat_text(value: Any) -> str:
    """One searchable text for a body: JSON serialised (keys included), text kept as is.

    Serialising once and scanning once is what keeps a 100,000-hop trace fast; walking
    every string of every repeated conversation is several times slower.
    """
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = _PLAIN.encode(value)
        except (ValueError, TypeError, RecursionError):
            return ""
    return _ESCAPE.sub(" ", text) if "\\" in text else text


def _request_texts(req: Any) -> Iterator[str]:
    """Searchable texts of a model request: message contents, else the whole body.

    Chat requests repeat the conversation, the system prompt and the tool schemas on every
    turn; reading message contents as strings (no re-serialising) keeps that linear and
    cheap. Assistant tool calls are skipped: they were read as model output at their hop.
    """
    body = maybe_json(req)
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        yield _flat_text(req if body is None else body)
        return
    for message in messages:
        if not isinstance(message, dict):
            yield _flat_text(message)
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif content is not None:
            yield _flat_text(content)


# --------------------------------------------------------------------------- checks


def trace_stub_hops_present(hops: Sequence[TraceHop], path: str) -> CheckOutcome:
    """Establish that the trace records hops to the stub, not only model chat."""
    if not hops:
        return skip(STUB_HOPS_PRESENT, "no trace hops to inspect")
    model = 0
    stub_lines: dict[str, list[int]] = {}
    empty = 0
    for hop in hops:
        kind = hop_kind(hop)
        if kind == MODEL:
            model += 1
        elif kind == STUB:
            stub_lines.setdefault(_endpoint(hop), []).append(hop.line)
        else:
            empty += 1
    stub = sum(len(lines) for lines in stub_lines.values())
    evidence: list[dict[str, Any]] = [
        {
            "message": f"{endpoint} ×{len(lines)} (first at line {lines[0]})",
            "path": path,
            "line": lines[0],
        }
        for endpoint, lines in list(stub_lines.items())[:20]
    ]
    if len(stub_lines) > 20:
        evidence.append({"message": f"… and {len(stub_lines) - 20} more stub endpoints"})
    if empty:
        evidence.append({"message": f"{empty} hops record no url, method or body", "path": path})
    if not stub:
        return CheckOutcome(
            STUB_HOPS_PRESENT,
            "fail",
            f"no stub hops: all {model} recorded hops are model chat",
            evidence
            or [{"message": "every hop goes to a model API (by URL or chat body)", "path": path}],
        )
    return CheckOutcome(
        STUB_HOPS_PRESENT,
        "pass",
        f"{counted(stub, 'stub hop')} on {counted(len(stub_lines), 'endpoint')} beside "
        f"{counted(model, 'model hop')}",
        evidence,
    )


def _result_class(content: Any, is_error: bool = False) -> str | None:
    """ "ok" or "error" as a tool result tells the model, None when it does not say."""
    if is_error:
        return "error"
    body = maybe_json(content) if isinstance(content, str) else content
    if not isinstance(body, dict):
        return None
    status = body.get("status")
    if _real_status(status):
        return "ok" if status < 400 else "error"
    if isinstance(body.get("ok"), bool):
        return "ok" if body["ok"] else "error"
    if body.get("error"):
        return "error"
    return None


def _tool_results(hop: TraceHop) -> Iterator[tuple[str, Any, bool]]:
    """(tool_call_id, content, is_error) of the tool results a model request feeds back."""
    req = maybe_json(hop.req)
    messages = req.get("messages") if isinstance(req, dict) else None
    if isinstance(messages, list):
        found: list[tuple[str, Any, bool]] = []
        for message in messages:
            if not isinstance(message, dict):
                continue
            if isinstance(message.get("content"), list):
                break  # content blocks (Anthropic tool_result, parts): let providers read it
            if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
                # Plain OpenAI chat: role "tool" messages carry tool_call_id and content.
                found.append((message["tool_call_id"], message.get("content"), False))
        else:
            yield from found
            return
    exchange = normalise(hop.req, None, hop.url)
    for message in exchange.request_messages:
        for result in message.tool_results:
            if result.tool_call_id:
                yield result.tool_call_id, result.content, result.is_error


def _near_misses(
    call: _Call, hops: Sequence[TraceHop], bodies: dict[int, Any], used: set[int]
) -> list[str]:
    """Later stub requests that almost carry the call's arguments (a key or type differs)."""
    if not isinstance(call.arguments, dict) or not call.arguments:
        return []
    wanted = call.arguments
    found: list[str] = []
    end = min(len(hops), call.hop_index + 1 + _NEAR_MISS_WINDOW)
    for index in range(call.hop_index + 1, end):
        body = bodies.get(index)
        if index in used or not isinstance(body, dict) or not body:
            continue
        keys = set(wanted) | set(body)
        if not set(wanted) & set(body):
            continue
        differing = [k for k in keys if json_key(wanted.get(k)) != json_key(body.get(k))]
        # Near means at most half the fields differ; a different order is not a near miss.
        if not differing or len(differing) > max(1, len(keys) // 2):
            continue
        parts = []
        for key in sorted(differing, key=str)[:5]:
            sent = _short(_PLAIN.encode(body[key]), 60) if key in body else "(missing)"
            asked = _short(_PLAIN.encode(wanted[key]), 60) if key in wanted else "(not asked)"
            parts.append(f"{key}: stub got {sent}, model asked {asked}")
        found.append(f"line {hops[index].line} sent {_short(body, 120)} ({'; '.join(parts)})")
        if len(found) >= _NEAR_MISS_PER_CALL:
            break
    return found


@dataclass(slots=True)
class _StubBodies:
    """Model hop indices and stub request bodies of a trace, the stub hops keyed by body."""

    model_indices: list[int]
    bodies: dict[int, Any]  # hop index → parsed stub request body
    by_body: dict[str, list[int]]  # canonical body → stub hop indices, in trace order


def _stub_bodies(hops: Sequence[TraceHop]) -> _StubBodies:
    kinds = [hop_kind(hop) for hop in hops]
    stub_by_body: dict[str, list[int]] = {}
    bodies: dict[int, Any] = {}
    model_indices: list[int] = []
    for index, hop in enumerate(hops):
        if kinds[index] == MODEL:
            model_indices.append(index)
        elif kinds[index] == STUB:
            body = maybe_json(hop.req)
            if body is None:
                continue
            bodies[index] = body
            key = json_key(body)
            if key is not None:
                stub_by_body.setdefault(key, []).append(index)
    return _StubBodies(model_indices, bodies, stub_by_body)


@dataclass(slots=True)
class _Matching:
    """Which tool calls reached a stub hop with equal arguments, and which did not.

    Matched calls are kept as parallel lists of plain ints and strings, not objects: on a
    100,000-hop trace the garbage collector's passes over kept objects cost more than the
    matching.
    """

    total: int
    used: set[int]
    call_ids: list[str | None]
    stubs: list[int]
    hops: list[int]
    positions: list[int]  # of the call within its model hop
    reached: list[dict[str, Any]]
    unmatched: list[tuple[_Call, str]]


def _match_calls(hops: Sequence[TraceHop], stubs: _StubBodies, path: str) -> _Matching:
    """Greedy, in trace order: each call takes the first unused later stub hop with its body.

    Calls come in increasing hop order, so a per-body cursor never needs to move back.
    """
    stub_by_body = stubs.by_body
    cursors: dict[str, int] = {}
    used: set[int] = set()
    total = 0
    matched_call_ids: list[str | None] = []
    matched_stubs: list[int] = []
    matched_hops: list[int] = []
    matched_positions: list[int] = []
    reached: list[dict[str, Any]] = []
    unmatched: list[tuple[_Call, str]] = []
    for index in stubs.model_indices:
        for position, call in enumerate(_model_output(index, hops[index])[1]):
            total += 1
            if not call.valid:
                unmatched.append((call, "its arguments are not valid JSON"))
                continue
            key = json_key(call.arguments)
            indices = stub_by_body.get(key) if key is not None else None
            if key is None or not indices:
                unmatched.append((call, "no later stub request carries these arguments"))
                continue
            cursor = cursors.get(key, 0)
            while cursor < len(indices) and indices[cursor] <= index:
                cursor += 1
            cursors[key] = min(cursor + 1, len(indices))
            if cursor >= len(indices):
                unmatched.append((call, "no later stub request carries these arguments"))
                continue
            stub = hops[indices[cursor]]
            used.add(indices[cursor])
            if not _real_status(stub.status):
                reason = f"the stub request at line {stub.line} has no real status"
                unmatched.append((call, f"{reason} ({stub.status!r})"))
                continue
            matched_call_ids.append(call.call_id)
            matched_stubs.append(indices[cursor])
            matched_hops.append(index)
            matched_positions.append(position)
            if len(reached) < 50:
                reached.append(
                    {
                        "message": f"{call.label()} (line {call.line}) → stub line "
                        f"{stub.line}, status {stub.status}",
                        "path": path,
                        "line": stub.line,
                    }
                )
    return _Matching(
        total,
        used,
        matched_call_ids,
        matched_stubs,
        matched_hops,
        matched_positions,
        reached,
        unmatched,
    )


def _unmatched_evidence(
    hops: Sequence[TraceHop], stubs: _StubBodies, matching: _Matching, path: str
) -> list[dict[str, Any]]:
    """One item per call that never reached the stub, near misses named for the first ones."""
    evidence: list[dict[str, Any]] = []
    for count, (call, reason) in enumerate(matching.unmatched):
        message = f"{call.label()} asked for at line {call.line} never reached the stub: {reason}"
        if count < _NEAR_MISS_CALLS and call.valid:
            misses = _near_misses(call, hops, stubs.bodies, matching.used)
            if misses:
                message += "; near misses: " + " | ".join(misses)
        evidence.append({"message": message, "path": path, "line": call.line})
    return evidence


def _told_otherwise(
    hops: Sequence[TraceHop], model_indices: list[int], matching: _Matching
) -> list[tuple[_Call, int, str | None, int]]:
    """(call, stub index, outcome told, model hop index) where the model was told otherwise.

    What the model was told about each matched call: the tool result with its id in the
    first model request after the stub hop (harnesses feed results straight back; a result
    fed later is not looked for, which keeps this pass linear).
    """
    matched_call_ids, matched_stubs = matching.call_ids, matching.stubs
    by_next: dict[int, list[int]] = {}
    for number, call_id in enumerate(matched_call_ids):
        if call_id:
            position = bisect.bisect_right(model_indices, matched_stubs[number])
            if position < len(model_indices):
                by_next.setdefault(model_indices[position], []).append(number)
    told: list[tuple[_Call, int, str | None, int]] = []
    for index, waiting in by_next.items():
        results: dict[str, tuple[Any, bool]] = {}
        for call_id, content, is_error in _tool_results(hops[index]):
            results.setdefault(call_id, (content, is_error))
        for number in waiting:
            found = results.get(matched_call_ids[number] or "")
            if found is None:
                continue
            outcome = _result_class(*found)
            status = hops[matched_stubs[number]].status
            actual = "ok" if isinstance(status, int) and status < 400 else "error"
            if outcome is not None and outcome != actual:
                # Only a disagreement needs the call itself again, for its label.
                hop_index = matching.hops[number]
                call = _model_output(hop_index, hops[hop_index])[1][matching.positions[number]]
                told.append((call, matched_stubs[number], outcome, index))
    return told


def _told_evidence(
    hops: Sequence[TraceHop], told: list[tuple[_Call, int, str | None, int]], path: str
) -> list[dict[str, Any]]:
    evidence: list[dict[str, Any]] = []
    for call, stub_index, outcome, told_index in told:
        stub = hops[stub_index]
        evidence.append(
            {
                "message": (
                    f"{call.label()} (line {call.line}) reached the stub at line "
                    f"{stub.line} with status {stub.status}, but the tool result the "
                    f"model saw at line {hops[told_index].line} reports {outcome}"
                ),
                "path": path,
                "line": hops[told_index].line,
            }
        )
    return evidence


def trace_tool_calls_reach_stub(hops: Sequence[TraceHop], path: str) -> CheckOutcome:
    """Establish that every model tool call is followed by a stub request with equal arguments.

    Equality is exact JSON equality of the parsed arguments and the stub request body (so
    "3" and 3 differ; such near misses are named in the evidence), and the matched stub hop
    must carry a real HTTP status. Each stub hop answers at most one call. A warning is
    raised when the tool result fed back to the model tells a different outcome (ok vs
    error) than the status the stub returned.
    """
    if not hops:
        return skip(TOOL_CALLS_REACH_STUB, "no trace hops to inspect")
    stubs = _stub_bodies(hops)
    matching = _match_calls(hops, stubs, path)
    if not matching.total:
        return skip(TOOL_CALLS_REACH_STUB, "the model asked for no tool calls in this trace")
    evidence = _unmatched_evidence(hops, stubs, matching, path)
    told = _told_otherwise(hops, stubs.model_indices, matching)
    evidence += _told_evidence(hops, told, path)
    return _reach_outcome(matching, len(told), evidence)


def _reach_outcome(matching: _Matching, warns: int, evidence: list[dict[str, Any]]) -> CheckOutcome:
    """fail when a call never reached the stub, warn when a result told otherwise, else pass."""
    total, fails = matching.total, len(matching.unmatched)
    if fails:
        return CheckOutcome(
            TOOL_CALLS_REACH_STUB,
            "fail",
            f"{fails} of {counted(total, 'model tool call')} never reached the stub "
            "with the same arguments",
            evidence,
        )
    if warns:
        return CheckOutcome(
            TOOL_CALLS_REACH_STUB,
            "warn",
            f"all {total} tool calls reached the stub, but {warns} tool results tell the "
            "model a different outcome than the stub's status",
            evidence + matching.reached,
        )
    return CheckOutcome(
        TOOL_CALLS_REACH_STUB,
        "pass",
        f"all {total} model tool calls reached the stub with equal arguments and a real status",
        matching.reached,
    )


def _literal_prefix(pattern: str) -> str:
    """Characters every match of `pattern` starts with ("ord_" for `ord_[0-9a-f]+`), or ""."""
    if "|" in pattern:
        return ""  # alternatives: no common prefix worth proving
    match = re.match(r"[A-Za-z0-9_\-]+", pattern)
    if not match:
        return ""
    prefix = match.group(0)
    following = pattern[match.end() : match.end() + 1]
    # A quantifier makes the last literal optional or repeatable: leave it out.
    return prefix[:-1] if following in ("?", "*", "{", "+") else prefix


@dataclass(slots=True)
class _Use:
    """Where an id was used without having been issued yet."""

    lines: list[tuple[int | None, str]]
    count: int = 0


@dataclass(slots=True)
class _IdScan:
    """Ids as the trace issues and mentions them, in trace order."""

    pattern: re.Pattern[str]
    prefix: str  # every match starts with it: texts without it hold no id
    issued: dict[str, int] = field(default_factory=dict)  # id → line of the issuing response
    early: dict[str, _Use] = field(default_factory=dict)  # ids mentioned before issued
    mentions: int = 0

    def ids(self, text: str) -> Iterator[str]:
        prefix = self.prefix
        if prefix and prefix not in text:
            return  # most texts hold no id at all: a substring test is far cheaper
        for match in self.pattern.finditer(text):
            start = match.start()
            if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                continue
            if match.end() > start:
                yield match.group(0)

    def note(self, text: str, line: int | None, where: str, hop: TraceHop | None = None) -> None:
        """Count the ids `text` mentions; remember where the not yet issued ones stand."""
        issued, early = self.issued, self.early
        for found in self.ids(text):
            self.mentions += 1
            if found in issued:
                continue
            use = early.setdefault(found, _Use([]))
            use.count += 1
            if len(use.lines) < _LOCATIONS_PER_ID:
                # Built only for findings: formatting every hop's label is measurable.
                use.lines.append((line, f"{where} ({_where(hop)})" if hop else where))

    def model_hop(self, index: int, hop: TraceHop) -> None:
        """A model hop mentions ids in its request, its assistant text and its tool calls."""
        for text in _request_texts(hop.req):
            self.note(text, hop.line, "model request")
        fast = _fast_openai_output(maybe_json(hop.resp))
        if fast is not None:
            # Arguments as text are all this check needs; parsing them would double
            # its cost on a big trace.
            text = fast[0]
            arguments = [(name, args) for _, name, args in fast[1]]
        else:
            text, calls = _model_output(index, hop)
            arguments = [(c.name, c.raw if c.raw is not None else c.arguments) for c in calls]
        self.note(text, hop.line, "model output (assistant text)")
        for name, args in arguments:
            self.note(
                _flat_text(args),
                hop.line,
                f"model tool call {name if isinstance(name, str) and name else '(unnamed)'}"
                " arguments",
            )

    def stub_hop(self, hop: TraceHop) -> None:
        """A stub hop issues the ids of a successful response, then its request mentions ids."""
        if hop.status is None or not _real_status(hop.status) or hop.status < 400:
            # A successful response issues its ids before its own request is judged:
            # GET /orders/{id} answered 200 means the stub knows that id. Error bodies
            # ("no order ord_x") echo ids without issuing them.
            for found in self.ids(_flat_text(hop.resp)):
                self.issued.setdefault(found, hop.line)
        if isinstance(hop.url, str):
            self.note(hop.url, hop.line, "stub request URL", hop)
        self.note(_flat_text(hop.req), hop.line, "stub request body", hop)


def _id_regex(id_pattern: str) -> re.Pattern[str]:
    """The id pattern as whole-token matches; raises `re.error` when it is not a regex."""
    re.compile(id_pattern)  # on its own: wrapped, "ord_[" would read as a valid class
    # Whole-token matches: `ord_ab` inside `word_abx` or `ord_abxyz` is not an id. The
    # left edge is tested by hand: a leading lookbehind stops `re` from scanning for
    # the pattern's literal prefix, which is most of the speed on big traces.
    return re.compile(rf"(?:{id_pattern})(?![A-Za-z0-9_])")


def trace_no_invented_ids(
    hops: Sequence[TraceHop],
    path: str,
    id_pattern: str = DEFAULT_ID_PATTERN,
    extra_texts: Iterable[str | tuple[str, str]] = (),
) -> CheckOutcome:
    """Establish that no id in model output or trace requests was left unissued by the stub.

    Ids are issued by stub responses (those without a 4xx/5xx status) in trace order; an id
    that appears in model output (assistant text, tool-call arguments), in any hop's request
    or in `extra_texts` (plain strings or (label, text) pairs, read after the whole trace)
    before any stub response issued it is a finding, whether it is issued later or never.
    """
    if not hops:
        return skip(NO_INVENTED_IDS, "no trace hops to inspect")
    try:
        pattern = _id_regex(id_pattern)
    except re.error as exc:
        return CheckOutcome(
            NO_INVENTED_IDS, "error", f"id pattern {id_pattern!r} is not a valid regex: {exc}"
        )
    scan = _IdScan(pattern, _literal_prefix(id_pattern))
    for index, hop in enumerate(hops):
        kind = hop_kind(hop)
        if kind == MODEL:
            scan.model_hop(index, hop)
        elif kind == STUB:
            scan.stub_hop(hop)
    for number, extra in enumerate(extra_texts, 1):
        label, text = extra if isinstance(extra, tuple) else (f"extra text #{number}", extra)
        if isinstance(text, str):
            scan.note(text, None, label)
    return _ids_outcome(scan, id_pattern, path)


def _early_use_finding(found: str, use: _Use, issued: dict[str, int], path: str) -> dict[str, Any]:
    """The finding for one id used before (or without) the stub issuing it."""
    places = "; ".join(
        f"{where} at line {line}" if line is not None else where for line, where in use.lines
    )
    more = f" (+{use.count - len(use.lines)} more)" if use.count > len(use.lines) else ""
    if found in issued:
        message = (
            f"{found} used in {places}{more} before the stub issued it at line {issued[found]}"
        )
    else:
        message = f"{found} appears in {places}{more}; no stub response issued it"
    item: dict[str, Any] = {"message": message, "path": path}
    first_line = use.lines[0][0]
    if first_line is not None:
        item["line"] = first_line
    return item


def _ids_outcome(scan: _IdScan, id_pattern: str, path: str) -> CheckOutcome:
    """fail on any id used before it was issued (or never issued), else pass."""
    issued = scan.issued
    evidence = [_early_use_finding(found, use, issued, path) for found, use in scan.early.items()]
    if evidence:
        invented = sum(1 for found in scan.early if found not in issued)
        early_only = len(evidence) - invented
        parts = []
        if invented:
            parts.append(f"{counted(invented, 'id')} never issued by the stub")
        if early_only:
            parts.append(f"{counted(early_only, 'id')} used before the stub issued them")
        return CheckOutcome(NO_INVENTED_IDS, "fail", ", ".join(parts), evidence)
    return CheckOutcome(
        NO_INVENTED_IDS,
        "pass",
        f"every id matching {id_pattern} ({scan.mentions} mentions) was issued by the stub first"
        if scan.mentions
        else f"no id matching {id_pattern} appears in model output or requests",
        [
            {"message": f"{found} issued at line {line}", "path": path, "line": line}
            for found, line in list(issued.items())[:50]
        ],
    )


def _has_idempotency_key(hop: TraceHop) -> bool:
    if hop.idempotency_key and hop.idempotency_key.strip():
        return True
    return any(
        name.lower() in _IDEMPOTENCY_HEADERS and value.strip()
        for name, value in hop.request_headers or ()
        if isinstance(name, str) and isinstance(value, str)
    )


def trace_idempotency_keys_logged(hops: Sequence[TraceHop], path: str) -> CheckOutcome:
    """Establish that every stub write (POST/PUT/PATCH) in the trace carries its Idempotency-Key."""
    if not hops:
        return skip(IDEMPOTENCY_KEYS_LOGGED, "no trace hops to inspect")
    writes = 0
    missing: list[TraceHop] = []
    no_method = 0
    for hop in hops:
        if hop_kind(hop) != STUB:
            continue
        if hop.method is None:
            no_method += 1
            continue
        if str(hop.method).upper() not in WRITE_METHODS:
            continue
        writes += 1
        if not _has_idempotency_key(hop):
            missing.append(hop)
    note = (
        [{"message": f"{no_method} stub hops record no method; not counted", "path": path}]
        if no_method
        else []
    )
    if not writes:
        return skip(IDEMPOTENCY_KEYS_LOGGED, "the trace holds no stub writes (POST/PUT/PATCH)")
    if missing:
        lines = ", ".join(str(h.line) for h in missing[:20])
        return CheckOutcome(
            IDEMPOTENCY_KEYS_LOGGED,
            "fail",
            f"{len(missing)} of {writes} stub writes carry no Idempotency-Key "
            f"({'line' if len(missing) == 1 else 'lines'} {lines})",
            [
                {
                    "message": f"line {hop.line}: {_where(hop)} (status {hop.status}) has no "
                    "Idempotency-Key header",
                    "path": path,
                    "line": hop.line,
                }
                for hop in missing
            ]
            + note,
        )
    return CheckOutcome(
        IDEMPOTENCY_KEYS_LOGGED,
        "pass",
        f"all {writes} stub writes carry an Idempotency-Key",
        note,
    )
