"""The top-level keys of a JSON head that may be cut anywhere (the sniffers see 256 KiB).

A whole document parses at C speed; a cut one is read by a tolerant tokenizer that finds
strings and brackets with str.find, so a head cut inside a long string stays cheap.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

# The tokens of a JSON head: a string (with `:` after it when it is a key) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"(\s*+:)?|\{|\}|\[|\]')


_KEY_COLON = re.compile(r"\s*+:")


def _tokens(text: str) -> Iterator[tuple[int, int, int]]:
    """`_TOKEN.finditer(text)` as (start, end, end of the string literal or -1 if none).

    The same matches, found with str.find (memchr) instead of re stepping through every
    character: a head cut inside a long string costs a few passes, not one step per
    character. Where no string can close (no `"` left, or a backslash before a line end or
    the end), the scan goes on from the next character, inside the string, as re's does.
    """
    find = text.find
    size = len(text)
    marks = '"{}[]'
    nxt = [find(c) for c in marks]
    quote = backslash = -1  # next `"` and `\\` at or after the string scan's position
    # A string that cannot close fails at the same place from every later `"` before that
    # place (each such `"` was escaped, so backslash runs pair up alike): no rescans.
    dead_until = -1
    pos = 0
    while True:
        at = -1
        for i, mark in enumerate(marks):
            if 0 <= nxt[i] < pos:
                nxt[i] = find(mark, pos)
            if nxt[i] >= 0 and (at < 0 or nxt[i] < at):
                at = nxt[i]
        if at < 0:
            return
        if text[at] != '"':
            yield at, at + 1, -1
            pos = at + 1
            continue
        close = -1
        if at >= dead_until:
            j = at + 1
            while True:
                if quote < j:
                    quote = find('"', j)
                    quote = size if quote < 0 else quote
                if backslash < j:
                    backslash = find("\\", j)
                    backslash = size if backslash < 0 else backslash
                if backslash < quote:
                    if backslash + 1 >= size or text[backslash + 1] == "\n":
                        dead_until = backslash  # `\\.` cannot match here
                        break
                    j = backslash + 2
                    continue
                if quote < size:
                    close = quote + 1
                else:
                    dead_until = size
                break
        if close < 0:
            pos = at + 1
            continue
        colon = _KEY_COLON.match(text, close)
        end = colon.end() if colon else close
        yield at, end, close
        pos = end


def json_top_keys(text: str) -> tuple[str | None, set[str]]:
    """Kind ("object", "array", "lines") and top-level keys of a possibly cut JSON head.

    For an array the keys are those of its first object; "lines" means a first
    object followed by another, i.e. JSON Lines.
    """
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None, set()
    # Fast path: a head that is a whole document parses at C speed; a cut head, JSON Lines
    # ("Extra data") or anything odd falls through to the tolerant tokenizer below.
    try:
        whole = json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(whole, dict):
            return "object", {k for k in whole if isinstance(k, str)}
        if isinstance(whole, list):
            first = whole[0] if whole else None
            return "array", set(first) if isinstance(first, dict) else set()
    kind = "object" if stripped[0] == "{" else "array"
    target = 1 if kind == "object" else 2
    depth = 0
    keys: set[str] = set()
    for start, end, literal_end in _tokens(stripped):
        first = stripped[start]
        if first in "{[":
            depth += 1
        elif first in "}]":
            depth -= 1
            if depth <= 1 and kind == "array":
                break
            if depth <= 0:
                # Another object on a later line: JSON Lines, not one document.
                if stripped[end:].lstrip()[:1] == "{":
                    kind = "lines"
                break
        elif end != literal_end and depth == target:  # a string followed by `:`
            try:
                keys.add(json.loads(stripped[start:literal_end]))
            except ValueError:
                continue
    return kind, keys
