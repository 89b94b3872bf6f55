"""Model calls from a message transcript: the shared step of every reader of agent logs.

A transcript (Claude Code, Codex, an explorer trace, an SDK's message stream, a trace
export's messages) records the conversation, not the HTTP calls. Each run of assistant
messages is one model call: its request is the conversation so far, its response the
run merged into one reply, in the provider shape the messages are written in (Anthropic
content blocks, else OpenAI chat). The providers' normalisers then make turns of them
exactly as they do of recorded HTTP bodies, so threads, diffs and checks see one model.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cassettes_app import safeload
from cassettes_app.parsed import Body, ParsedFinding, ParsedInteraction, ParsedMessage, ParseResult

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


# --- message dialects ----------------------------------------------------------
# Trace exports keep a call's messages in whatever shape their SDK had: OpenAI chat, the
# GenAI conventions' typed parts, Vercel AI SDK parts, Gemini contents, Anthropic blocks,
# LangChain's serialised messages. The readers of those exports rebuild each call in
# OpenAI chat shape through these helpers, so one normaliser makes the turns.

_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "chat": "user",
}
_LANGCHAIN_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
    "ChatMessage": "user",
}


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """An OpenAI chat tool call; arguments kept as the JSON text the API sends."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, default=str)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def loads(value: Any) -> Any:
    """A JSON string's value (exports often store payloads as text); anything else as is."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{", '"'):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _part(part: Any, out: dict[str, Any], texts: list[str], calls: list[dict[str, Any]]) -> None:
    """Fold one content part of any dialect into a chat message being built."""
    if isinstance(part, str):
        texts.append(part)
        return
    if not isinstance(part, Mapping):
        return
    kind = part.get("type")
    function_call = part.get("functionCall", part.get("function_call"))
    function_response = part.get("functionResponse", part.get("function_response"))
    if isinstance(function_call, Mapping):  # Gemini
        calls.append(tool_call(function_call.get("id"), function_call.get("name"),
                               function_call.get("args", {})))  # fmt: skip
    elif isinstance(function_response, Mapping):
        out["role"] = "tool"
        out["tool_call_id"] = function_response.get("id") or function_response.get("name")
        texts.append(_dump(function_response.get("response")))
    elif kind in ("tool_call", "tool-call", "tool_use", "function_call"):
        arguments: Any = next((part[k] for k in ("arguments", "input", "args") if k in part), {})
        call_id = part.get("id", part.get("toolCallId", part.get("call_id")))
        calls.append(tool_call(call_id, part.get("name", part.get("toolName")), arguments))
    elif kind in ("tool_call_response", "tool-result", "tool_result", "function_call_output"):
        out["role"] = "tool"
        out["tool_call_id"] = (
            part.get("id") or part.get("toolCallId") or part.get("tool_use_id")
            or part.get("call_id")
        )  # fmt: skip
        value = next(
            (part[k] for k in ("response", "output", "result", "content") if k in part), None
        )
        if isinstance(value, list):  # Anthropic tool_result content blocks
            value = "".join(b.get("text", "") for b in value if isinstance(b, Mapping))
        texts.append(_dump(value))
    else:
        text = part.get("text", part.get("content") if kind == "text" else None)
        if isinstance(text, str):
            texts.append(text)


def as_chat_message(message: Any) -> dict[str, Any] | None:
    """Any dialect's message as an OpenAI chat message, or None when it is none."""
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if not isinstance(message, Mapping):
        return None
    if message.get("lc") == 1 and isinstance(message.get("kwargs"), Mapping):  # LangChain
        ident = message.get("id")
        kwargs = message["kwargs"]
        role = _LANGCHAIN_ROLES.get(ident[-1] if isinstance(ident, list) and ident else "")
        return _from_fields(kwargs, role or _ROLES.get(str(kwargs.get("role")), "user"))
    if isinstance(message.get("data"), Mapping) and message.get("type") in _ROLES:
        return _from_fields(message["data"], _ROLES[str(message["type"])])  # LangChain dict
    role = _ROLES.get(str(message.get("role") or message.get("type") or ""))
    return _from_fields(message, role or "user")


def _from_fields(fields: Mapping[str, Any], role: str) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    content = fields.get("content", fields.get("parts"))
    if isinstance(content, list):
        for part in content:
            _part(part, out, texts, calls)
        content_text: Any = "".join(texts) if texts else None
    elif isinstance(content, Mapping):
        _part(content, out, texts, calls)
        content_text = "".join(texts) if texts else None
    else:
        content_text = content
    if isinstance(fields.get("parts"), list) and "content" in fields:
        for part in fields["parts"]:
            _part(part, out, texts, calls)
        content_text = "".join(texts) if texts else content_text
    for call in fields.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if isinstance(function, str):  # inspect_ai: the function's name, arguments beside
            function = {"name": function}
        function = function if isinstance(function, Mapping) else {}
        arguments = function.get("arguments", call.get("args", call.get("arguments")))
        calls.append(tool_call(call.get("id"), function.get("name", call.get("name")), arguments))
    out["content"] = content_text
    if calls:
        out["tool_calls"] = calls
    if fields.get("tool_call_id"):
        out["role"] = "tool"
        out["tool_call_id"] = fields["tool_call_id"]
    return out


def as_chat_messages(value: Any) -> list[dict[str, Any]]:
    """A call's input in any dialect (a message list, a provider payload, a prompt) as chat
    messages."""
    value = loads(value)
    if isinstance(value, list):
        if value and isinstance(value[0], list):  # LangChain: a batch of message lists
            value = value[0]
        return [m for m in map(as_chat_message, value) if m is not None]
    if not isinstance(value, Mapping):
        return [] if value is None else [{"role": "user", "content": _dump(value)}]
    messages: list[dict[str, Any]] = []
    config = safeload.object_at(value, "config")
    system = value.get("system", value.get("system_instruction",
                                            config.get("system_instruction")))  # fmt: skip
    if system:
        text = system if isinstance(system, str) else (as_chat_message(system) or {}).get("content")
        messages.append({"role": "system", "content": text})
    for key in ("messages", "contents", "input", "prompt"):
        if key in value:
            inner = loads(value[key])
            if isinstance(inner, str):
                messages.append({"role": "user", "content": inner})
            else:
                messages.extend(as_chat_messages(inner))
            return messages
    message = as_chat_message(value)
    return [*messages, message] if message and message.get("content") is not None else messages


def as_reply(value: Any) -> dict[str, Any] | None:
    """A call's output in any dialect as the assistant's chat message, or None."""
    value = loads(value)
    if value is None:
        return None
    if isinstance(value, str):
        return {"role": "assistant", "content": value}
    if isinstance(value, list):
        if value and all(isinstance(c, Mapping) and "toolName" in c for c in value):  # Vercel
            calls = [tool_call(c.get("toolCallId"), c.get("toolName"),
                               c.get("input", c.get("args"))) for c in value]  # fmt: skip
            return {"role": "assistant", "content": None, "tool_calls": calls}
        replies = [r for r in map(as_reply, value) if r is not None]
        return replies[-1] if replies else None
    if not isinstance(value, Mapping):
        return {"role": "assistant", "content": _dump(value)}
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message") or {"content": choices[0].get("text")}
        return {**(as_chat_message(message) or {}), "role": "assistant"}
    candidates = value.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
        value = candidates[0]
    generations = value.get("generations")
    if isinstance(generations, list) and generations:  # LangChain LLMResult
        first = generations[0][0] if isinstance(generations[0], list) else generations[0]
        if isinstance(first, Mapping):
            message = first.get("message") or {"content": first.get("text")}
            return {**(as_chat_message(message) or {}), "role": "assistant"}
    if isinstance(value.get("parts"), list):  # a Gemini content: {role: model, parts}
        return {**_from_fields(value, "assistant"), "role": "assistant"}
    for key in ("content", "message", "output", "output_text", "text"):
        if key in value and value[key] is not None:
            inner = value[key]
            if key == "content" and isinstance(inner, list | str):
                return {**_from_fields(value, "assistant"), "role": "assistant"}
            reply = as_reply(inner)
            if reply is not None:
                return {**reply, "role": "assistant"}
    return None


def chat_call(
    messages: list[dict[str, Any]],
    reply: dict[str, Any] | None,
    *,
    model: str | None,
    usage: Mapping[str, Any] | None,
    finish_reason: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The (request, response) of one rebuilt call in OpenAI chat shape."""
    request: dict[str, Any] = {"messages": messages}
    if model:
        request["model"] = model
    if reply is None and not usage:
        return request, None
    finish = finish_reason or ("tool_calls" if reply and reply.get("tool_calls") else "stop")
    response: dict[str, Any] = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": reply, "finish_reason": finish}] if reply else [],
    }
    if model:
        response["model"] = model
    if usage:
        response["usage"] = dict(usage)
    return request, response


def rebuilt_interaction(
    index: int,
    request: dict[str, Any],
    response: dict[str, Any] | None,
    *,
    note: str,
    recorded_at: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ParsedInteraction:
    """An interaction whose bodies were rebuilt from an export, not recorded on the wire."""
    return ParsedInteraction(
        index=index,
        method=None,
        url=None,
        request_body=Body(json=request, content_type="application/json", encoding_note=note),
        response_body=Body(json=response, content_type="application/json", encoding_note=note)
        if response is not None
        else Body(),
        recorded_at=recorded_at,
        extra={**(extra or {}), "synthetic": note},
    )


def token_usage(prompt: Any, completion: Any, total: Any = None) -> dict[str, Any] | None:
    """OpenAI-style usage from whichever counts an export kept."""

    def count(value: Any) -> int | float | None:
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    usage = {
        "prompt_tokens": count(prompt),
        "completion_tokens": count(completion),
        "total_tokens": count(total),
    }
    usage = {k: v for k, v in usage.items() if v is not None}
    return usage or None


def iso_time(value: Any) -> str | None:
    """An export's timestamp (ISO text, epoch seconds, ms, ns, or [s, ns]) as ISO text."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        value = value[0] * 10**9 + value[1]
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    seconds = value / 1e9 if value > 1e14 else value / 1e3 if value > 1e11 else value
    try:
        stamp = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return stamp.isoformat().replace("+00:00", "Z")
