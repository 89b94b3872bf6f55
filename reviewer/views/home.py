"""The home screen: the assignments a user may see, and the queue's health."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.ops.health import queue_health
from submissions.models import Assignment, Submission


@dataclass(frozen=True)
class AssignmentLine:
    """One assignment with what this user may see of it."""

    assignment: Assignment
    candidates: int
    submissions: int
    waiting: int


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Assignments with their candidate counts and what waits for checks."""
    visible = Submission.objects.visible_to(request.user)
    # Counted over the visible ids, not the visible queryset itself: its default ordering
    # (and the reviewers join behind `distinct()`) would end up in the GROUP BY and split
    # one assignment into a row per submission, of which only one was kept.
    counts = {
        row["assignment"]: row
        for row in Submission.objects.filter(pk__in=visible.values("pk"))
        .order_by()
        .values("assignment")
        .annotate(
            candidates=Count("candidate", distinct=True),
            submissions=Count("id", distinct=True),
            waiting=Count("id", distinct=True, filter=Q(status__in=["received", "processing"])),
        )
    }
    lines = [
        AssignmentLine(
            assignment=a,
            candidates=counts.get(a.pk, {}).get("candidates", 0),
            submissions=counts.get(a.pk, {}).get("submissions", 0),
            waiting=counts.get(a.pk, {}).get("waiting", 0),
        )
        for a in Assignment.objects.all()
    ]
    return render(request, "reviewer/home.html", {"lines": lines, "health": queue_health()})
