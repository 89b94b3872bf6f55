"""The comparison table, rendered once per change of what it shows.

A hiring lead's comparison of 1,000 candidates reads every score, review and check of the
cohort; between two score saves it is the same table for every lead. It is cached under the
assignment's `TableGeneration`, which any save or delete of a row the table is built from
moves on (names and rubrics show in every assignment's table: they move all of them).

The generation is a row of this app, made with its assignment and moved by an UPDATE in the
same transaction as the change: a request sees the new rows and the new generation
together, and a rolled-back change moves nothing. Signals catch the ORM's saves and
deletes; check results, written in bulk, send `checks_stored` once per write. The
`.update()` calls on such rows (a review's `updated`) change nothing the table shows; one
that does must call `bump` itself (or save with `update_fields`, which signals).

Two copies serve a view. Each web process keeps the tables it rendered (the `fragments`
cache), under the generation. And the landing view (no filter, first page), the one a lead
opens first, is also kept in the database (`StoredTable`), rendered by a worker after each
change (`table_store`, queued when the change commits, at most once per STORE_DELAY per
assignment, and swept by beat): a process that has not rendered it yet (the first view
after a deploy or a restart) reads it instead of building it, which took 0.7 to 1.3 s at
1,000 candidates. A stored table counts only under the generation it was built at and the
code that built it (`layout`); otherwise the view builds the table itself, as before. A GET
writes nothing.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import zlib
from collections.abc import Iterable
from functools import cache as once
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest, QueryDict
from django.template.loader import render_to_string
from django.urls import get_script_prefix, reverse

from reviewer.cohort.chart import dot_chart
from reviewer.cohort.cohort import FLAG_RULE, STATUSES, cohort_for
from reviewer.cohort.comparison import SORTS, Filters, table_rows
from reviewer.fragments import fragment_cached
from reviewer.models import (
    Note,
    Review,
    RubricRow,
    RubricTemplate,
    Score,
    StoredTable,
    TableGeneration,
)
from submissions.checks.store import checks_stored
from submissions.models import Assignment, Candidate, CheckResult, Submission

log = logging.getLogger(__name__)

TTL = 24 * 3600
# A burst of saves (a reviewer scoring row after row) stores the table once, this long after
# the first of them, with all of them in.
STORE_DELAY = 5.0
STORE_TASK = "reviewer.tasks.store_comparison_table"
COMPARISON_PAGE_SIZE = 50

# ------------------------------------------------------------------ building


def table_build(assignment: Assignment, request: HttpRequest) -> str:
    """The comparison table's HTML for this request's filters, sort and page."""
    cohort = cohort_for(assignment)
    filters = Filters.from_query(request.GET, cohort)
    candidates = filters.apply(cohort)
    # The CSV holds every candidate that passes the filters; the page shows them
    # COMPARISON_PAGE_SIZE at a time.
    page = Paginator(candidates, COMPARISON_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "assignment": assignment,
        "cohort": cohort,
        "filters": filters,
        "statuses": STATUSES,
        "sorts": SORTS,
        "page": page,
        "lines": table_rows(cohort, list(page.object_list)),
        "chart": dot_chart(list(page.object_list), cohort.reviewers),
        "flagged": sum(c.flagged for c in cohort.candidates),
        "flag_rule": FLAG_RULE,
        "agreement": cohort.figures,
        "columns": 6 + len(cohort.reviewers) + len(cohort.rows),
    }
    return render_to_string("reviewer/comparison.html#table", context, request=request)


def comparison_table(assignment: Assignment, request: HttpRequest) -> str:
    """The table for this request: this process's copy, else the stored landing view, else
    built now. Load the assignment with `select_related("table_generation")` to read the
    generation in the same query."""
    query = request.GET.urlencode()
    try:
        generation = assignment.table_generation.value
    except TableGeneration.DoesNotExist:
        return table_build(assignment, request)  # no generation to key on: never cache

    def build() -> str:
        if not query:
            stored = _stored(assignment.pk, generation)
            if stored is not None:
                return stored
        return table_build(assignment, request)

    # The creation time too: SQLite may give a deleted assignment's id to a new one.
    signature = (assignment.created.timestamp(), generation, query)
    return fragment_cached("compare", assignment.pk, signature, build, ttl=TTL)


def _stored(assignment_id: int, generation: int) -> str | None:
    rows = StoredTable.objects.filter(
        generation_id=assignment_id, value=generation, layout=layout()
    ).values_list("html_z", flat=True)
    packed = rows.first()
    return None if packed is None else unpack(packed)


def pack(html: str) -> bytes:
    return zlib.compress(html.encode())


def unpack(packed: bytes | memoryview) -> str:
    return zlib.decompress(packed).decode()


# ------------------------------------------------------------------ the stored copy


@once
def code_digest() -> str:
    """What renders the table: this project's Python and templates, and Django's version.
    A deploy that changes any of them leaves every stored table unread until stored again.
    Read once per process (a web process reads it at start: ops/warmup.py)."""
    root = Path(settings.BASE_DIR)
    digest = hashlib.sha256(django.get_version().encode())
    for folder in ("reviewer", "submissions", "cassettes_app", "templates"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".py", ".html") and path.is_file():
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def layout() -> str:
    """The code and the URL prefix the table's links are made with (a web process behind a
    prefixed path and a worker without one make different links)."""
    return f"{code_digest()}:{get_script_prefix()}"[:100]


def _landing_request(assignment: Assignment) -> HttpRequest:
    """A GET of the comparison page with no query, by nobody: what the table's template
    reads of a request (its query string, for the links) is the same for every lead."""
    request = HttpRequest()
    request.method = "GET"
    request.path = request.path_info = reverse("comparison", args=[assignment.slug])
    request.GET = QueryDict()
    request.user = AnonymousUser()
    return request


def table_store(assignment_id: int) -> bool:
    """Render the landing table of one assignment and keep it, unless the kept one is
    current; whether it stored one. The generation is read before the rows, so the table
    holds at least what that generation holds: it is never kept under a newer number than
    what it shows."""
    current = (
        TableGeneration.objects.filter(assignment_id=assignment_id)
        .select_related("assignment")
        .first()
    )
    if current is None:
        return False
    generation, shape = current.value, layout()
    kept = StoredTable.objects.filter(generation_id=assignment_id).values_list("value", "layout")
    if kept.first() == (generation, shape):
        return False
    assignment = current.assignment
    html = table_build(assignment, _landing_request(assignment))
    values = {"value": generation, "layout": shape, "html_z": pack(html)}
    # Never over a table of a newer generation another worker kept meanwhile.
    newer = Q(value__gte=generation) & Q(layout=shape)
    if StoredTable.objects.filter(generation_id=assignment_id).exclude(newer).update(**values):
        return True
    try:
        with transaction.atomic():
            StoredTable.objects.create(generation_id=assignment_id, **values)
    except IntegrityError:  # kept meanwhile, by another worker: its copy is as new or newer
        return False
    return True


def tables_store_stale() -> int:
    """Store every assignment's table whose kept copy is missing or out of date (beat's
    sweep: a change whose store was never queued, a deploy's new code); how many."""
    shape = layout()
    stale = TableGeneration.objects.exclude(stored__value=F("value"), stored__layout=shape).filter(
        assignment__submissions__isnull=False
    )
    done = 0
    for assignment_id in stale.values_list("assignment_id", flat=True).distinct():
        done += table_store(assignment_id)
    return done


_publisher = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="table")


def _publish(assignment_id: int) -> None:
    from celery import current_app

    current_app.send_task(STORE_TASK, args=[assignment_id], countdown=STORE_DELAY, retry=False)


def _publish_all(assignment_ids: list[int]) -> None:
    for assignment_id in assignment_ids:
        try:
            _publish(assignment_id)
        except Exception as exc:  # the broker is down: beat's sweep stores them later
            log.warning("table stores of assignments %s not queued: %s", assignment_ids, exc)
            return


def store_later(assignment_ids: Iterable[int]) -> None:
    """Queue a worker to store these tables, once per STORE_DELAY per assignment. Published
    from a thread of its own: a broker that is down or hangs never holds the change's
    request (beat's sweep stores what was not queued)."""
    due = [a for a in assignment_ids if cache.add(f"cr:table-store:{a}", 1, STORE_DELAY)]
    if due:  # the others are queued already: those stores read this change too
        _publisher.submit(_publish_all, due)


# ------------------------------------------------------------------ invalidation


def bump(assignment_id: int | None = None) -> None:
    """Move one assignment's generation on, or every assignment's when None; its stored
    table is rendered again once the change commits."""
    generations = TableGeneration.objects.all()
    if assignment_id is not None:
        generations = generations.filter(assignment_id=assignment_id)
    generations.update(value=F("value") + 1)
    if assignment_id is not None:
        transaction.on_commit(lambda: store_later([assignment_id]))
    else:
        transaction.on_commit(lambda: store_later(_stored_ids()))


def _stored_ids() -> list[int]:
    """The assignments whose table is kept (a change to all of them stores those again)."""
    return list(StoredTable.objects.values_list("generation_id", flat=True))


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


def _on_checks_stored(submission_id: int, **_: Any) -> None:
    _bump_for_submission(submission_id)


def _on_score(instance: Score, **_: Any) -> None:
    rows = Review.objects.filter(pk=instance.review_id).values_list("submission_id", flat=True)
    submission_id = rows.first()
    if submission_id is None:  # its review is gone already (a cascade): move them all
        bump()
    else:
        _bump_for_submission(submission_id)


def _on_everything(**_: Any) -> None:
    bump()


def _on_candidate(instance: Candidate, created: bool = False, **_: Any) -> None:
    """A candidate shows by name in the tables of the assignments it handed in to; a new
    one is in none yet (its submission's save moves its own). One with hand-ins cannot be
    deleted (they protect it); one without shows in no table."""
    if created:
        return
    ids = Submission.objects.filter(candidate=instance).values_list("assignment_id", flat=True)
    for assignment_id in sorted(set(ids)):
        bump(assignment_id)


def _on_user(update_fields: frozenset[str] | None = None, **kwargs: Any) -> None:
    """A user shows in the tables by name only: a save of other fields (each login writes
    `last_login`) changes no table."""
    if update_fields is not None and get_user_model().USERNAME_FIELD not in update_fields:
        return
    bump()


def connect() -> None:
    """Wire the invalidation (called once, from the app's ready())."""
    for model, handler in (
        (Submission, _on_submission),
        (CheckResult, _on_submission_row),
        (Review, _on_submission_row),
        (Note, _on_submission_row),
        (Score, _on_score),
        (RubricTemplate, _on_everything),
        (RubricRow, _on_everything),
    ):
        name = model.__name__
        post_save.connect(handler, sender=model, dispatch_uid=f"cr-table-save-{name}")
        post_delete.connect(handler, sender=model, dispatch_uid=f"cr-table-delete-{name}")
    # Check results are written in bulk (no post_save); their writer says so once.
    checks_stored.connect(_on_checks_stored, sender=CheckResult, dispatch_uid="cr-table-checks")
    post_save.connect(_on_candidate, sender=Candidate, dispatch_uid="cr-table-save-Candidate")
    user = get_user_model()
    post_save.connect(_on_user, sender=user, dispatch_uid=f"cr-table-save-{user.__name__}")
    post_delete.connect(
        _on_everything, sender=user, dispatch_uid=f"cr-table-delete-{user.__name__}"
    )
    # An assignment's own save (its rubric, its title) moves its own generation.
    post_save.connect(_on_assignment, sender=Assignment, dispatch_uid="cr-table-assignment")


def _on_assignment(instance: Assignment, created: bool = False, **_: Any) -> None:
    if created:
        TableGeneration.objects.get_or_create(assignment=instance)
    else:
        bump(instance.pk)
