"""The graded fields of a chat answer, and where a live answer departs from a recorded one.

What a hand-in is graded on is what the agent does with an answer: the tool calls it makes
(names and arguments), why the model stopped, and the structure of an answer given as JSON.
The wording of a text answer drifts between two calls to the same model and is never graded
here: a text difference is returned apart, as evidence. Arguments are compared with the one
JSON equality every check uses (`cassettes_app.jsonvalues`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cassettes_app.jsonvalues import json_equal, maybe_json
from cassettes_app.providers import normalise


@dataclass(slots=True)
class Graded:
    """One answer's graded fields (and its text, which is not graded)."""

    provider: str
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    json_answer: Any = None  # the answer parsed, when it is a JSON object or list
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Departure:
    """One field on which the live answer is not the recorded one."""

    field: str
    recorded: Any
    live: Any

    def as_dict(self) -> dict[str, Any]:
        """Evidence form."""
        return {"field": self.field, "recorded": self.recorded, "live": self.live}


def graded(request: Any, response: Any, url: str | None = None) -> Graded:
    """The graded fields of one request/response pair (bodies as bytes, text or data)."""
    ex = normalise(request, response, url)
    out = Graded(ex.provider, usage=dict(ex.usage), problems=list(ex.problems))
    out.finish_reason = ex.stop_reason
    if ex.response is not None:
        out.tool_calls = [(call.name or "", call.arguments) for call in ex.response.tool_calls]
        out.text = ex.response.text
        answer = maybe_json(ex.response.text)
        out.json_answer = answer if isinstance(answer, dict | list) else None
    return out


def json_shape(value: Any) -> str:
    """The JSON type of a value: object, array, string, number, boolean or null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), type(value).__name__)


def first_difference(a: Any, b: Any, path: str, *, structure_only: bool = False) -> str | None:
    """The path of the first place where two JSON values differ (by type only, with
    `structure_only`); None when they agree."""
    if json_shape(a) != json_shape(b):
        return path
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}"
            found = first_difference(a[key], b[key], f"{path}.{key}", structure_only=structure_only)
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b) and not structure_only:
            return f"{path}.length"
        for n, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{n}]", structure_only=structure_only)
            if found:
                return found
        return None
    return None if structure_only or json_equal(a, b) else path


def _tool_departures(recorded: Graded, live: Graded) -> list[Departure]:
    if len(recorded.tool_calls) != len(live.tool_calls):
        names = [[n for n, _ in g.tool_calls] for g in (recorded, live)]
        return [Departure("tool_calls.length", names[0], names[1])]
    out = []
    for n, ((name, args), (live_name, live_args)) in enumerate(
        zip(recorded.tool_calls, live.tool_calls, strict=True)
    ):
        if name != live_name:
            out.append(Departure(f"tool_calls[{n}].name", name, live_name))
            continue
        where = first_difference(args, live_args, f"tool_calls[{n}].arguments")
        if where:
            out.append(Departure(where, args, live_args))
    return out


def departures(recorded: Graded, live: Graded) -> tuple[list[Departure], list[Departure]]:
    """(graded departures, text drift): the first decide, the second are evidence only."""
    graded_out = _tool_departures(recorded, live)
    if recorded.finish_reason != live.finish_reason:
        graded_out.append(Departure("finish_reason", recorded.finish_reason, live.finish_reason))
    drift: list[Departure] = []
    if recorded.json_answer is not None or live.json_answer is not None:
        where = first_difference(
            recorded.json_answer, live.json_answer, "answer", structure_only=True
        )
        if where:
            graded_out.append(Departure(where, recorded.json_answer, live.json_answer))
        elif not json_equal(recorded.json_answer, live.json_answer):
            drift.append(Departure("answer (values)", recorded.json_answer, live.json_answer))
    elif recorded.text.strip() != live.text.strip():
        drift.append(Departure("text", recorded.text, live.text))
    return graded_out, drift
