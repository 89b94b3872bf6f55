"""The doors of the views: fetch an object for the requesting user, or 404.

Never 403: a 404 does not tell anyone that the thing exists."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404
from django_htmx.middleware import HtmxDetails

from submissions.models import Assignment, Submission
from submissions.roles import is_hiring_lead


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (for the type checker)."""

    htmx: HtmxDetails


def get_submission_for_user(request: HttpRequest, pk: int) -> Submission:
    """The submission if this user may see it, else 404."""
    queryset = Submission.objects.visible_to(request.user).select_related(
        "candidate", "assignment", "uploaded_by"
    )
    return get_object_or_404(queryset, pk=pk)


def _ensure_lead(request: HttpRequest) -> None:
    if not is_hiring_lead(request.user):
        raise Http404("only hiring leads see this page")


def lead_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A lead-only view: log in first (like `login_required`), then 404 for anyone who is
    not a hiring lead."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        _ensure_lead(request)
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def get_assignment_for_lead(request: HttpRequest, slug: str) -> Assignment:
    """The assignment for a hiring lead's page, else 404 (for others, or an unknown slug)."""
    _ensure_lead(request)
    # The comparison table's generation comes along for its cache (cohort/table_cache.py).
    return get_object_or_404(Assignment.objects.select_related("table_generation"), slug=slug)
