"""HTTP headers as the recorders store them, read into (name, value) pairs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any


def scalar_text(value: Any) -> str:
    """Render a loaded scalar as the text a header or field most likely had."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def header_pairs(raw: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """Normalise dict-of-lists, dict or list-of-pairs headers; also name the coerced ones."""
    pairs: list[tuple[str, str]] = []
    coerced: list[str] = []

    def add(name: Any, value: Any) -> None:
        # Bytes are a recorder's explicit binary value (vcrpy's !!binary for botocore's
        # header bytes), not a YAML 1.1 coercion: read as their text, nothing to report.
        if not isinstance(value, str | bytes):
            coerced.append(scalar_text(name))
        pairs.append((scalar_text(name), scalar_text(value)))

    if raw is None:
        return pairs, coerced
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            if isinstance(value, list | tuple):
                for item in value:
                    add(name, item)
            else:
                add(name, value)
    elif isinstance(raw, Iterable) and not isinstance(raw, str | bytes):
        for item in raw:
            if isinstance(item, Mapping) and "name" in item:
                value = item.get("value")
                # Polly.JS 1.x writes repeated headers as one entry with a list of values.
                for one in value if isinstance(value, list) else [value]:
                    add(item.get("name"), one)
            elif isinstance(item, list | tuple) and len(item) == 2:
                add(item[0], item[1])
    return pairs, coerced


def get_header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """Return the first value of a header, matched case-insensitively."""
    wanted = name.lower()
    for key, value in headers:
        if key.lower() == wanted:
            return value
    return None
