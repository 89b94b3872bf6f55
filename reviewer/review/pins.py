"""Notes pinned to evidence: a check, a turn or a trace hop; shown there and in the rubric.

Blind like the scores: a reviewer sees others' pinned notes once their own review is
submitted (hiring leads always); their own, always.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from reviewer.models import Note, ScoreEvent
from reviewer.review.audit import audit_record
from reviewer.review.markdown import render_markdown
from reviewer.review.scoring import sees_others
from submissions.models import Submission

MAX_BODY = 5000
_ANCHOR = re.compile(r"check:[a-z_]+\.[a-z_]+|turn:\d{1,9}\.\d{1,9}|hop:\d{1,9}")


class PinRefused(ValueError):
    """Not a place of this submission a note can be pinned to, or no text."""


@dataclass(frozen=True, slots=True)
class Pin:
    anchor: str
    author: str
    html: str
    label: str
    target: str  # the element id the note is about


def target_id(anchor: str) -> str:
    """The page element an anchor names (the check row, the turn, the hop)."""
    kind, _, ref = anchor.partition(":")
    return {"check": f"check-{ref}", "turn": f"turn-{ref}", "hop": f"hop-{ref}"}.get(kind, "")


def _label(anchor: str) -> str:
    kind, _, ref = anchor.partition(":")
    if kind == "turn":
        thread, _, index = ref.partition(".")
        return f"thread {thread}, turn {index}"
    return {"check": ref, "hop": f"trace line {ref}"}.get(kind, anchor)


def anchor_exists(submission: Submission, anchor: str) -> bool:
    """The anchor is well formed and names something this submission has."""
    if not _ANCHOR.fullmatch(anchor):
        return False
    kind, _, ref = anchor.partition(":")
    if kind == "check":
        return submission.checks.filter(check_id=ref).exists()
    if kind == "turn":
        thread, _, index = ref.partition(".")
        return submission.turns.filter(thread=int(thread), index=int(index)).exists()
    return submission.trace_rows.filter(line=int(ref)).exists()


def pin_note(*, submission: Submission, author: Any, anchor: str, body: str) -> Note:
    """Pin a note (Markdown) to a check, a turn or a hop of the submission."""
    body = body.strip()
    if not body:
        raise PinRefused("a pinned note needs some text")
    if len(body) > MAX_BODY:
        raise PinRefused(f"a pinned note is at most {MAX_BODY} characters")
    if not anchor_exists(submission, anchor):
        raise PinRefused("that check, turn or hop is not in this submission")
    with transaction.atomic():
        note = Note.objects.create(submission=submission, author=author, anchor=anchor, body=body)
        audit_record(
            submission_id=submission.pk,
            actor_id=author.pk,
            kind=ScoreEvent.Kind.PIN,
            old=None,
            new={"anchor": anchor, "note": body},
        )
    return note


def visible_pins(user: Any, submission: Submission) -> list[Note]:
    """The pinned notes this user may see (one query, two with the review check)."""
    notes = Note.objects.filter(submission=submission).exclude(anchor="").select_related("author")
    me = getattr(user, "pk", None)
    see_all = sees_others(user, submission)
    return [n for n in notes if see_all or n.author_id == me]


def pins_by_target(notes: list[Note]) -> dict[str, list[Pin]]:
    """Rendered pins, keyed by the element id they are about."""
    out: dict[str, list[Pin]] = defaultdict(list)
    for note in notes:
        target = target_id(note.anchor)
        out[target].append(
            Pin(
                note.anchor,
                note.author.get_username(),
                render_markdown(note.body),
                _label(note.anchor),
                target,
            )
        )
    return dict(out)
