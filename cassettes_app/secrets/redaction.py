"""Redacting credentials out of text and turn messages."""

from __future__ import annotations

import json
from typing import Any

from cassettes_app.secrets.profiles import TextProfile
from cassettes_app.secrets.rules import LEAK, _as_text, redact_value
from cassettes_app.secrets.scanning import _find


def redact_text(text: str, *, profile: TextProfile | None = None) -> str:
    """Replace every key and credential value in text with its redacted form.

    `profile` (optional) is `text_profile` of text or of a text holding it literally (say,
    the file a body was cut from): rules it rules out are skipped, and an empty profile
    returns text as is.
    """
    if not text:
        return text
    text = _as_text(text)
    if profile is not None and profile.empty:
        return text
    spans = [s for s in _find(text, redact=True, profile=profile) if s.status == LEAK]
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for s in spans:
        out.append(text[pos : s.start])
        out.append(redact_value(text[s.start : s.end]))
        pos = s.end
    out.append(text[pos:])
    return "".join(out)


def redact_message(
    message: dict[str, Any], *, profile: TextProfile | None = None
) -> dict[str, Any]:
    """A turn's message dict (text, tool calls, tool results) with every credential redacted.

    `profile`: that of a text holding every string of the message literally (see
    `redact_text`); None runs every rule.
    """
    if profile is not None and profile.empty:
        return message
    out = dict(message)
    out["text"] = redact_text(out.get("text") or "", profile=profile)
    out["tool_results"] = [
        {**r, "content": redact_text(str(r.get("content") or ""), profile=profile)}
        for r in out.get("tool_results") or []
    ]
    out["tool_calls"] = [
        {**call, "arguments": _redact_json(call.get("arguments"), profile)}
        for call in out.get("tool_calls") or []
    ]
    return out


def _redact_json(value: Any, profile: TextProfile | None, depth: int = 0) -> Any:
    """Every string inside a JSON value redacted (keys included); a deep rest as redacted text."""
    if isinstance(value, str):
        return redact_text(value, profile=profile)
    if depth > 50:
        return redact_text(json.dumps(value, ensure_ascii=False, default=str), profile=profile)
    if isinstance(value, dict):
        return {
            redact_text(str(k), profile=profile): _redact_json(v, profile, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact_json(v, profile, depth + 1) for v in value]
    return value
