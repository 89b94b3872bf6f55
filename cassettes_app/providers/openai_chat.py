"""OpenAI chat completions: messages, and chat.completion.chunk streams folded into one reply."""

from __future__ import annotations

from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.common import (
    Exchange,
    Joiner,
    Malformed,
    Message,
    ToolResult,
    as_dict,
    as_list,
    as_text,
    first_model,
    make_tool_call,
    make_usage,
    map_role,
    opt_str,
    parts_text,
    url_model,
    usage_obj,
)

__all__ = ["fold_events", "fold_stream", "parse"]


def _chat_message(m: Any, default_role: str = "user") -> Message:
    """Parse one chat-completions message."""
    if not isinstance(m, dict):
        raise Malformed(f"message is {type(m).__name__}, expected an object")
    raw_role = m.get("role")
    role = map_role(raw_role, default_role)
    msg = Message(role=role, raw=m)
    content = m.get("content")
    if role == "tool":
        call_id = m.get("tool_call_id")
        msg.tool_results.append(
            ToolResult(opt_str(call_id), parts_text(content), name=opt_str(m.get("name")))
        )
    else:
        msg.text = parts_text(content)
    if msg.role == "assistant" and not msg.text and m.get("refusal"):
        msg.text = as_text(m.get("refusal"))
    for tc in as_list(m.get("tool_calls"), "tool_calls"):
        if not isinstance(tc, dict):
            raise Malformed("tool call is not an object")
        fn = tc.get("function") if "function" in tc else tc.get("custom")
        fn = as_dict(fn, "tool_calls[].function")
        args = fn["arguments"] if "arguments" in fn else fn.get("input")
        msg.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name"), args))
    legacy = m.get("function_call")
    if legacy is not None:
        legacy = as_dict(legacy, "function_call")
        msg.tool_calls.append(make_tool_call(None, legacy.get("name"), legacy.get("arguments")))
    return msg


# Two folds of one stream, kept side by side on purpose. `fold_stream` rebuilds the whole
# response object when a recorded body is decoded (for storage and the evidence pages, with
# problems); `fold_events` is what `normalise` reads a raw event list with (a trace hop, or
# a JSON list of chunks that was never decoded as a body). They disagree on odd streams:
# a first chunk without `model`, refusal deltas, choices other than index 0,
# non-object tool-call pieces.
# Each caller's results are pinned by tests and reports, so merging them would change one.


def fold_events(events: list) -> dict:
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


_CHUNK_FIELDS = ("id", "created", "model", "system_fingerprint", "service_tier")


def fold_stream(chunks: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold chat.completion.chunk deltas into one chat.completion."""
    out: dict[str, Any] = {"id": None, "object": "chat.completion", "created": None, "model": None}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    usage = None
    joiner = Joiner()
    for chunk in chunks:
        # One lookup per field and per delta key: a stream has a chunk per few tokens.
        for key in _CHUNK_FIELDS:
            value = chunk.get(key)
            if value is not None:
                out[key] = value
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index")
            if not isinstance(index, int):
                index = 0
            slot = choices.get(index)
            if slot is None:
                slot = choices[index] = {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "logprobs": None,
                    "finish_reason": None,
                }
            message = slot["message"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            role = delta.get("role")
            if isinstance(role, str):
                message["role"] = role
            content = delta.get("content")
            if isinstance(content, str):
                joiner.add(message, "content", content)
            refusal = delta.get("refusal")
            if isinstance(refusal, str):
                joiner.add(message, "refusal", refusal)
            if isinstance(delta.get("function_call"), dict):
                legacy = message.setdefault("function_call", {"name": "", "arguments": ""})
                joiner.add(legacy, "name", delta["function_call"].get("name"))
                joiner.add(legacy, "arguments", delta["function_call"].get("arguments"))
            pieces = delta.get("tool_calls") or []
            slot_calls = calls.setdefault(index, {}) if pieces else {}
            for position, piece in enumerate(pieces):
                if not isinstance(piece, dict):
                    continue
                call_index = safeload.int_at(piece, "index", position)
                call = slot_calls.setdefault(
                    call_index,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                if isinstance(piece.get("type"), str):
                    call["type"] = piece["type"]
                function = safeload.object_at(piece, "function")
                joiner.add(call["function"], "name", function.get("name"))
                joiner.add(call["function"], "arguments", function.get("arguments"))
            finish_reason = choice.get("finish_reason")
            if finish_reason is not None:
                slot["finish_reason"] = finish_reason
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                merged = slot["logprobs"] or {"content": []}
                merged["content"].extend(logprobs["content"])
                slot["logprobs"] = merged
    joiner.finish()
    result = []
    for index in sorted(choices):
        slot = choices[index]
        if calls.get(index):
            slot["message"]["tool_calls"] = [calls[index][k] for k in sorted(calls[index])]
        result.append(slot)
    out["choices"] = result
    out["usage"] = usage
    return out, []


def parse(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a chat-completions request/response."""
    req = as_dict(req, "request")
    ex.request_messages = [_chat_message(m) for m in as_list(req.get("messages"), "messages")]
    if isinstance(resp, list):
        resp = fold_events(resp)
    resp = as_dict(resp, "response")
    ex.model = first_model(resp.get("model"), req.get("model"), url_model(url))
    choices = as_list(resp.get("choices"), "choices")
    if choices:
        c0 = as_dict(choices[0], "choices[0]")
        if c0.get("message") is not None:
            ex.response = _chat_message(c0["message"], default_role="assistant")
        elif "text" in c0:
            ex.response = Message("assistant", as_text(c0["text"]), raw=c0)
        ex.stop_reason = opt_str(c0.get("finish_reason"))
    u = usage_obj(resp.get("usage"), "usage", ex)
    ex.usage = make_usage(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens"))
