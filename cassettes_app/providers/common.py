"""What every provider module shares: the turn model and small payload readers."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "Exchange",
    "Joiner",
    "Malformed",
    "Message",
    "ToolCall",
    "ToolResult",
    "as_dict",
    "as_list",
    "as_text",
    "canonical_json",
    "error_problem",
    "first_model",
    "make_tool_call",
    "make_usage",
    "map_role",
    "opt_str",
    "parts_text",
    "url_model",
    "usage_obj",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool/function call a model asked for (agent logs and normalised exchanges)."""

    id: str | None
    name: str | None
    arguments: Any
    # The arguments as written when they were a string; None when given as an object.
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


class Malformed(ValueError):
    """A payload whose structure does not fit the detected provider."""


def canonical_json(obj: Any) -> str:
    """Serialise obj deterministically (sorted keys, compact, unicode kept)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def as_text(value: Any) -> str:
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


def opt_str(value: Any) -> str | None:
    """Return value as a string, or None when absent."""
    if value is None:
        return None
    return value if isinstance(value, str) else as_text(value)


def as_list(value: Any, what: str) -> list:
    """Return a list container; None is empty, any other type is malformed."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise Malformed(f"{what} is {type(value).__name__}, expected a list")


def as_dict(value: Any, what: str) -> dict:
    """Return a dict; None is empty, any other type is malformed."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise Malformed(f"{what} is {type(value).__name__}, expected an object")


_TEXT_PART_TYPES = {None, "text", "input_text", "output_text"}


def parts_text(content: Any) -> str:
    """Join the text of a string or list-of-parts content; other parts become [type] markers."""
    if content is None or isinstance(content, str):
        return as_text(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return as_text(content)
    out: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            out.append(as_text(part))
            continue
        kind = part.get("type")
        if "text" in part and kind in _TEXT_PART_TYPES:
            out.append(as_text(part["text"]))
        elif kind == "refusal":
            out.append(as_text(part.get("refusal")))
        elif kind in ("thinking", "redacted_thinking", "reasoning"):
            continue
        else:
            out.append(f"[{kind or 'part'}]")
    return "\n".join(out)


def make_tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """Build a ToolCall, parsing string arguments as JSON when possible."""
    if arguments is None:
        # Gemini omits args for parameterless calls.
        return ToolCall(opt_str(call_id), as_text(name), {}, None, True)
    if isinstance(arguments, str):
        if not arguments.strip():
            # An empty argument string is how several SDKs spell "no arguments".
            return ToolCall(opt_str(call_id), as_text(name), {}, arguments, True)
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return ToolCall(opt_str(call_id), as_text(name), arguments, arguments, False)
        return ToolCall(opt_str(call_id), as_text(name), parsed, arguments, True)
    return ToolCall(opt_str(call_id), as_text(name), arguments, None, True)


def make_usage(inp: Any, out: Any, total: Any = None) -> dict:
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


def map_role(value: Any, default: str) -> str:
    """Map a provider role onto system|user|assistant|tool; unknown roles are kept verbatim."""
    if value is None:
        return default
    role = as_text(value)
    return _ROLE_MAP.get(role.lower(), role)


def usage_obj(value: Any, what: str, ex: Exchange) -> dict:
    """Return a usage object; a wrong type is noted, not fatal, since usage is only metadata."""
    if isinstance(value, dict):
        return value
    if value is not None:
        ex.problems.append(f"{what} is {type(value).__name__}, expected an object")
    return {}


def first_model(*candidates: Any) -> str | None:
    """Return the first non-empty string candidate."""
    for value in candidates:
        if isinstance(value, str) and value:
            return value
    return None


_URL_MODEL_RES = (
    re.compile(r"/models/([^/:]+)"),  # Gemini, Vertex AI: .../models/<model>:generateContent
    re.compile(r"/model/([^/]+)/(?:invoke|converse)"),  # Bedrock: /model/<model>/invoke
)


def url_model(url: str | None) -> str | None:
    """Read the model name from a URL path, for APIs that put it there instead of the body."""
    if not isinstance(url, str):
        return None
    path = unquote(urlsplit(url).path)
    for pattern in _URL_MODEL_RES:
        found = pattern.search(path)
        if found:
            return found.group(1)
    return None


def error_problem(resp: Any) -> str | None:
    """Describe a provider error body, if resp is one."""
    if isinstance(resp, dict) and "error" in resp:
        err = resp["error"]
        if isinstance(err, dict):
            return f"provider error: {as_text(err.get('message') or err.get('type') or err)}"
        return f"provider error: {as_text(err)}"
    return None


class Joiner:
    """Collects streamed string pieces and joins them once (repeated `+=` is quadratic)."""

    def __init__(self) -> None:
        self._parts: dict[tuple[int, str], tuple[dict[str, Any], str, list[str]]] = {}

    def add(self, target: dict[str, Any], key: str, piece: Any) -> None:
        if not isinstance(piece, str):
            return
        entry = self._parts.get((id(target), key))
        if entry is None:
            current = target.get(key)
            entry = (target, key, [current] if isinstance(current, str) else [])
            self._parts[(id(target), key)] = entry
        entry[2].append(piece)

    def set(self, target: dict[str, Any], key: str, value: str) -> None:
        self._parts.pop((id(target), key), None)
        target[key] = value

    def finish(self) -> None:
        for target, key, parts in self._parts.values():
            target[key] = "".join(parts)
        self._parts.clear()
