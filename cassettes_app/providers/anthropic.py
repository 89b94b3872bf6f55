"""Anthropic messages: content blocks, and message-stream events folded into one message."""

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


def _anthropic_message(content: Any, role: str, raw: Any) -> Message:
    """Parse Anthropic content (string or blocks) into a Message."""
    msg = Message(role, raw=raw)
    if not isinstance(content, list | dict):
        msg.text = as_text(content)
        return msg
    texts: list[str] = []
    for block in [content] if isinstance(content, dict) else content:
        if not isinstance(block, dict):
            texts.append(as_text(block))
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(as_text(block.get("text")))
        elif kind in ("tool_use", "server_tool_use"):
            msg.tool_calls.append(
                make_tool_call(block.get("id"), block.get("name"), block.get("input"))
            )
        elif kind == "tool_result" or (isinstance(kind, str) and kind.endswith("_tool_result")):
            inner = block.get("content")
            text = parts_text(inner) if isinstance(inner, list | str | None) else as_text(inner)
            msg.tool_results.append(
                ToolResult(opt_str(block.get("tool_use_id")), text, bool(block.get("is_error")))
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            texts.append(f"[{kind or 'block'}]")
    msg.text = "\n".join(texts)
    if role == "user" and msg.tool_results and not msg.text.strip():
        msg.role = "tool"
    return msg


# Two folds of one stream, kept side by side on purpose. `fold_stream` rebuilds the whole
# response object when a recorded body is decoded (for storage and the evidence pages, with
# problems); `fold_events` is what `normalise` reads a raw event list with (a trace hop, or
# a JSON list of chunks that was never decoded as a body). They disagree on odd streams:
# content blocks in `message_start`, deltas for a block that never started, tool
# input that only the safe loader refuses.
# Each caller's results are pinned by tests and reports, so merging them would change one.


def fold_events(events: list) -> dict:
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


def fold_stream(events: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold an Anthropic message stream into one message object."""
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    problems: list[str] = []
    joiner = Joiner()

    def finish_block(index: int) -> None:
        if index not in partial:
            return
        text = "".join(partial.pop(index))
        block = blocks.setdefault(index, {"type": "tool_use"})
        if not text.strip():
            block["input"] = {}
            return
        try:
            block["input"] = safeload.load_json(text, limits)
        except safeload.LoadError as exc:
            block["input"] = text
            problems.append(f"tool_use block {index}: input is not valid JSON ({exc.message})")

    for event in events:
        kind = event.get("type")
        index = safeload.int_at(event, "index", 0)
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            for position, block in enumerate(message.get("content") or []):
                if isinstance(block, dict):
                    blocks[position] = dict(block)
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = dict(event["content_block"])
            blocks[index] = block
            if block.get("type") in ("tool_use", "server_tool_use"):
                partial[index] = []
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta = event["delta"]
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                joiner.add(block, "text", delta.get("text"))
            elif delta_type == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
            elif delta_type == "thinking_delta":
                joiner.add(block, "thinking", delta.get("thinking"))
            elif delta_type == "signature_delta":
                block["signature"] = delta.get("signature")
            elif delta_type == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            finish_block(index)
        elif kind == "message_delta":
            delta = safeload.object_at(event, "delta")
            message.update(delta)
            if isinstance(event.get("usage"), dict):
                usage = dict(message.get("usage") or {})
                usage.update(event["usage"])
                message["usage"] = usage
        elif kind == "error":
            error = event.get("error")
            message["error"] = error
            problems.append(f"stream error event: {error}")
    for index in list(partial):
        finish_block(index)
    joiner.finish()
    message["content"] = [blocks[k] for k in sorted(blocks)]
    return message, problems


def parse(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from an Anthropic messages request/response."""
    req = as_dict(req, "request")
    msgs: list[Message] = []
    system = req.get("system")
    if system is not None and system != "" and system != []:
        msgs.append(Message("system", parts_text(system), raw=system))
    for m in as_list(req.get("messages"), "messages"):
        if not isinstance(m, dict):
            raise Malformed(f"message is {type(m).__name__}, expected an object")
        msgs.append(_anthropic_message(m.get("content"), map_role(m.get("role"), "user"), m))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = fold_events(resp)
    resp = as_dict(resp, "response")
    ex.model = first_model(resp.get("model"), req.get("model"), url_model(url))
    if resp.get("type") != "error" and ("content" in resp or resp.get("type") == "message"):
        ex.response = _anthropic_message(
            resp.get("content"), map_role(resp.get("role"), "assistant"), resp.get("content")
        )
    ex.stop_reason = opt_str(resp.get("stop_reason"))
    u = usage_obj(resp.get("usage"), "usage", ex)
    ex.usage = make_usage(u.get("input_tokens"), u.get("output_tokens"))
