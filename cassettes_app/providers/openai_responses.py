"""OpenAI Responses API: input/output items, and response.* event streams folded into one."""

from __future__ import annotations

import json
from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.common import (
    Exchange,
    Joiner,
    Malformed,
    Message,
    ToolCall,
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
    return make_tool_call(
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
            raise Malformed(f"input item is {type(item).__name__}, expected an object")
        kind = item.get("type")
        kind = kind if isinstance(kind, str) else None
        if kind == "message" or (kind is None and "role" in item):
            role = map_role(item.get("role"), "assistant")
            text = parts_text(item.get("content"))
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
                opt_str(item.get("call_id") or item.get("id")),
                parts_text(output) if isinstance(output, list | str | None) else as_text(output),
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


# Two folds of one stream, kept side by side on purpose. `fold_stream` rebuilds the whole
# response object when a recorded body is decoded (for storage and the evidence pages, with
# problems); `fold_events` is what `normalise` reads a raw event list with (a trace hop, or
# a JSON list of chunks that was never decoded as a body). They disagree on odd streams:
# a completed event with an empty `output`, text and argument deltas without
# output_item events, a stream with no final event.
# Each caller's results are pinned by tests and reports, so merging them would change one.


def fold_events(events: list) -> dict:
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


def fold_stream(events: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold Responses API stream events into one response object."""
    final: dict[str, Any] | None = None
    base: dict[str, Any] = {"object": "response", "status": "incomplete"}
    items: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    joiner = Joiner()

    def item_at(event: dict[str, Any], default_type: str) -> dict[str, Any]:
        index = safeload.int_at(event, "output_index", 0)
        return items.setdefault(index, {"type": default_type})

    def part_at(item: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
        content = item.setdefault("content", [])
        index = safeload.int_at(event, "content_index", 0)
        while len(content) <= index:
            content.append({"type": "output_text", "text": "", "annotations": []})
        return content[index]

    for event in events:
        kind = event.get("type")
        response = event.get("response")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            if isinstance(response, dict):
                final = response
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            if isinstance(response, dict):
                base = dict(response)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict):
                index = safeload.int_at(event, "output_index", 0)
                items[index] = json.loads(json.dumps(item))
        elif kind == "response.content_part.added":
            part = event.get("part")
            item = item_at(event, "message")
            target = part_at(item, event)
            if isinstance(part, dict):
                target.update(part)
        elif kind == "response.output_text.delta":
            item = item_at(event, "message")
            item.setdefault("role", "assistant")
            joiner.add(part_at(item, event), "text", event.get("delta"))
        elif kind == "response.output_text.done" and isinstance(event.get("text"), str):
            joiner.set(part_at(item_at(event, "message"), event), "text", event["text"])
        elif kind == "response.function_call_arguments.delta":
            joiner.add(item_at(event, "function_call"), "arguments", event.get("delta"))
        elif kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                joiner.set(item_at(event, "function_call"), "arguments", event["arguments"])
        elif kind == "error":
            problems.append(f"stream error event: {event.get('message') or event.get('code')}")
    joiner.finish()
    if final is not None:
        if not final.get("output") and items:
            final = {**final, "output": [items[k] for k in sorted(items)]}
        return final, problems
    problems.append("response stream has no response.completed event")
    return {**base, "output": [items[k] for k in sorted(items)]}, problems


def parse(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a Responses API request/response."""
    req = as_dict(req, "request")
    msgs: list[Message] = []
    if req.get("instructions") is not None:
        msgs.append(Message("system", parts_text(req["instructions"]), raw=req["instructions"]))
    inp = req.get("input")
    if isinstance(inp, str):
        msgs.append(Message("user", inp, raw=inp))
    else:
        msgs.extend(_responses_items(as_list(inp, "input")))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = fold_events(resp)
    resp = as_dict(resp, "response")
    ex.model = first_model(resp.get("model"), req.get("model"), url_model(url))
    if isinstance(resp.get("output"), list):
        ex.response = _responses_output(resp["output"])
    elif isinstance(resp.get("output_text"), str):
        ex.response = Message("assistant", resp["output_text"], raw=resp["output_text"])
    elif resp.get("output") is not None:
        raise Malformed("response output is not a list")
    details = resp.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    ex.stop_reason = opt_str(reason or resp.get("status"))
    u = usage_obj(resp.get("usage"), "usage", ex)
    ex.usage = make_usage(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))
