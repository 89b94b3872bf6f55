"""NDJSON streams (`application/x-ndjson`, one JSON object per line): Ollama's, Cohere v1's.

Ollama's `/api/chat` and `/api/generate` send chunks with `message.content` (or `response`)
and `done`; the last one (`done: true`) carries the counts. Folded here into the one object
the same call answers unstreamed, so the turn's answer is the whole text.
"""

from __future__ import annotations

from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.cohere import fold_v1, is_v1


def parse_ndjson(text: str, limits: ParseLimits) -> tuple[list[Any], list[str], bool]:
    """(objects, problems, capped): each non-empty line loaded; a bad line is a problem."""
    load = safeload.json_loader(limits)
    objects: list[Any] = []
    problems: list[str] = []
    lines = text.splitlines()
    capped = len(lines) > limits.max_events
    for number, line in enumerate(lines[: limits.max_events], start=1):
        if not line.strip():
            continue
        try:
            objects.append(load(line))
        except (safeload.LoadError, ValueError, RecursionError) as exc:
            if len(problems) < 20:
                problems.append(f"ndjson line {number}: {getattr(exc, 'message', exc)}")
    if capped:
        problems.append(f"stream has over {limits.max_events} lines (max_events); kept the first")
    return objects, problems, capped


def is_ollama(chunks: list[Any]) -> bool:
    head = [c for c in chunks[:20] if isinstance(c, dict)]
    return bool(head) and all("done" in c and ("message" in c or "response" in c) for c in head)


def fold_ollama(chunks: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The unstreamed answer: text joined, tool calls gathered, the final chunk's fields kept."""
    text: list[str] = []
    tool_calls: list[Any] = []
    role = "assistant"
    chat = any("message" in c for c in chunks)
    for chunk in chunks:
        message = chunk.get("message")
        if isinstance(message, dict):
            role = message.get("role") or role
            if isinstance(message.get("content"), str):
                text.append(message["content"])
            if isinstance(message.get("tool_calls"), list):
                tool_calls += message["tool_calls"]
        elif isinstance(chunk.get("response"), str):
            text.append(chunk["response"])
    final = next((c for c in reversed(chunks) if c.get("done") is True), None)
    problems = [] if final else ["stream ends before a chunk with done: true (cut off?)"]
    out = {k: v for k, v in (final or chunks[-1]).items() if k not in ("message", "response")}
    out["done"] = final is not None
    if chat:
        out["message"] = {"role": role, "content": "".join(text)}
        if tool_calls:
            out["message"]["tool_calls"] = tool_calls
    else:
        out["response"] = "".join(text)
    return out, problems


def decode_ndjson(text: str, limits: ParseLimits) -> tuple[Any, str, bool, list[str]]:
    """(json, note, truncated, problems) like `sse.decode_stream`: folded when it is Ollama's,
    else the list of objects."""
    objects, problems, capped = parse_ndjson(text, limits)
    note = f"ndjson: {len(objects)} lines"
    dicts = [o for o in objects if isinstance(o, dict)]
    if dicts and is_ollama(dicts):
        folded, more = fold_ollama(dicts)
        return folded, note + " (ollama stream, folded)", capped, problems + more
    if dicts and is_v1(dicts):
        folded, more = fold_v1(dicts)
        return folded, note + " (cohere stream, folded)", capped, problems + more
    return objects, note, capped, problems
