"""Model calls from a message transcript: the shared step of every reader of agent logs.

A transcript (Claude Code, Codex, an explorer trace, an SDK's message stream, a trace
export's messages) records the conversation, not the HTTP calls. Each run of assistant
messages is one model call: its request is the conversation so far, its response the
run merged into one reply, in the provider shape the messages are written in (Anthropic
content blocks, else OpenAI chat). The providers' normalisers then make turns of them
exactly as they do of recorded HTTP bodies, so threads, diffs and checks see one model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cassettes_app.formats.base import (
    Body,
    ParsedFinding,
    ParsedInteraction,
    ParsedMessage,
    ParseResult,
)

# Each call's request holds the whole conversation before it (a list of references to the
# same message objects): past this many references in one file, later calls keep only
# their last HISTORY_TAIL messages and a finding says so.
MAX_HISTORY_REFS = 2_000_000
HISTORY_TAIL = 200

SYNTHETIC = "synthesized from a transcript"

_ANTHROPIC_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})


def is_anthropic(messages: Iterable[ParsedMessage]) -> bool:
    """True when the assistant messages are Anthropic messages (lists of content blocks)."""
    for message in messages:
        raw = message.raw if isinstance(message.raw, Mapping) else {}
        if message.role != "assistant" or "tool_calls" in raw:
            continue
        content = raw.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def model_calls(
    result: ParseResult,
    path: str,
    messages: Sequence[ParsedMessage],
    *,
    model: str | None = None,
    times: Mapping[int, str] | None = None,
    start: int = 0,
) -> list[ParsedInteraction]:
    """One interaction per model call in `messages` (see the module doc), numbered from
    `start`. `model` names the model where a reply does not; `times` maps a message's line
    to its recording time."""
    anthropic = is_anthropic(messages)
    history: list[dict[str, Any]] = []
    system: list[str] = []
    calls: list[ParsedInteraction] = []
    refs = 0
    trimmed = False
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role != "assistant":
            converted = _request_message(message, anthropic)
            if anthropic and message.role == "system":
                system.append(_text(message.content))
            elif converted is not None:
                history.append(converted)
            index += 1
            continue
        run = [message]
        index += 1
        while index < len(messages) and messages[index].role == "assistant":
            if anthropic and _id(messages[index]) != _id(run[0]):
                break  # another API response: its own call
            run.append(messages[index])
            index += 1
        reply = _merge(run, anthropic)
        served = next((m for m in (_model(x) for x in run) if m), None) or model
        request_messages = history
        refs += len(history)
        if refs > MAX_HISTORY_REFS:
            request_messages = history[-HISTORY_TAIL:]
            if not trimmed:
                trimmed = True
                result.findings.append(
                    ParsedFinding(
                        "invalid_structure",
                        "info",
                        path,
                        run[0].line,
                        f"long transcript: from here on each model call keeps only the "
                        f"last {HISTORY_TAIL} messages of its history",
                    )
                )
        request: dict[str, Any] = {"messages": list(request_messages)}
        if served:
            request["model"] = served
        if anthropic and system:
            request["system"] = "\n\n".join(system)
        response = _response(reply, run, served, anthropic)
        line = run[0].line
        calls.append(
            ParsedInteraction(
                index=start + len(calls),
                method=None,
                url=None,
                request_body=_body(request),
                status=None,
                response_body=_body(response),
                recorded_at=(times or {}).get(line) if line is not None else None,
                extra={"line": line, "synthetic": SYNTHETIC},
            )
        )
        history.append(reply)
    return calls


def _body(value: dict[str, Any]) -> Body:
    # No text: these bodies are the file's own values, already scanned with its text.
    return Body(json=value, content_type="application/json", encoding_note=SYNTHETIC)


def _id(message: ParsedMessage) -> Any:
    raw = message.raw if isinstance(message.raw, Mapping) else {}
    return raw.get("id")


def _model(message: ParsedMessage) -> str | None:
    raw = message.raw if isinstance(message.raw, Mapping) else {}
    value = raw.get("model")
    return value if isinstance(value, str) and value and value != "<synthetic>" else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"] if isinstance(b, Mapping) and isinstance(b.get("text"), str) else ""
            for b in content
        )
    return ""


def _request_message(message: ParsedMessage, anthropic: bool) -> dict[str, Any] | None:
    raw = message.raw if isinstance(message.raw, Mapping) else {}
    if anthropic:
        if message.role not in ("user", "assistant"):
            return None
        return {"role": message.role, "content": raw.get("content", message.content)}
    keep = ("role", "content", "name", "tool_call_id", "tool_calls")
    converted = {k: raw[k] for k in keep if k in raw}
    converted.setdefault("role", message.role)
    converted.setdefault("content", message.content)
    return converted


def _merge(run: list[ParsedMessage], anthropic: bool) -> dict[str, Any]:
    """The assistant messages of one call as one reply."""
    if anthropic:
        blocks: list[Any] = []
        for message in run:
            content = message.raw.get("content") if isinstance(message.raw, Mapping) else None
            if isinstance(content, list):
                blocks.extend(content)
            elif isinstance(content, str) and content:
                blocks.append({"type": "text", "text": content})
        return {"role": "assistant", "content": blocks}
    texts: list[str] = []
    tool_calls: list[Any] = []
    for message in run:
        raw = message.raw if isinstance(message.raw, Mapping) else {}
        text = _text(raw.get("content", message.content))
        if text:
            texts.append(text)
        tool_calls.extend(c for c in raw.get("tool_calls") or [] if isinstance(c, Mapping))
    reply: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
    if tool_calls:
        reply["tool_calls"] = tool_calls
    return reply


def _response(
    reply: dict[str, Any], run: list[ParsedMessage], model: str | None, anthropic: bool
) -> dict[str, Any]:
    last = run[-1].raw if isinstance(run[-1].raw, Mapping) else {}
    usage = next(
        (
            m.raw["usage"]
            for m in reversed(run)
            if isinstance(m.raw, Mapping) and isinstance(m.raw.get("usage"), Mapping)
        ),
        None,
    )
    if anthropic:
        response: dict[str, Any] = {"type": "message", **reply}
        if model:
            response["model"] = model
        response["stop_reason"] = last.get("stop_reason")
        if usage is not None:
            response["usage"] = usage
        return response
    finish = "tool_calls" if reply.get("tool_calls") else last.get("finish_reason", "stop")
    response = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": reply, "finish_reason": finish}],
    }
    if model:
        response["model"] = model
    if usage is not None:
        response["usage"] = usage
    return response
