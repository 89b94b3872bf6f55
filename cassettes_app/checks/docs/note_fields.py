"""The request fields a replay note (REPLAY.md, a runbook) says are dropped or kept:
backticked names and list items near 'dropped', 'ignored', 'normalised', 'volatile', ...
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cassettes_app.checks.docs.runbook import CODE_SPAN, HEADING, doc_lines

_TRIGGER = re.compile(
    r"\b(?:drop(?:s|ped|ping)?|ignor(?:e|es|ed|ing)|normali[sz](?:e|es|ed|ing|ation)|"
    r"volatile|strip(?:s|ped|ping)?|remov(?:e|es|ed|ing)|exclud(?:e|es|ed|ing)|"
    r"omit(?:s|ted|ting)?|discard(?:s|ed|ing)?)\b",
    re.I,
)


_NEGATION = re.compile(
    r"\b(?:not|never|no longer|kept|keeps?|retain(?:s|ed)?|preserv(?:e|es|ed))\b|n't\b", re.I
)


_KEEP = re.compile(r"\b(?:kept|keeps?|retain(?:s|ed)?|preserv(?:e|es|ed))\b", re.I)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$")


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s|$)")


# Names that sit near the trigger words but are not request fields.
_NOT_FIELDS = frozenset(
    {
        "key",
        "request",
        "response",
        "recorded_at",
        "cassette",
        "cassettes",
        "sha256",
        "sha1",
        "md5",
        "hexdigest",
        "json",
        "true",
        "false",
        "null",
        "none",
        "utf8",
    }
)


# Request fields a note may name before the trigger word ("`user` is dropped").
_REQUEST_FIELDS = frozenset(
    {
        "user",
        "request_id",
        "id",
        "created",
        "timestamp",
        "ts",
        "time",
        "nonce",
        "seed",
        "trace_id",
        "session_id",
        "metadata",
        "stream",
        "stream_options",
        "store",
        "model",
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "n",
        "stop",
        "response_format",
        "logprobs",
        "parallel_tool_calls",
        "service_tier",
        "input",
        "instructions",
        "system",
        "headers",
        "idempotency_key",
    }
)


@dataclass(slots=True)
class _Unit:
    """A heading, a list item (with its continuation lines) or a paragraph."""

    kind: str  # heading | item | para
    indent: int
    start: int
    lines: list[str]
    level: int = 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _units(text: str) -> list[_Unit]:
    """Markdown-ish blocks of a note, fenced code left out (line numbers kept)."""
    units: list[_Unit] = []
    current: _Unit | None = None
    blank = False
    for number, line, code in doc_lines(text):
        if code and not line.startswith(("    ", "\t")):
            current = None  # fenced code: not prose
            continue
        if not line.strip():
            blank = True
            if current is not None and current.kind != "item":
                current = None
            continue
        heading = HEADING.match(line)
        item = _ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if heading:
            current = None
            units.append(_Unit("heading", 0, number, [heading.group(2)], len(heading.group(1))))
        elif item:
            current = _Unit("item", len(item.group(1)), number, [item.group(2)])
            units.append(current)
        elif line.lstrip().startswith("|"):
            current = None
            units.append(_Unit("para", indent, number, [line.strip()]))
        elif current is not None and (not blank or indent > current.indent):
            current.lines.append(line.strip())
        elif code:
            current = None  # an indented code block
        else:
            current = _Unit("para", indent, number, [line.strip()])
            units.append(current)
        blank = False
    return units


@dataclass(slots=True)
class Notes:
    dropped: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)


def _field_name(span: str) -> str | None:
    name = span.strip()
    if _IDENT.match(name) and name.lower() not in _NOT_FIELDS:
        return name
    return None


def _item_field(unit: _Unit) -> str | None:
    """The field a list item names: its leading code span, else its first bare word."""
    text = unit.text.lstrip("*_ ")
    span = CODE_SPAN.match(text)
    if span:
        return _field_name(span.group(1))
    word = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\b(?:\s*$|\s*[-—:(,])", text)
    return _field_name(word.group(1)) if word else None


# Where a sentence turns to another clause: `;`, "but", a reason or a contrast ("because
# they do not change the answer", "while nested ids are kept"), and "and" before a keep
# word ("we drop `user` and keep everything else"). A negation or keep word there says
# nothing of the names before it.
_CLAUSE_TURN = re.compile(
    r";|\b(?:but|because|since|while|whereas|although|though)\b|"
    r"\band\s+(?=(?:keep|keeps|kept|retain|retains|preserve|preserves)\b)",
    re.I,
)


def _clauses(text: str) -> list[tuple[int, str]]:
    """(offset, text) of sentences split again where they turn (_CLAUSE_TURN), code spans
    kept whole."""
    protected = CODE_SPAN.sub(lambda m: "\0" * len(m.group(0)), text)
    cuts = [0]
    for match in _SENTENCE_END.finditer(protected):
        cuts.append(match.end())
    for match in _CLAUSE_TURN.finditer(protected):
        cuts.append(match.start())
    cuts = [*sorted(set(cuts)), len(text)]
    return [(a, text[a:b]) for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def replay_note_fields(text: str, vocabulary: Iterable[str] = ()) -> Notes:
    """Field names a replay note says are dropped (or kept), with their line numbers.

    A name counts when it is a backticked identifier after a trigger word ("dropped",
    "ignored", "normalised", "volatile", "stripped", ...) in the same clause, or before it
    when it is a known request field; or a list item under a line or heading that has a
    trigger word and ends the intro (`drop these fields:` + `- user`). Negated clauses
    ("`created` is not dropped", "`id` is kept") record the name as kept.
    """
    vocab = {v for v in vocabulary if isinstance(v, str)} | _REQUEST_FIELDS
    notes = Notes()
    units = _units(text)

    def add(target: dict[str, int], name: str | None, line: int) -> None:
        if name:
            target.setdefault(name, line)

    for position, unit in enumerate(units):
        body = unit.text
        for offset, clause in _clauses(body):
            trigger = _TRIGGER.search(clause)
            keep = _KEEP.search(clause)
            if not trigger and not keep:
                continue
            negated = bool(_NEGATION.search(CODE_SPAN.sub("", clause)))
            for span in CODE_SPAN.finditer(clause):
                name = _field_name(span.group(1))
                if not name:
                    continue
                line = unit.start + body[: offset + span.start()].count("\n")
                after = trigger is not None and span.start() > trigger.start()
                if trigger and not negated:
                    if after or name in vocab:
                        add(notes.dropped, name, line)
                elif name in vocab:
                    add(notes.kept, name, line)
        # An intro ("drop these top-level fields:") or a heading ("## Volatile fields")
        # followed by a list: each item names one field.
        intro = unit.text.rstrip(" *_").endswith(":") and _TRIGGER.search(unit.text)
        titled = unit.kind == "heading" and _TRIGGER.search(unit.text)
        if not (intro or titled) or _NEGATION.search(CODE_SPAN.sub("", unit.text)):
            continue
        depth: int | None = None
        for child in units[position + 1 :]:
            if child.kind == "heading":
                if titled and child.level > unit.level:
                    continue
                break
            if child.kind != "item":
                if intro:
                    break
                continue
            if unit.kind == "item" and child.indent <= unit.indent:
                break
            if depth is None:
                depth = child.indent
            if child.indent < depth:
                break
            if child.indent == depth:
                add(notes.dropped, _item_field(child), child.start)
    return notes
