"""JSON values as the checks compare them: a body that may be JSON, and when two are equal.

One rule for every app: a trace row, a stub's answer, a tool call's arguments and a model
response are read with `maybe_json` and compared with `json_equal` (or indexed by
`json_key`, which agrees with it), so that no check calls equal what another calls
different.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

# The first characters JSON text can start with: an object, an array, a string, a number,
# true, false, null. Anything else is not parsed at all (cheap for plain text bodies).
_JSON_START = frozenset('{["-0123456789tfn')


def maybe_json(value: Any, *, keep_text: bool = False) -> Any:
    """A body as data: JSON text (str or UTF-8 bytes) parsed, other values as they are.

    Empty text is None (no body). Text that is not JSON is None, or the text itself with
    `keep_text` (for a caller that still compares or shows it as text).
    """
    if type(value) is dict:  # the common case, first and cheap
        return value
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text[0] in _JSON_START:
            try:
                return json.loads(text)
            except (ValueError, RecursionError):
                pass
        return value if keep_text else None
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON: key order ignored, `1 == 1.0`, but `true != 1`.

    JSON (RFC 8259, section 6) has one number type; Python's json reads `1` as int and
    `1.0` as float, a difference the sender never meant, so numerically equal numbers are
    equal. Booleans are not numbers in JSON, but Python's `True == 1` and `False == 0`
    hold (bool is an int subclass), so a boolean equals only the same boolean. Lists and
    tuples compare alike, item by item.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


_KEY = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def json_key(value: Any) -> str | None:
    """A canonical text of a JSON value, equal for values `json_equal` calls equal (an
    integral float is written as its integer), for indexing; None when it cannot be
    written."""
    try:
        return _KEY.encode(_integral(value))
    except (ValueError, TypeError, RecursionError):
        return None


def json_canonical(value: Any) -> str:
    """A readable canonical text of a JSON value (sorted keys, an integral float written as
    its integer): equal for values `json_equal` calls equal, for showing two values side by
    side so that only what differs shows as a change."""
    try:
        return json.dumps(_integral(value), sort_keys=True, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return repr(value)


def _integral(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is dict:
        return {k: _integral(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_integral(v) for v in value]
    return value


# -- json's own text, written faster --------------------------------------------------------

# Deeper values are left to json (orjson refuses past 255 levels; a walk this deep is rare).
_EXACT_DEPTH = 64


def _orjson_exact(value: Any, depth: int = 0) -> bool:
    """True when orjson writes value as json.dumps does (compact, ensure_ascii=False, keys
    in their order or both sorted), but for the errors it raises (lone surrogates, integers
    past 64 bits): it holds only dicts with str keys, lists, str, int, bool, None and
    floats Python writes without an exponent. Both escape the same characters the same
    way, sort keys by code point, and write such floats alike (checked on 360,000 doubles);
    they part on floats written with an exponent (1e+16 against 1e16), NaN and infinities,
    and keys that are not str.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value) and "e" not in repr(value)
    if depth >= _EXACT_DEPTH:
        return False
    if kind is dict:
        return all(type(k) is str and _orjson_exact(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_orjson_exact(v, depth + 1) for v in value)
    return False


def compact_json(value: Any, *, sort_keys: bool = False) -> bytes | None:
    """json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys) as
    UTF-8, written by orjson (thirty times faster on long texts) when its text is provably
    the same; None when it may not be, for the caller to ask json."""
    if not _orjson_exact(value):
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer past 64 bits
        return None


def spaced_json(value: Any) -> bytes | None:
    """json.dumps(value, ensure_ascii=False) as UTF-8 (its ", " and ": " separators), from
    orjson's compact text when `compact_json` gives one; None otherwise.

    A separator is a comma or colon outside strings: the text is split at its quotes, and
    a quote ends a string unless an odd run of backslashes escapes it.
    """
    compact = compact_json(value)
    if compact is None:
        return None
    parts = compact.split(b'"')
    inside = False
    for i, part in enumerate(parts):
        if not inside:
            if b"," in part or b":" in part:
                parts[i] = part.replace(b",", b", ").replace(b":", b": ")
            inside = True  # the quote after this part opens a string
        elif not part.endswith(b"\\") or (len(part) - len(part.rstrip(b"\\"))) % 2 == 0:
            inside = False  # the quote after this part closes it
    return b'"'.join(parts)
