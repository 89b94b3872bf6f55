"""The one redactor every stored log, header and message goes through."""

from __future__ import annotations

from typing import Any

from cassettes_app.secrets import (
    is_credential_header,
    is_placeholder,
    redact_text,
    redact_value,
)

__all__ = ["redact_header", "redact_text"]


def redact_header(name: str, value: str) -> str:
    """A header value as we store it: credential headers never keep their value."""
    if is_credential_header(name):
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in {"bearer", "basic", "token"}:
            return value if is_placeholder(token) else f"{scheme} {redact_value(token)}"
        return value if is_placeholder(value) else redact_value(value)
    return redact_text(value)


def json_storable(value: Any) -> Any:
    """`value` with NUL characters dropped from every string (keys too): PostgreSQL's JSON
    cannot hold U+0000, and output or an answer from outside may carry one."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {json_storable(k): json_storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_storable(v) for v in value]
    return value
