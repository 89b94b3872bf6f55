"""The comparison table, rendered once per change of what it shows.

A hiring lead's comparison of 1,000 candidates reads every score, review and check of the
cohort; between two score saves it is the same table for every lead. It is cached under the
assignment's `TableGeneration`, which any save or delete of a row the table is built from
moves on (names and rubrics show in every assignment's table: they move all of them).

The generation is a row of this app, made with its assignment and moved by an UPDATE in the
same transaction as the change: a request sees the new rows and the new generation
together, and a rolled-back change moves nothing. Signals catch the ORM's saves and
deletes. The `.update()` calls on such rows (a submission's status, a review's `updated`)
change nothing the table shows; one that does must call `bump` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F
from django.db.models.signals import post_delete, post_save

from reviewer.fragments import fragment_cached
from reviewer.models import Note, Review, RubricRow, RubricTemplate, Score, TableGeneration
from submissions.models import Assignment, Candidate, CheckResult, Submission

TTL = 24 * 3600


def bump(assignment_id: int | None = None) -> None:
    """Move one assignment's generation on, or every assignment's when None."""
    generations = TableGeneration.objects.all()
    if assignment_id is not None:
        generations = generations.filter(assignment_id=assignment_id)
    generations.update(value=F("value") + 1)


def cached_fragment(assignment: Assignment, query: str, build: Callable[[], str]) -> str:
    """`build()`'s HTML for this assignment and query string, until a change. Load the
    assignment with `select_related("table_generation")` to read it in the same query."""
    try:
        generation = assignment.table_generation.value
    except TableGeneration.DoesNotExist:
        return build()  # no generation to key on (made outside the ORM): never cache
    # The creation time too: SQLite may give a deleted assignment's id to a new one.
    signature = (assignment.created.timestamp(), generation, query)
    return fragment_cached("compare", assignment.pk, signature, build, ttl=TTL)


# ------------------------------------------------------------------ invalidation


def _bump_for_submission(submission_id: int | None) -> None:
    if submission_id is None:
        return
    rows = Submission.objects.filter(pk=submission_id).values_list("assignment_id", flat=True)
    assignment_id = rows.first()
    if assignment_id is not None:
        bump(assignment_id)


def _on_submission(instance: Submission, **_: Any) -> None:
    bump(instance.assignment_id)


def _on_submission_row(instance: CheckResult | Review | Note, **_: Any) -> None:
    _bump_for_submission(instance.submission_id)


def _on_score(instance: Score, **_: Any) -> None:
    rows = Review.objects.filter(pk=instance.review_id).values_list("submission_id", flat=True)
    submission_id = rows.first()
    if submission_id is None:  # its review is gone already (a cascade): move them all
        bump()
    else:
        _bump_for_submission(submission_id)


def _on_everything(**_: Any) -> None:
    bump()


def connect() -> None:
    """Wire the invalidation (called once, from the app's ready())."""
    for model, handler in (
        (Submission, _on_submission),
        (CheckResult, _on_submission_row),
        (Review, _on_submission_row),
        (Note, _on_submission_row),
        (Score, _on_score),
        (Candidate, _on_everything),
        (RubricTemplate, _on_everything),
        (RubricRow, _on_everything),
        (get_user_model(), _on_everything),
    ):
        name = model.__name__
        post_save.connect(handler, sender=model, dispatch_uid=f"cr-table-save-{name}")
        post_delete.connect(handler, sender=model, dispatch_uid=f"cr-table-delete-{name}")
    # An assignment's own save (its rubric, its title) moves its own generation.
    post_save.connect(_on_assignment, sender=Assignment, dispatch_uid="cr-table-assignment")


def _on_assignment(instance: Assignment, created: bool = False, **_: Any) -> None:
    if created:
        TableGeneration.objects.get_or_create(assignment=instance)
    else:
        bump(instance.pk)
