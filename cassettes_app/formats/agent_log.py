"""JSON Lines agent logs: OpenAI/Anthropic/Gemini chat messages or {request, response} pairs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from cassettes_app import bodies, safeload
from cassettes_app.formats.base import (
    as_status,
    as_text_or_none,
    body_findings,
    close_recording,
    jsonl_objects,
    run_parser,
    tally_finding,
)
from cassettes_app.formats.conversation import model_calls
from cassettes_app.formats.sniff import (
    CLAUDE_CODE,
    CLAUDE_SDK,
    CODEX,
    JSONL_SAMPLE,
    LIKELY,
    NO,
    SURE,
    head_document,
    is_agent_line,
    json_doc_keys,
    jsonl_head,
    jsonl_sample,
    looks_like,
)
from cassettes_app.headers import header_pairs
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import (
    ParsedFinding,
    ParsedInteraction,
    ParsedMessage,
    ParsedRecording,
    ParseResult,
)
from cassettes_app.providers.common import ToolCall

NAME = "agent_log"


def sniff(path: str, head: bytes) -> float:
    """JSON Lines of chat messages or request/response pairs: sure for the transcripts this
    reader knows (Claude Code, Codex) and when most sampled lines are messages; likely when
    the first one is. Never an agent log of a family it does not understand."""
    obj = jsonl_head(path, head)
    if obj is None:
        return _array_score(head)
    sample = jsonl_sample(head)
    family = looks_like(sample)
    if family in (CLAUDE_CODE, CLAUDE_SDK, CODEX):
        return SURE
    if family is not None or not is_agent_line(obj):
        return NO
    messages = sum(is_agent_line(line) for line in sample)
    return SURE if messages * 2 > len(sample) else LIKELY


def _array_score(head: bytes) -> float:
    """A JSON array of the same lines (an SDK stream saved whole) or of chat messages."""
    doc = head_document(head)
    items = [o for o in doc[:JSONL_SAMPLE] if isinstance(o, dict)] if isinstance(doc, list) else []
    if not items:
        # Cut or too long to parse in the head: the first item's keys still tell.
        kind, keys = json_doc_keys("", head)
        wrapped = {"type", "session_id"} <= keys or {"type", "message"} <= keys
        return LIKELY if kind == "array" and (wrapped or {"role", "content"} <= keys) else NO
    if looks_like(items) in (CLAUDE_CODE, CLAUDE_SDK):
        return SURE
    messages = sum("role" in o and "content" in o for o in items)
    return LIKELY if messages * 2 > len(items) else NO


def _objects(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """The file's lines, or the items of a file that is one JSON array (no line numbers)."""
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        doc = safeload.load_json(data, limits)
        if isinstance(doc, list):
            yield from ((None, o) for o in doc if isinstance(o, dict))
            return
    yield from jsonl_objects(result, path, data, limits)


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """Parse messages and request/response pairs; each bad line is a finding."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    recording = ParsedRecording(path=path, format=NAME)
    ascii_values = bodies.ascii_json(data)
    # A Claude Code transcript interleaves its messages with bookkeeping lines (summary,
    # file-history-snapshot, queue-operation, ...): counted once, not a finding each.
    head = data[:262144]
    doc = head_document(head) if head.lstrip()[:1] == b"[" else None
    sample = [o for o in doc[:JSONL_SAMPLE] if isinstance(o, dict)] if isinstance(doc, list) else []
    family = looks_like(sample or jsonl_sample(head))
    other: dict[str, int] = {}
    times: dict[int, str] = {}
    models: dict[int, str] = {}  # Codex names its model in turn_context lines
    for line, obj in _objects(result, path, data, limits):
        stamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        if family == CODEX:
            converted = _codex_message(obj)
            payload_model = (
                (obj.get("payload") or {}).get("model")
                if obj.get("type")
                in (
                    "turn_context",
                    "session_meta",
                )
                and isinstance(obj.get("payload"), dict)
                else None
            )
            if isinstance(payload_model, str) and payload_model and line is not None:
                models[line] = payload_model
            if converted is None:
                payload = safeload.object_at(obj, "payload")
                kind = str(payload.get("type") or obj.get("type") or "untyped")[:40]
                other[kind] = other.get(kind, 0) + 1
                continue
            obj = {"message": converted}
        elif family in (CLAUDE_CODE, CLAUDE_SDK) and not isinstance(obj.get("message"), dict):
            kind = str(obj.get("type") or "untyped")[:40]
            other[kind] = other.get(kind, 0) + 1
            continue
        if "request" in obj and "response" in obj:
            interaction = _interaction(
                len(recording.interactions), line, obj, limits, result, path, ascii_values
            )
            recording.interactions.append(interaction)
            recording.recorded_at = recording.recorded_at or interaction.recorded_at
            continue
        # Wrapped lines ({"type": "assistant", "message": {...}}) carry the message inside.
        message = obj["message"] if isinstance(obj.get("message"), dict) else obj
        if "role" not in message and message is not obj and obj.get("type") in _WRAPPED_ROLES:
            message = {**message, "role": obj["type"]}  # the SDK's user lines omit the role
        if "role" not in message:
            result.findings.append(
                ParsedFinding(
                    "bad_line", "warn", path, line, "line is neither a message nor a pair"
                )
            )
            continue
        result.messages.append(_message(line, message, limits, result, path))
        if stamp and line is not None:
            times[line] = stamp
    if other:
        who = {CLAUDE_CODE: "Claude Code", CLAUDE_SDK: "Agent SDK stream"}.get(
            family or "", "Codex"
        )
        result.findings.append(tally_finding(path, f"{who} bookkeeping lines not read", other))
    if result.messages and not recording.interactions:
        # A transcript: its model calls (one per run of assistant messages) become the
        # interactions that turns are made of.
        recording.interactions = _transcript_calls(result, path, models, times)
        recording.meta["messages"] = len(result.messages)
    if recording.interactions:
        close_recording(result, recording)
    if not result.messages and not recording.interactions and not result.findings:
        result.findings.append(
            ParsedFinding("empty_file", "warn", path, None, "agent log is empty")
        )


def _transcript_calls(
    result: ParseResult, path: str, models: dict[int, str], times: dict[int, str]
) -> list[ParsedInteraction]:
    """Model calls of a transcript; a Codex reply's model is the one its turn named last."""
    calls = model_calls(result, path, result.messages, times=times)
    named = sorted(models.items())
    for call in calls:
        line = call.extra.get("line")
        model = next((m for at, m in reversed(named) if line is not None and at < line), None)
        for body in (call.request_body.json, call.response_body.json):
            if model and isinstance(body, dict) and not body.get("model"):
                body["model"] = model
    return calls


_WRAPPED_ROLES = ("user", "assistant", "system")

_CODEX_ROLES = {"developer": "system", "user": "user", "assistant": "assistant", "system": "system"}


def _codex_message(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A Codex rollout line as a chat message (OpenAI chat shape), or None for bookkeeping
    (session_meta, turn_context, event_msg, reasoning, snapshots)."""
    payload = obj.get("payload")
    if obj.get("type") != "response_item" or not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if kind == "message":
        parts = payload.get("content")
        texts = (
            [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        )
        text = "".join(t for t in texts if isinstance(t, str))
        return {"role": _CODEX_ROLES.get(str(payload.get("role")), "user"), "content": text}
    if kind in ("function_call", "custom_tool_call"):
        arguments = payload.get("arguments")
        if kind == "custom_tool_call":  # free-form input (apply_patch): kept as one field
            arguments = json.dumps({"input": payload.get("input")})
        call = {
            "id": payload.get("call_id"),
            "type": "function",
            "function": {"name": payload.get("name"), "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        return {"role": "tool", "tool_call_id": payload.get("call_id"), "content": output}
    return None


def _interaction(
    index: int,
    line: int | None,
    obj: dict[str, Any],
    limits: ParseLimits,
    result: ParseResult,
    path: str,
    ascii_values: bool = False,
) -> ParsedInteraction:
    request_headers, _ = header_pairs(obj.get("request_headers"))
    response_headers, _ = header_pairs(obj.get("response_headers"))
    request_body = bodies.decode_body(
        _payload(obj["request"]), request_headers, limits, ascii_values=ascii_values
    )
    response_body = bodies.decode_body(
        _payload(obj["response"]), response_headers, limits, ascii_values=ascii_values
    )
    result.findings += body_findings(path, line, "request", request_body)
    result.findings += body_findings(path, line, "response", response_body)
    recorded_at = next(
        (as_text_or_none(obj[k]) for k in ("recorded_at", "timestamp", "ts") if obj.get(k)), None
    )
    method = as_text_or_none(obj.get("method")) or "POST"
    return ParsedInteraction(
        index=index,
        method=method.upper(),
        url=as_text_or_none(obj.get("url") or obj.get("endpoint")),
        request_headers=request_headers,
        request_body=request_body,
        status=as_status(obj.get("status")),
        response_headers=response_headers,
        response_body=response_body,
        recorded_at=recorded_at,
        extra={"line": line},
    )


def _payload(value: Any) -> Any:
    if value is None or isinstance(value, str | dict | list):
        return value
    return str(value)


def _message(
    line: int | None, msg: dict[str, Any], limits: ParseLimits, result: ParseResult, path: str
) -> ParsedMessage:
    content = msg.get("content", msg.get("parts"))
    calls: list[ToolCall] = []
    tool_call_id = as_text_or_none(msg.get("tool_call_id"))

    def add(call_id: Any, name: Any, arguments: Any) -> None:
        call = _tool_call(as_text_or_none(call_id), as_text_or_none(name), arguments, limits)
        if not call.arguments_valid:
            result.findings.append(
                ParsedFinding(
                    "invalid_tool_arguments",
                    "warn",
                    path,
                    line,
                    f"tool call {call.name or '?'} ({call.id or 'no id'}): "
                    "arguments are not valid JSON; kept verbatim",
                )
            )
        calls.append(call)

    for call in msg.get("tool_calls") or []:
        if isinstance(call, dict):
            function = safeload.object_at(call, "function")
            add(call.get("id"), function.get("name", call.get("name")), function.get("arguments"))
    legacy = msg.get("function_call")
    if isinstance(legacy, dict):
        add(None, legacy.get("name"), legacy.get("arguments"))
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ("tool_use", "server_tool_use"):
                add(block.get("id"), block.get("name"), block.get("input"))
            elif kind == "tool_result" and tool_call_id is None:
                tool_call_id = as_text_or_none(block.get("tool_use_id"))
            elif isinstance(block.get("functionCall"), dict):
                function = block["functionCall"]
                add(function.get("id"), function.get("name"), function.get("args"))
            elif isinstance(block.get("functionResponse"), dict) and tool_call_id is None:
                response = block["functionResponse"]
                tool_call_id = as_text_or_none(response.get("id") or response.get("name"))
    return ParsedMessage(
        role=as_text_or_none(msg.get("role")),
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        raw=msg,
        line=line,
    )


def _tool_call(
    call_id: str | None, name: str | None, arguments: Any, limits: ParseLimits
) -> ToolCall:
    """Parse string arguments as JSON; invalid ones stay verbatim and are marked invalid."""
    if not isinstance(arguments, str):
        return ToolCall(call_id, name, arguments)
    if not arguments.strip():
        return ToolCall(call_id, name, {}, arguments)
    try:
        return ToolCall(call_id, name, safeload.load_json(arguments, limits), arguments)
    except safeload.LoadError:
        return ToolCall(call_id, name, arguments, arguments, arguments_valid=False)
