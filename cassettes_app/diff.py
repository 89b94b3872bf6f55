"""Per-turn diffs of two conversations: aligned turn by turn, word-level inside changed text."""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.jsonvalues import json_canonical, json_equal, json_key, maybe_json

_WORD = re.compile(r"\s+|[^\s]+")
FOLD_AT = 2_000  # characters shown before "show all"


@dataclass
class Segment:
    """A run of text: unchanged, removed (left only) or added (right only)."""

    kind: str  # same | del | add
    text: str


@dataclass
class TurnDiff:
    index: int
    left: dict[str, Any] | None
    right: dict[str, Any] | None
    changed: bool
    left_segments: list[Segment] = field(default_factory=list)
    right_segments: list[Segment] = field(default_factory=list)
    tool_changes: list[str] = field(default_factory=list)
    # Some JSON of this turn is written another way than the other side's (key order,
    # spacing, 1.0 for 1) but equal as JSON.
    reordered: bool = False


@dataclass(frozen=True)
class _Piece:
    """One line of a turn's readable text: `head` then `body` then `tail`.

    `value` is the structured value the body was written from (a call's arguments given
    as an object), else None; see `_data`.
    """

    head: str
    body: str
    tail: str = ""
    value: Any = None


_TEXT = object()  # a body that is not a JSON object or array: compared as text


def _piece(head: str, body: Any, tail: str = "") -> _Piece:
    if isinstance(body, dict | list):
        return _Piece(head, json_canonical(body), tail, body)
    text = body if isinstance(body, str) else ("" if body is None else str(body))
    return _Piece(head, text, tail)


def _data(piece: _Piece) -> Any:
    """The body as a JSON object or array (a tool result, arguments, a JSON answer), else
    `_TEXT`. Parsed only where two bodies differ: equal texts need no parse."""
    if piece.value is not None:
        return piece.value
    if piece.body.lstrip()[:1] not in ("{", "["):
        return _TEXT
    data = maybe_json(piece.body)
    return data if isinstance(data, dict | list) else _TEXT


def _pieces(turn: dict[str, Any] | None) -> list[_Piece]:
    """A turn as readable lines: what was new in the request, then the response."""
    if not turn:
        return []
    out = []
    for message in turn.get("new_messages") or []:
        out.append(_piece(f"[{message.get('role', '?')}] ", message.get("text") or ""))
        out += _call_pieces(message)
        for result in message.get("tool_results") or []:
            out.append(_piece("[tool result] ", result.get("content") or ""))
    response = turn.get("response") or {}
    if response:
        out.append(_piece("[response] ", response.get("text") or ""))
        out += _call_pieces(response)
    return out


def _call_pieces(message: dict[str, Any]) -> list[_Piece]:
    """A message's tool calls as readable lines: name and arguments."""
    return [
        _piece(f"[tool call] {call.get('name')}(", call.get("arguments"), ")")
        for call in message.get("tool_calls") or []
    ]


def _line(piece: _Piece, body: str | None = None) -> str:
    return f"{piece.head}{piece.body if body is None else body}{piece.tail}"


def turn_text(turn: dict[str, Any] | None) -> str:
    """The readable text of a turn: what was new in the request, then the response."""
    return "\n".join(_line(p) for p in _pieces(turn))


def _compared_texts(left: list[_Piece], right: list[_Piece]) -> tuple[str, str, bool]:
    """The two turns' texts as compared and shown, and whether some JSON differed only in
    its key order.

    Where both sides hold JSON at the same place and their texts differ, both are shown in
    canonical form (sorted keys): equal JSON (`json_equal`: key order ignored, `1 == 1.0`,
    `true != 1`) then reads the same, and a real change is marked alone.
    """
    shown_left = [_line(p) for p in left]
    shown_right = [_line(p) for p in right]
    reordered = False
    for i, (a, b) in enumerate(zip(left, right, strict=False)):
        if a.body == b.body:
            continue
        data_a, data_b = _data(a), _data(b)
        if data_a is _TEXT or data_b is _TEXT:
            continue
        if a.head == b.head and json_equal(data_a, data_b):
            reordered = True
        shown_left[i] = _line(a, json_canonical(data_a))
        shown_right[i] = _line(b, json_canonical(data_b))
    return "\n".join(shown_left), "\n".join(shown_right), reordered


def _tool_calls(turn: dict[str, Any] | None) -> list[tuple[str, str | None, str]]:
    """(name, comparison key of the arguments as JSON, the arguments as shown) per call."""
    calls = []
    for message in [*((turn or {}).get("new_messages") or []), (turn or {}).get("response") or {}]:
        for call in message.get("tool_calls") or []:
            args = maybe_json(call.get("arguments"), keep_text=True)
            shown = args if isinstance(args, str) else json_canonical(args)
            calls.append((str(call.get("name")), json_key(args), shown))
    return calls


def word_diff(a: str, b: str) -> tuple[list[Segment], list[Segment]]:
    """Segments of two texts for side-by-side highlighting: lines first, words inside changes.

    Matching lines first keeps the word-level pass to the changed blocks, so a 20 KB turn with
    one changed line costs a line diff plus a tiny word diff, not a quadratic word diff.
    """
    left_lines = a.splitlines(keepends=True)
    right_lines = b.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, left_lines, right_lines, autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        block_a = "".join(left_lines[i1:i2])
        block_b = "".join(right_lines[j1:j2])
        if op == "equal":
            left.append(Segment("same", block_a))
            right.append(Segment("same", block_b))
        elif op == "replace":
            words_left, words_right = _word_segments(block_a, block_b)
            left += words_left
            right += words_right
        else:
            if block_a:
                left.append(Segment("del", block_a))
            if block_b:
                right.append(Segment("add", block_b))
    return _merge(left), _merge(right)


def _word_segments(a: str, b: str) -> tuple[list[Segment], list[Segment]]:
    """Word-level segments of two (small) changed blocks."""
    left_words = _WORD.findall(a)
    right_words = _WORD.findall(b)
    matcher = difflib.SequenceMatcher(None, left_words, right_words, autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            text = "".join(left_words[i1:i2])
            left.append(Segment("same", text))
            right.append(Segment("same", text))
            continue
        if i2 > i1:
            left.append(Segment("del", "".join(left_words[i1:i2])))
        if j2 > j1:
            right.append(Segment("add", "".join(right_words[j1:j2])))
    return left, right


def _merge(segments: list[Segment]) -> list[Segment]:
    """Join neighbouring segments of the same kind."""
    out: list[Segment] = []
    for seg in segments:
        if out and out[-1].kind == seg.kind:
            out[-1] = Segment(seg.kind, out[-1].text + seg.text)
        else:
            out.append(seg)
    return out


def diff_turns(
    left: list[dict[str, Any]], right: list[dict[str, Any]]
) -> tuple[list[TurnDiff], int | None]:
    """Align two turn lists by position; return the rows and the first diverging turn index.

    JSON in a turn (tool results, arguments, JSON answers) is compared as JSON: keys in
    another order are not a change (the row says so and shows both with sorted keys).
    """
    rows = []
    first = None
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        text_a, text_b, reordered = _compared_texts(_pieces(a), _pieces(b))
        calls_a, calls_b = _tool_calls(a), _tool_calls(b)
        keys_a = [(name, key) for name, key, _ in calls_a]
        keys_b = [(name, key) for name, key, _ in calls_b]
        changed = a is None or b is None or text_a != text_b or keys_a != keys_b
        row = TurnDiff(index, a, b, changed, reordered=reordered)
        if changed:
            if first is None:
                first = index
            row.left_segments, row.right_segments = word_diff(text_a, text_b)
            row.tool_changes = _describe_tool_changes(calls_a, calls_b)
        else:
            row.left_segments = row.right_segments = [Segment("same", text_a)]
        rows.append(row)
    return rows, first


def _describe_tool_changes(
    a: list[tuple[str, str | None, str]], b: list[tuple[str, str | None, str]]
) -> list[str]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x and y and x[:2] == y[:2]:
            continue
        if x and y and x[0] == y[0]:
            out.append(f"{x[0]}: arguments {x[2]} → {y[2]}")
        elif x and y:
            out.append(f"tool {x[0]}({x[2]}) → {y[0]}({y[2]})")
        elif x:
            out.append(f"only left calls {x[0]}({x[2]})")
        elif y:
            out.append(f"only right calls {y[0]}({y[2]})")
    return out


def render_segments(segments: list[Segment], *, fold_at: int = FOLD_AT) -> tuple[str, bool]:
    """Escaped HTML of segments (<del>/<ins> marks) and whether it was folded."""
    out = []
    shown = 0
    folded = False
    for seg in segments:
        text = seg.text
        if shown + len(text) > fold_at and seg.kind == "same":
            keep = max(0, fold_at - shown)
            if keep < len(text):
                text = text[:keep] + " …"
                folded = True
        shown += len(text)
        escaped = html.escape(text)
        if seg.kind == "del":
            out.append(f"<del>{escaped}</del>")
        elif seg.kind == "add":
            out.append(f"<ins>{escaped}</ins>")
        else:
            out.append(escaped)
    return "".join(out), folded
