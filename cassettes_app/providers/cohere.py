"""Cohere chat streams, folded into the answer the same call gives unstreamed.

v2 (`/v2/chat`, SSE): message-start, content-delta (`delta.message.content.text`),
tool-call-start/delta, message-end (`delta.finish_reason`, `delta.usage`). v1 (`/v1/chat`,
NDJSON): stream-start, text-generation (`text`), tool-calls-generation, stream-end (whose
`response` is the whole answer).
"""

from __future__ import annotations

from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits

V2_TYPES = frozenset(
    {
        "message-start",
        "content-start",
        "content-delta",
        "content-end",
        "tool-plan-delta",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-end",
        "citation-start",
        "message-end",
    }
)
V1_TYPES = frozenset(
    {"stream-start", "text-generation", "tool-calls-generation", "stream-end", "search-results"}
)


def is_v2(chunks: list[Any]) -> bool:
    """SSE payloads of a Cohere v2 chat stream."""
    return any(isinstance(c, dict) and c.get("type") in V2_TYPES for c in chunks[:20])


def is_v1(chunks: list[Any]) -> bool:
    """NDJSON chunks of a Cohere v1 chat stream."""
    head = [c for c in chunks[:20] if isinstance(c, dict)]
    return bool(head) and all(c.get("event_type") in V1_TYPES for c in head)


def fold_stream(chunks: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """A v2 stream as one v2 chat response: {id, message, finish_reason, usage}."""
    del limits
    text: list[str] = []
    plan: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    ended = False
    for chunk in chunks:
        kind = chunk.get("type")
        delta = safeload.object_at(chunk, "delta")
        message = safeload.object_at(delta, "message")
        if kind == "message-start" and chunk.get("id"):
            out["id"] = chunk["id"]
        elif kind == "content-delta":
            content = safeload.object_at(message, "content")
            if isinstance(content.get("text"), str):
                text.append(content["text"])
        elif kind == "tool-plan-delta" and isinstance(message.get("tool_plan"), str):
            plan.append(message["tool_plan"])
        elif kind in ("tool-call-start", "tool-call-delta"):
            index = safeload.int_at(chunk, "index", len(calls))
            call = safeload.object_at(message, "tool_calls")
            slot = calls.setdefault(
                index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
            )
            function = safeload.object_at(call, "function")
            slot["id"] = call.get("id") or slot["id"]
            slot["function"]["name"] = function.get("name") or slot["function"]["name"]
            if isinstance(function.get("arguments"), str):
                slot["function"]["arguments"] += function["arguments"]
        elif kind == "message-end":
            ended = True
            for key in ("finish_reason", "usage"):
                if key in delta:
                    out[key] = delta[key]
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "".join(text)}],
    }
    if plan:
        reply["tool_plan"] = "".join(plan)
    if calls:
        reply["tool_calls"] = [calls[i] for i in sorted(calls)]
    out["message"] = reply
    return out, [] if ended else ["stream ends before message-end (cut off?)"]


def fold_v1(chunks: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """A v1 stream as one v1 chat response: stream-end's `response`, else the joined text."""
    end = next((c for c in reversed(chunks) if c.get("event_type") == "stream-end"), None)
    if end is not None and isinstance(end.get("response"), dict):
        return end["response"], []
    text = "".join(
        c["text"]
        for c in chunks
        if c.get("event_type") == "text-generation" and isinstance(c.get("text"), str)
    )
    out: dict[str, Any] = {"text": text}
    for chunk in chunks:
        if chunk.get("event_type") == "tool-calls-generation":
            out["tool_calls"] = chunk.get("tool_calls")
        if chunk.get("event_type") == "stream-start" and chunk.get("generation_id"):
            out["generation_id"] = chunk["generation_id"]
    if end is not None:
        out["finish_reason"] = end.get("finish_reason")
        return out, []
    return out, ["stream ends before stream-end (cut off?)"]
