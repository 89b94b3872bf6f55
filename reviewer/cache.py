"""The comparison table, rendered once per change of what it shows.

A hiring lead's comparison of 1,000 candidates reads every score, review and check of the
cohort; between two score saves it is the same table for every lead. It is cached under a
generation number per assignment (plus one for everything that shows in every assignment's
table: names, rubrics), and any save or delete of a row the table is built from moves the
generation on. Signals catch the ORM's saves and deletes; the few `.update()` calls on such
rows call `bump` themselves.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from reviewer.models import Note, Review, RubricRow, RubricTemplate, Score
from submissions.models import Assignment, Candidate, CheckResult, Submission

_ALL = "cr:gen:all"
TTL = 24 * 3600


def _key(assignment_id: int) -> str:
    return f"cr:gen:a:{assignment_id}"


def bump(assignment_id: int | None = None) -> None:
    """Move one assignment's generation on, or every assignment's when None.

    Now, and again once the surrounding transaction commits: a request that read the new
    generation before the change was visible may have cached the old table under it.
    """
    _bump(assignment_id)
    transaction.on_commit(lambda: _bump(assignment_id))


def _bump(assignment_id: int | None) -> None:
    key = _ALL if assignment_id is None else _key(assignment_id)
    try:
        cache.incr(key)
    except ValueError:  # not cached yet (or evicted): any new value differs from the old
        cache.set(key, time.time_ns(), TTL)


def _generations(assignment_id: int) -> tuple[Any, Any]:
    keys = [_ALL, _key(assignment_id)]
    found = cache.get_many(keys)
    for key in keys:
        if key not in found:
            # add(): two requests racing here agree on the first value written.
            cache.add(key, time.time_ns(), TTL)
            found[key] = cache.get(key)
    return found[_ALL], found[_key(assignment_id)]


def cached_fragment(assignment_id: int, query: str, build: Any) -> str:
    """`build()`'s HTML for this assignment and query string, cached until a change."""
    generations = _generations(assignment_id)
    digest = hashlib.sha256(query.encode()).hexdigest()[:16]
    key = f"cr:compare:{assignment_id}:{generations[0]}:{generations[1]}:{digest}"
    html = cache.get(key)
    if html is None:
        html = build()
        cache.set(key, html, TTL)
    return html


# ------------------------------------------------------------------ invalidation


def _submission_assignment(submission_id: int | None) -> int | None:
    if submission_id is None:
        return None
    rows = Submission.objects.filter(pk=submission_id).values_list("assignment_id", flat=True)
    return rows.first()


def _on_submission(instance: Submission, **_: Any) -> None:
    bump(instance.assignment_id)


def _on_check(instance: CheckResult, **_: Any) -> None:
    bump(_submission_assignment(instance.submission_id) or 0)


def _on_review(instance: Review, **_: Any) -> None:
    bump(_submission_assignment(instance.submission_id) or 0)


def _on_score(instance: Score, **_: Any) -> None:
    submission_id = (
        Review.objects.filter(pk=instance.review_id).values_list("submission_id", flat=True).first()
    )
    if submission_id is None:  # the review went first (a cascade): bump everything
        bump()
        return
    bump(_submission_assignment(submission_id) or 0)


def _on_everything(**_: Any) -> None:
    bump()


def connect() -> None:
    """Wire the invalidation (called once, from the app's ready())."""
    for model, handler in (
        (Submission, _on_submission),
        (CheckResult, _on_check),
        (Review, _on_review),
        (Score, _on_score),
        (Note, _on_review),
    ):
        post_save.connect(handler, sender=model, dispatch_uid=f"cr-cache-{model.__name__}")
        post_delete.connect(handler, sender=model, dispatch_uid=f"cr-cache-del-{model.__name__}")
    for model in (Candidate, Assignment, RubricTemplate, RubricRow, get_user_model()):
        post_save.connect(_on_everything, sender=model, dispatch_uid=f"cr-cache-{model.__name__}")
        post_delete.connect(
            _on_everything, sender=model, dispatch_uid=f"cr-cache-del-{model.__name__}"
        )
