"""Notes pinned to evidence: a check, a turn or a trace hop; shown there and in the rubric.

One note form serves both kinds of note: pinned to evidence (`Note.anchor`, one more note
each time) or on a rubric row (`Note.row`, the reviewer's one note there, edited in place;
its anchor in the form is "row:<id>" and is never stored).

Blind like the scores: a reviewer sees others' pinned notes once their own review is
submitted (hiring leads who do not score, always); their own, always.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from reviewer.models import Note, Review, ScoreEvent
from reviewer.review.audit import audit_record
from reviewer.review.markdown import render_markdown
from reviewer.review.scoring import note_save, review_get_or_create, review_lock, sees_others
from submissions.models import Submission

MAX_BODY = 5000
_ANCHOR = re.compile(r"check:[a-z_]+\.[a-z_]+|turn:\d{1,9}\.\d{1,9}|hop:\d{1,9}")
_ROW = re.compile(r"row:(\d{1,9})")


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
    if "\x00" in body:
        # No database stores it as text (PostgreSQL refuses it); no note needs it.
        raise PinRefused("a note cannot hold a NUL character")
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


def row_anchor(row_id: int) -> str:
    """The note form's value for a rubric row."""
    return f"row:{row_id}"


def note_place(*, submission: Submission, author: Any, anchor: str, body: str) -> Note | None:
    """The one note form's write: a row's note (replaced; empty text removes it) or a note
    pinned to evidence (added). Returns the note, None when a row's note was removed."""
    if "\x00" in body:
        raise PinRefused("a note cannot hold a NUL character")
    match = _ROW.fullmatch(anchor)
    if match is None:
        return pin_note(submission=submission, author=author, anchor=anchor, body=body)
    review = review_get_or_create(submission=submission, reviewer=author)
    if review is None or not review.rubric.rows.filter(pk=int(match.group(1))).exists():
        raise PinRefused("that row is not in this submission's rubric")
    if review.state == Review.State.SUBMITTED:
        raise PinRefused("your review was submitted; its row notes can no longer change")
    if len(body.strip()) > MAX_BODY:
        raise PinRefused(f"a note is at most {MAX_BODY} characters")
    row = review.rubric.rows.get(pk=int(match.group(1)))
    with transaction.atomic():
        if review_lock(review).state == Review.State.SUBMITTED:
            raise PinRefused("your review was submitted; its row notes can no longer change")
        note_save(review=review, row=row, body=body)
    return Note.objects.filter(submission=submission, author=author, row=row).first()


def visible_pins(user: Any, submission: Submission, see_all: bool | None = None) -> list[Note]:
    """The pinned notes this user may see (one query, two with the review check unless
    `see_all`, its answer, is given)."""
    notes = Note.objects.filter(submission=submission).exclude(anchor="").select_related("author")
    me = getattr(user, "pk", None)
    if see_all is None:
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
