"""Normalise recorded provider request/response JSON into one turn model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "PROVIDERS",
    "Exchange",
    "Message",
    "ToolCall",
    "ToolResult",
    "canonical_json",
    "detect_provider",
    "normalise",
]

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini", "unknown")


@dataclass(slots=True)
class ToolCall:
    """One tool/function call the model asked for."""

    id: str | None
    name: str
    arguments: Any
    arguments_raw: str | None = None
    arguments_valid: bool = True


@dataclass(slots=True)
class ToolResult:
    """One tool output fed back to the model."""

    tool_call_id: str | None
    content: str
    is_error: bool = False
    name: str | None = None


@dataclass(slots=True)
class Message:
    """One message of a conversation, provider-neutral."""

    role: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    raw: Any = None


@dataclass(slots=True)
class Exchange:
    """One request/response pair as the model saw it."""

    provider: str
    model: str | None
    request_messages: list[Message]
    response: Message | None
    usage: dict
    raw_request: Any
    raw_response: Any
    stop_reason: str | None = None
    problems: list[str] = field(default_factory=list)


class _Malformed(ValueError):
    """A payload whose structure does not fit the detected provider."""


# --------------------------------------------------------------------------- helpers


def canonical_json(obj: Any) -> str:
    """Serialise obj deterministically (sorted keys, compact, unicode kept)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _load(body: Any) -> Any:
    """Decode a body given as bytes/str JSON or SSE; anything else is returned as is."""
    if isinstance(body, bytes | bytearray | memoryview):
        body = bytes(body).decode("utf-8", errors="replace")
    if not isinstance(body, str):
        return body
    stripped = body.strip()
    if not stripped:
        return None
    if stripped.startswith(("data:", "event:")):
        return _sse_events(stripped)
    try:
        return json.loads(stripped)
    except ValueError:
        return body


def _sse_events(text: str) -> list[Any]:
    """Parse a text/event-stream body into its JSON data payloads."""
    events: list[Any] = []
    data: list[str] = []

    def flush() -> None:
        if data:
            payload = "\n".join(data)
            data.clear()
            if payload.strip() == "[DONE]":
                return
            try:
                events.append(json.loads(payload))
            except ValueError:
                events.append(payload)

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    flush()
    return events


def _text(value: Any) -> str:
    """Render a leaf value as text; None is empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("value"), str):
        return value["value"]
    if isinstance(value, int | float | bool):
        return json.dumps(value)
    return canonical_json(value)


def _opt_str(value: Any) -> str | None:
    """Return value as a string, or None when absent."""
    if value is None:
        return None
    return value if isinstance(value, str) else _text(value)


def _as_list(value: Any, what: str) -> list:
    """Return a list container; None is empty, any other type is malformed."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise _Malformed(f"{what} is {type(value).__name__}, expected a list")


def _as_dict(value: Any, what: str) -> dict:
    """Return a dict; None is empty, any other type is malformed."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise _Malformed(f"{what} is {type(value).__name__}, expected an object")


_TEXT_PART_TYPES = {None, "text", "input_text", "output_text"}


def _parts_text(content: Any) -> str:
    """Join the text of a string or list-of-parts content; other parts become [type] markers."""
    if content is None or isinstance(content, str):
        return _text(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return _text(content)
    out: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            out.append(_text(part))
            continue
        kind = part.get("type")
        if "text" in part and kind in _TEXT_PART_TYPES:
            out.append(_text(part["text"]))
        elif kind == "refusal":
            out.append(_text(part.get("refusal")))
        elif kind in ("thinking", "redacted_thinking", "reasoning"):
            continue
        else:
            out.append(f"[{kind or 'part'}]")
    return "\n".join(out)


def _tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """Build a ToolCall, parsing string arguments as JSON when possible."""
    if arguments is None:
        # Gemini omits args for parameterless calls.
        return ToolCall(_opt_str(call_id), _text(name), {}, None, True)
    if isinstance(arguments, str):
        if not arguments.strip():
            # An empty argument string is how several SDKs spell "no arguments".
            return ToolCall(_opt_str(call_id), _text(name), {}, arguments, True)
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return ToolCall(_opt_str(call_id), _text(name), arguments, arguments, False)
        return ToolCall(_opt_str(call_id), _text(name), parsed, arguments, True)
    return ToolCall(_opt_str(call_id), _text(name), arguments, None, True)


def _usage(inp: Any, out: Any, total: Any = None) -> dict:
    """Build the normalised usage dict from whatever counts are integers."""
    usage: dict[str, int] = {}
    for key, value in (("input_tokens", inp), ("output_tokens", out), ("total_tokens", total)):
        if isinstance(value, int) and not isinstance(value, bool):
            usage[key] = value
    if "total_tokens" not in usage and "input_tokens" in usage and "output_tokens" in usage:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage


_ROLE_MAP = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "model": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _role(value: Any, default: str) -> str:
    """Map a provider role onto system|user|assistant|tool; unknown roles are kept verbatim."""
    if value is None:
        return default
    role = _text(value)
    return _ROLE_MAP.get(role.lower(), role)


def _usage_dict(value: Any, what: str, ex: Exchange) -> dict:
    """Return a usage object; a wrong type is noted, not fatal, since usage is only metadata."""
    if isinstance(value, dict):
        return value
    if value is not None:
        ex.problems.append(f"{what} is {type(value).__name__}, expected an object")
    return {}


def _model(*candidates: Any) -> str | None:
    """Return the first non-empty string candidate."""
    for value in candidates:
        if isinstance(value, str) and value:
            return value
    return None


_URL_MODEL_RES = (
    re.compile(r"/models/([^/:]+)"),  # Gemini, Vertex AI: .../models/<model>:generateContent
    re.compile(r"/model/([^/]+)/(?:invoke|converse)"),  # Bedrock: /model/<model>/invoke
)


def _url_model(url: str | None) -> str | None:
    """Read the model name from a URL path, for APIs that put it there instead of the body."""
    if not isinstance(url, str):
        return None
    path = unquote(urlsplit(url).path)
    for pattern in _URL_MODEL_RES:
        found = pattern.search(path)
        if found:
            return found.group(1)
    return None


def _error_problem(resp: Any) -> str | None:
    """Describe a provider error body, if resp is one."""
    if isinstance(resp, dict) and "error" in resp:
        err = resp["error"]
        if isinstance(err, dict):
            return f"provider error: {_text(err.get('message') or err.get('type') or err)}"
        return f"provider error: {_text(err)}"
    return None


# --------------------------------------------------------------------------- detection


def _detect_response(resp: Any) -> str | None:
    """Guess the provider from a response body."""
    if isinstance(resp, list):
        first = next((e for e in resp if isinstance(e, dict)), None)
        if first is None:
            return None
        kind = first.get("type")
        if first.get("object") == "chat.completion.chunk" or "choices" in first:
            return "openai-chat"
        if isinstance(kind, str) and kind.startswith("response."):
            return "openai-responses"
        if kind in ("message_start", "content_block_start", "ping"):
            return "anthropic"
        if "candidates" in first or "usageMetadata" in first:
            return "gemini"
        return None
    if not isinstance(resp, dict):
        return None
    if "candidates" in resp or "usageMetadata" in resp or "promptFeedback" in resp:
        return "gemini"
    obj = resp.get("object")
    if obj in ("chat.completion", "chat.completion.chunk") or isinstance(resp.get("choices"), list):
        return "openai-chat"
    if obj == "response" or (isinstance(resp.get("output"), list) and "status" in resp):
        return "openai-responses"
    if resp.get("type") == "message" or "stop_reason" in resp:
        return "anthropic"
    if resp.get("type") == "error" and isinstance(resp.get("error"), dict):
        return "anthropic"
    return None


_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
_OPENAI_ONLY_KEYS = ("functions", "function_call", "response_format", "n", "logprobs")


def _detect_request(req: Any) -> str | None:
    """Guess the provider from a request body (strong signals only)."""
    if not isinstance(req, dict):
        return None
    if any(k in req for k in ("contents", "systemInstruction", "system_instruction")):
        return "gemini"
    if "generationConfig" in req:
        return "gemini"
    if "messages" not in req and ("input" in req or "instructions" in req):
        model = req.get("model")
        if isinstance(model, str) and "embed" in model:
            return None  # an embeddings call also has "input"
        return "openai-responses"
    if "messages" not in req:
        return None
    if "anthropic_version" in req or "system" in req or "stop_sequences" in req:
        return "anthropic"
    if any(k in req for k in (*_OPENAI_ONLY_KEYS, "max_completion_tokens")):
        return "openai-chat"
    tools = req.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], dict):
        if "input_schema" in tools[0]:
            return "anthropic"
        if "function" in tools[0]:
            return "openai-chat"
    messages = req.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if not isinstance(m, dict):
                continue
            if m.get("role") in ("system", "developer", "tool", "function"):
                return "openai-chat"
            if "tool_calls" in m or "function_call" in m or "tool_call_id" in m:
                return "openai-chat"
            content = m.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict):
                        if block.get("type") in _ANTHROPIC_BLOCKS:
                            return "anthropic"
                        if block.get("type") == "image" and "source" in block:
                            return "anthropic"
                        if block.get("type") == "image_url":
                            return "openai-chat"
    return None


def _detect_url(url: str | None) -> str | None:
    """Guess the provider from the request URL."""
    if not isinstance(url, str) or not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    path = parts.path.rstrip("/").lower()
    host = (parts.hostname or "").lower()
    if ":generatecontent" in path or ":streamgeneratecontent" in path:
        return "gemini"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages") and "/threads/" not in path:
        return "anthropic"
    if "anthropic" in host:
        return "anthropic"
    if "generativelanguage" in host:
        return "gemini"
    return None


def _detect(req: Any, resp: Any, url: str | None) -> str:
    """Body shape wins over URL because proxies and compat endpoints reuse each other's paths."""
    found = _detect_response(resp) or _detect_request(req) or _detect_url(url)
    if found:
        return found
    if isinstance(req, dict) and isinstance(req.get("messages"), list):
        model = req.get("model")
        if isinstance(model, str) and model.startswith("claude"):
            return "anthropic"
        return "openai-chat"
    return "unknown"


def detect_provider(request: Any, response: Any, url: str | None = None) -> str:
    """Return the provider id for a recorded request/response (never raises)."""
    try:
        return _detect(_load(request), _load(response), url)
    except Exception:
        return "unknown"


# --------------------------------------------------------------------------- OpenAI chat


def _chat_message(m: Any, default_role: str = "user") -> Message:
    """Parse one chat-completions message."""
    if not isinstance(m, dict):
        raise _Malformed(f"message is {type(m).__name__}, expected an object")
    raw_role = m.get("role")
    role = _role(raw_role, default_role)
    msg = Message(role=role, raw=m)
    content = m.get("content")
    if role == "tool":
        call_id = m.get("tool_call_id")
        msg.tool_results.append(
            ToolResult(_opt_str(call_id), _parts_text(content), name=_opt_str(m.get("name")))
        )
    else:
        msg.text = _parts_text(content)
    if msg.role == "assistant" and not msg.text and m.get("refusal"):
        msg.text = _text(m.get("refusal"))
    for tc in _as_list(m.get("tool_calls"), "tool_calls"):
        if not isinstance(tc, dict):
            raise _Malformed("tool call is not an object")
        fn = tc.get("function") if "function" in tc else tc.get("custom")
        fn = _as_dict(fn, "tool_calls[].function")
        args = fn["arguments"] if "arguments" in fn else fn.get("input")
        msg.tool_calls.append(_tool_call(tc.get("id"), fn.get("name"), args))
    legacy = m.get("function_call")
    if legacy is not None:
        legacy = _as_dict(legacy, "function_call")
        msg.tool_calls.append(_tool_call(None, legacy.get("name"), legacy.get("arguments")))
    return msg


def _chat_stream(events: list) -> dict:
    """Assemble chat.completion.chunk events into one completion."""
    text: list[str] = []
    calls: dict[int, dict] = {}
    legacy: dict | None = None
    out: dict[str, Any] = {}
    finish = None
    for ev in events:
        if not isinstance(ev, dict):
            continue
        out.setdefault("model", ev.get("model"))
        if isinstance(ev.get("usage"), dict):
            out["usage"] = ev["usage"]
        for choice in ev.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc.get("index", len(calls)), {"id": None, "name": "", "args": ""}
                )
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["args"] += fn.get("arguments") or ""
            if isinstance(delta.get("function_call"), dict):
                legacy = legacy or {"name": "", "arguments": ""}
                legacy["name"] += delta["function_call"].get("name") or ""
                legacy["arguments"] += delta["function_call"].get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["args"]},
            }
            for _, c in sorted(calls.items())
        ]
    if legacy:
        message["function_call"] = legacy
    out["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    return out


def _parse_openai_chat(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a chat-completions request/response."""
    req = _as_dict(req, "request")
    ex.request_messages = [_chat_message(m) for m in _as_list(req.get("messages"), "messages")]
    if isinstance(resp, list):
        resp = _chat_stream(resp)
    resp = _as_dict(resp, "response")
    ex.model = _model(resp.get("model"), req.get("model"), _url_model(url))
    choices = _as_list(resp.get("choices"), "choices")
    if choices:
        c0 = _as_dict(choices[0], "choices[0]")
        if c0.get("message") is not None:
            ex.response = _chat_message(c0["message"], default_role="assistant")
        elif "text" in c0:
            ex.response = Message("assistant", _text(c0["text"]), raw=c0)
        ex.stop_reason = _opt_str(c0.get("finish_reason"))
    u = _usage_dict(resp.get("usage"), "usage", ex)
    ex.usage = _usage(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))


# --------------------------------------------------------------------------- OpenAI Responses


def _call_item(item: dict) -> ToolCall:
    """Turn a Responses *_call item into a ToolCall."""
    if "arguments" in item:
        args = item["arguments"]
    elif "input" in item:
        args = item["input"]
    else:
        # Built-in tools (web_search_call, local_shell_call ...) carry their own fields.
        skip = {"id", "type", "status", "call_id", "name"}
        args = {k: v for k, v in item.items() if k not in skip}
    return _tool_call(
        item.get("call_id") or item.get("id"), item.get("name") or item.get("type"), args
    )


def _responses_items(items: list) -> list[Message]:
    """Parse Responses items, merging consecutive assistant-side items into one turn."""
    msgs: list[Message] = []
    turn: Message | None = None  # the assistant turn being merged

    def assistant() -> Message:
        nonlocal turn
        if turn is None:
            turn = Message("assistant", raw=[])
            msgs.append(turn)
        return turn

    for item in items:
        if isinstance(item, str):
            msgs.append(Message("user", item, raw=item))
            turn = None
            continue
        if not isinstance(item, dict):
            raise _Malformed(f"input item is {type(item).__name__}, expected an object")
        kind = item.get("type")
        kind = kind if isinstance(kind, str) else None
        if kind == "message" or (kind is None and "role" in item):
            role = _role(item.get("role"), "assistant")
            text = _parts_text(item.get("content"))
            if role == "assistant":
                cur = assistant()
                cur.text = f"{cur.text}\n{text}" if cur.text else text
                cur.raw.append(item)
            else:
                msgs.append(Message(role, text, raw=item))
                turn = None
        elif kind == "reasoning":
            # Reasoning items never carry conversation text; keep them without splitting the turn.
            if turn is not None:
                turn.raw.append(item)
        elif kind is not None and kind.endswith("_call_output"):
            output = item.get("output")
            result = ToolResult(
                _opt_str(item.get("call_id") or item.get("id")),
                _parts_text(output) if isinstance(output, list | str | None) else _text(output),
            )
            msgs.append(Message("tool", tool_results=[result], raw=item))
            turn = None
        elif kind is not None and kind.endswith("_call"):
            cur = assistant()
            cur.tool_calls.append(_call_item(item))
            cur.raw.append(item)
        else:
            msgs.append(Message(kind or "unknown", raw=item))
            turn = None
    return msgs


def _responses_output(output: list) -> Message:
    """Merge all output items of one response into the assistant turn."""
    merged = Message("assistant", raw=output)
    texts: list[str] = []
    for msg in _responses_items(output):
        if msg.text:
            texts.append(msg.text)
        merged.tool_calls.extend(msg.tool_calls)
        merged.tool_results.extend(msg.tool_results)
    merged.text = "\n".join(texts)
    return merged


def _responses_stream(events: list) -> dict:
    """Take the final response object from Responses streaming events."""
    done_items: list = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        final = ev.get("type") in ("response.completed", "response.incomplete", "response.failed")
        if final and isinstance(ev.get("response"), dict):
            return ev["response"]
        if ev.get("type") == "response.output_item.done" and isinstance(ev.get("item"), dict):
            done_items.append(ev["item"])
    return {"output": done_items}


def _parse_openai_responses(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a Responses API request/response."""
    req = _as_dict(req, "request")
    msgs: list[Message] = []
    if req.get("instructions") is not None:
        msgs.append(Message("system", _parts_text(req["instructions"]), raw=req["instructions"]))
    inp = req.get("input")
    if isinstance(inp, str):
        msgs.append(Message("user", inp, raw=inp))
    else:
        msgs.extend(_responses_items(_as_list(inp, "input")))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = _responses_stream(resp)
    resp = _as_dict(resp, "response")
    ex.model = _model(resp.get("model"), req.get("model"), _url_model(url))
    if isinstance(resp.get("output"), list):
        ex.response = _responses_output(resp["output"])
    elif isinstance(resp.get("output_text"), str):
        ex.response = Message("assistant", resp["output_text"], raw=resp["output_text"])
    elif resp.get("output") is not None:
        raise _Malformed("response output is not a list")
    details = resp.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    ex.stop_reason = _opt_str(reason or resp.get("status"))
    u = _usage_dict(resp.get("usage"), "usage", ex)
    ex.usage = _usage(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))


# --------------------------------------------------------------------------- Anthropic


def _anthropic_message(content: Any, role: str, raw: Any) -> Message:
    """Parse Anthropic content (string or blocks) into a Message."""
    msg = Message(role, raw=raw)
    if not isinstance(content, list | dict):
        msg.text = _text(content)
        return msg
    texts: list[str] = []
    for block in [content] if isinstance(content, dict) else content:
        if not isinstance(block, dict):
            texts.append(_text(block))
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(_text(block.get("text")))
        elif kind in ("tool_use", "server_tool_use"):
            msg.tool_calls.append(
                _tool_call(block.get("id"), block.get("name"), block.get("input"))
            )
        elif kind == "tool_result" or (isinstance(kind, str) and kind.endswith("_tool_result")):
            inner = block.get("content")
            text = _parts_text(inner) if isinstance(inner, list | str | None) else _text(inner)
            msg.tool_results.append(
                ToolResult(_opt_str(block.get("tool_use_id")), text, bool(block.get("is_error")))
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            texts.append(f"[{kind or 'block'}]")
    msg.text = "\n".join(texts)
    if role == "user" and msg.tool_results and not msg.text.strip():
        msg.role = "tool"
    return msg


def _anthropic_stream(events: list) -> dict:
    """Assemble Anthropic message-stream events into one message."""
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type")
        if kind == "message_start" and isinstance(ev.get("message"), dict):
            message.update({k: v for k, v in ev["message"].items() if k != "content"})
        elif kind == "content_block_start" and isinstance(ev.get("content_block"), dict):
            blocks[ev.get("index", len(blocks))] = dict(ev["content_block"])
        elif kind == "content_block_delta" and isinstance(ev.get("delta"), dict):
            idx = ev.get("index", 0)
            block = blocks.setdefault(idx, {"type": "text", "text": ""})
            delta = ev["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = (block.get("text") or "") + (delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                partial[idx] = partial.get(idx, "") + (delta.get("partial_json") or "")
        elif kind == "message_delta":
            delta = ev.get("delta") or {}
            if delta.get("stop_reason") is not None:
                message["stop_reason"] = delta["stop_reason"]
            if isinstance(ev.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **ev["usage"]}
    for idx, text in partial.items():
        # Keep the raw string when the streamed JSON is broken so it is flagged, not lost.
        try:
            blocks[idx]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            blocks[idx]["input"] = text
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _parse_anthropic(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from an Anthropic messages request/response."""
    req = _as_dict(req, "request")
    msgs: list[Message] = []
    system = req.get("system")
    if system is not None and system != "" and system != []:
        msgs.append(Message("system", _parts_text(system), raw=system))
    for m in _as_list(req.get("messages"), "messages"):
        if not isinstance(m, dict):
            raise _Malformed(f"message is {type(m).__name__}, expected an object")
        msgs.append(_anthropic_message(m.get("content"), _role(m.get("role"), "user"), m))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = _anthropic_stream(resp)
    resp = _as_dict(resp, "response")
    ex.model = _model(resp.get("model"), req.get("model"), _url_model(url))
    if resp.get("type") != "error" and ("content" in resp or resp.get("type") == "message"):
        ex.response = _anthropic_message(
            resp.get("content"), _role(resp.get("role"), "assistant"), resp.get("content")
        )
    ex.stop_reason = _opt_str(resp.get("stop_reason"))
    u = _usage_dict(resp.get("usage"), "usage", ex)
    ex.usage = _usage(u.get("input_tokens"), u.get("output_tokens"))


# --------------------------------------------------------------------------- Gemini


def _pick(d: dict, camel: str, snake: str) -> Any:
    """Read a Gemini field that may be spelled camelCase or snake_case."""
    return d[camel] if camel in d else d.get(snake)


def _gemini_content(c: Any, default_role: str) -> Message:
    """Parse one Gemini Content object."""
    if isinstance(c, str):
        return Message(default_role, c, raw=c)
    if not isinstance(c, dict):
        raise _Malformed(f"content is {type(c).__name__}, expected an object")
    role = _role(c.get("role"), default_role)
    msg = Message(role, raw=c)
    texts: list[str] = []
    for part in _as_list(c.get("parts"), "parts"):
        if not isinstance(part, dict):
            texts.append(_text(part))
            continue
        if part.get("thought") is True:
            continue
        call = _pick(part, "functionCall", "function_call")
        response = _pick(part, "functionResponse", "function_response")
        if "text" in part:
            texts.append(_text(part["text"]))
        elif isinstance(call, dict):
            msg.tool_calls.append(_tool_call(call.get("id"), call.get("name"), call.get("args")))
        elif isinstance(response, dict):
            body = response.get("response")
            msg.tool_results.append(
                ToolResult(
                    _opt_str(response.get("id")),
                    body if isinstance(body, str) else canonical_json(body),
                    name=_opt_str(response.get("name")),
                )
            )
        elif isinstance(_pick(part, "executableCode", "executable_code"), dict):
            texts.append(_text(_pick(part, "executableCode", "executable_code").get("code")))
        elif isinstance(_pick(part, "codeExecutionResult", "code_execution_result"), dict):
            texts.append(
                _text(_pick(part, "codeExecutionResult", "code_execution_result").get("output"))
            )
        else:
            texts.append(f"[{next(iter(part), 'part')}]")
    msg.text = "\n".join(texts)
    if msg.role == "user" and msg.tool_results and not msg.text.strip():
        msg.role = "tool"
    return msg


def _gemini_stream(events: list) -> dict:
    """Merge streamGenerateContent chunks into one response."""
    parts: list[dict] = []
    out: dict[str, Any] = {}
    finish = None
    for ev in events:
        if not isinstance(ev, dict):
            continue
        for key in ("usageMetadata", "modelVersion", "promptFeedback"):
            if key in ev:
                out[key] = ev[key]
        cands = ev.get("candidates")
        if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
            continue
        finish = cands[0].get("finishReason") or finish
        content = cands[0].get("content")
        chunk_parts = content.get("parts") if isinstance(content, dict) else None
        for part in chunk_parts if isinstance(chunk_parts, list) else []:
            if not isinstance(part, dict):
                continue
            if (
                "text" in part
                and parts
                and "text" in parts[-1]
                and bool(part.get("thought")) == bool(parts[-1].get("thought"))
            ):
                parts[-1] = {**parts[-1], "text": _text(parts[-1]["text"]) + _text(part["text"])}
            else:
                parts.append(part)
    out["candidates"] = [{"content": {"role": "model", "parts": parts}, "finishReason": finish}]
    return out


def _parse_gemini(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a Gemini generateContent request/response."""
    req = _as_dict(req, "request")
    msgs: list[Message] = []
    system = _pick(req, "systemInstruction", "system_instruction")
    if system is not None:
        sys_msg = _gemini_content(system, "system")
        sys_msg.role = "system"
        msgs.append(sys_msg)
    for c in _as_list(req.get("contents"), "contents"):
        msgs.append(_gemini_content(c, "user"))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = _gemini_stream(resp)
    resp = _as_dict(resp, "response")
    req_model = req.get("model")
    if isinstance(req_model, str):
        req_model = req_model.removeprefix("models/")
    ex.model = _model(resp.get("modelVersion"), req_model, _url_model(url))
    cands = _as_list(resp.get("candidates"), "candidates")
    if cands:
        c0 = _as_dict(cands[0], "candidates[0]")
        content = c0.get("content")
        ex.response = (
            _gemini_content(content, "assistant")
            if content is not None
            else Message("assistant", raw=c0)
        )
        ex.stop_reason = _opt_str(c0.get("finishReason"))
    else:
        feedback = resp.get("promptFeedback")
        if isinstance(feedback, dict):
            ex.stop_reason = _opt_str(feedback.get("blockReason"))
    u = _usage_dict(resp.get("usageMetadata"), "usageMetadata", ex)
    ex.usage = _usage(
        u.get("promptTokenCount"), u.get("candidatesTokenCount"), u.get("totalTokenCount")
    )


# --------------------------------------------------------------------------- entry point

_PARSERS: dict[str, Callable[[Any, Any, str | None, Exchange], None]] = {
    "openai-chat": _parse_openai_chat,
    "openai-responses": _parse_openai_responses,
    "anthropic": _parse_anthropic,
    "gemini": _parse_gemini,
}


def _unknown(request: Any, response: Any, req: Any, resp: Any, problems: list[str]) -> Exchange:
    """Build the fallback exchange that keeps both raw bodies."""
    model = None
    for body in (resp, req):
        if isinstance(body, dict):
            model = model or _model(body.get("model"), body.get("modelVersion"))
    return Exchange("unknown", model, [], None, {}, request, response, None, problems)


def normalise(request: Any, response: Any, url: str | None = None) -> Exchange:
    """Normalise one recorded request/response into an Exchange (never raises)."""
    req: Any = None
    resp: Any = None
    provider = "unknown"
    try:
        req, resp = _load(request), _load(response)
        provider = _detect(req, resp, url)
        if provider == "unknown":
            return _unknown(request, response, req, resp, [])
        ex = Exchange(provider, None, [], None, {}, request, response)
        problem = _error_problem(resp)
        if problem:
            ex.problems.append(problem)
            resp = None
        elif resp is not None and not isinstance(resp, dict | list):
            ex.problems.append(f"response body is not JSON ({type(resp).__name__})")
            resp = None
        _PARSERS[provider](req, resp, url, ex)
        return ex
    except _Malformed as exc:
        return _unknown(request, response, req, resp, [f"malformed {provider} payload: {exc}"])
    except Exception as exc:
        # Recordings are untrusted input: any surprise degrades to unknown, never an exception.
        return _unknown(
            request, response, req, resp, [f"could not parse {provider} payload: {exc!r}"]
        )
