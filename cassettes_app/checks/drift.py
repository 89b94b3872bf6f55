"""Drift between a recorded answer and a live one, field by field, in tiers.

A re-asked answer is compared with the recorded one as JSON, structurally: a JSON text
inside a string (a tool call's arguments, an answer given as JSON) is compared as the value
it holds. Each difference has a tier:

- a field the live answer ADDS: `info` (providers add fields over time);
- a field it REMOVES: `warn` (something the hand-in may read is gone);
- a field whose TYPE changed: `warn`;
- a field whose VALUE changed: `value` (wording drifts between two calls to one model).

A field is `graded` when the assignment grades on it: the tool calls and finish reason
(`cassettes_app.checks.graded`) and any key the assignment names (`intent`, `needs_human`).
Volatile fields a provider issues afresh each call (ids, timestamps, usage counts) are not
drift and are left out, and so is a null field the other side omits. Pure: JSON values in,
dicts out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cassettes_app.checks.graded import json_shape
from cassettes_app.jsonvalues import json_equal, maybe_json

TIERS = {"added": "info", "removed": "warn", "type": "warn", "value": "value"}
# Issued afresh by the provider on every call: never drift.
VOLATILE = frozenset({"id", "created", "created_at", "system_fingerprint", "usage", "request_id"})
# Field names (anywhere) whose differences the graded fields already decide.
GRADED_ALWAYS = ("tool_calls", "tool_use", "finish_reason", "stop_reason")
MAX_ITEMS = 200  # differences listed per answer; the rest are counted


@dataclass(frozen=True, slots=True)
class Drift:
    """One field on which the live answer differs from the recorded one."""

    field: str
    change: str  # added | removed | type | value
    recorded: Any
    live: Any
    graded: bool

    @property
    def tier(self) -> str:
        return TIERS[self.change]

    def as_dict(self) -> dict[str, Any]:
        """Evidence form."""
        return {
            "field": self.field,
            "change": self.change,
            "tier": self.tier,
            "graded": self.graded,
            "recorded": self.recorded,
            "live": self.live,
        }


def _opened(value: Any) -> Any:
    """A string holding a JSON object or array, as that value; anything else as it is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        parsed = maybe_json(value)
        if isinstance(parsed, dict | list):
            return parsed
    return value


def _names(path: str) -> list[str]:
    return [part.split("[")[0] for part in path.split(".") if part]


class _Walker:
    def __init__(self, graded_names: Iterable[str]) -> None:
        self.graded_names = frozenset(n for n in graded_names if isinstance(n, str) and n)
        self.items: list[Drift] = []
        self.more = 0

    def graded(self, path: str) -> bool:
        names = _names(path)
        return any(n in GRADED_ALWAYS for n in names) or any(n in self.graded_names for n in names)

    def add(self, path: str, change: str, recorded: Any, live: Any) -> None:
        if len(self.items) >= MAX_ITEMS:
            self.more += 1
            return
        self.items.append(Drift(path or "(answer)", change, recorded, live, self.graded(path)))

    def walk(self, a: Any, b: Any, path: str) -> None:
        a, b = _opened(a), _opened(b)
        if json_shape(a) != json_shape(b):
            self.add(path, "type", a, b)
        elif isinstance(a, dict):
            for key in list(a) + [k for k in b if k not in a]:
                if key in VOLATILE:
                    continue
                where = f"{path}.{key}" if path else str(key)
                one_sided = key not in a or key not in b
                if one_sided and (a[key] if key in a else b[key]) is None:
                    # A null field one side omits: servers differ on writing nulls (`logprobs`,
                    # `refusal`) and a reader's `.get` sees None either way. Not drift.
                    continue
                if key not in b:
                    self.add(where, "removed", a[key], None)
                elif key not in a:
                    self.add(where, "added", None, b[key])
                else:
                    self.walk(a[key], b[key], where)
        elif isinstance(a, list):
            for n in range(max(len(a), len(b))):
                where = f"{path}[{n}]"
                if n >= len(b):
                    self.add(where, "removed", a[n], None)
                elif n >= len(a):
                    self.add(where, "added", None, b[n])
                else:
                    self.walk(a[n], b[n], where)
        elif not json_equal(a, b):
            self.add(path, "value", a, b)


def drift(recorded: Any, live: Any, *, graded_names: Iterable[str] = ()) -> tuple[list[Drift], int]:
    """(the differences, in document order, at most MAX_ITEMS; how many more were left out)."""
    walker = _Walker(graded_names)
    walker.walk(recorded, live, "")
    return walker.items, walker.more
