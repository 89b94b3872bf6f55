"""JSON values as the checks compare them: a body that may be JSON, and when two are equal.

One rule for every app: a trace row, a stub's answer, a tool call's arguments and a model
response are read with `maybe_json` and compared with `json_equal` (or indexed by
`json_key`, which agrees with it), so that no check calls equal what another calls
different.
"""

from __future__ import annotations

import json
from typing import Any

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
