"""Per-turn diffs of two conversations: aligned turn by turn, word-level inside changed text."""

from __future__ import annotations

import difflib
import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

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


def turn_text(turn: dict[str, Any] | None) -> str:
    """The readable text of a turn: what was new in the request, then the response."""
    if not turn:
        return ""
    parts = []
    for message in turn.get("new_messages") or []:
        parts.append(f"[{message.get('role', '?')}] {message.get('text') or ''}")
        parts += _call_lines(message)
        for result in message.get("tool_results") or []:
            parts.append(f"[tool result] {result.get('content') or ''}")
    response = turn.get("response") or {}
    if response:
        parts.append(f"[response] {response.get('text') or ''}")
        parts += _call_lines(response)
    return "\n".join(parts)


def _call_lines(message: dict[str, Any]) -> list[str]:
    """A message's tool calls as readable lines: name and arguments."""
    lines = []
    for call in message.get("tool_calls") or []:
        args = call.get("arguments")
        shown = args if isinstance(args, str) else json.dumps(args, sort_keys=True, default=str)
        lines.append(f"[tool call] {call.get('name')}({shown})")
    return lines


def _tool_calls(turn: dict[str, Any] | None) -> list[tuple[str, str]]:
    calls = []
    for message in [*((turn or {}).get("new_messages") or []), (turn or {}).get("response") or {}]:
        for call in message.get("tool_calls") or []:
            args = call.get("arguments")
            calls.append((str(call.get("name")), json.dumps(args, sort_keys=True, default=str)))
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
    """Align two turn lists by position; return the rows and the first diverging turn index."""
    rows = []
    first = None
    for index in range(max(len(left), len(right))):
        a = left[index] if index < len(left) else None
        b = right[index] if index < len(right) else None
        text_a, text_b = turn_text(a), turn_text(b)
        calls_a, calls_b = _tool_calls(a), _tool_calls(b)
        changed = a is None or b is None or text_a != text_b or calls_a != calls_b
        row = TurnDiff(index, a, b, changed)
        if changed:
            if first is None:
                first = index
            row.left_segments, row.right_segments = word_diff(text_a, text_b)
            row.tool_changes = _describe_tool_changes(calls_a, calls_b)
        else:
            row.left_segments = row.right_segments = [Segment("same", text_a)]
        rows.append(row)
    return rows, first


def _describe_tool_changes(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[str]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x == y:
            continue
        if x and y and x[0] == y[0]:
            out.append(f"{x[0]}: arguments {x[1]} → {y[1]}")
        elif x and y:
            out.append(f"tool {x[0]}({x[1]}) → {y[0]}({y[1]})")
        elif x:
            out.append(f"only left calls {x[0]}({x[1]})")
        elif y:
            out.append(f"only right calls {y[0]}({y[1]})")
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
