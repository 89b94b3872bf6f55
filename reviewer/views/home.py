"""The home screen: the assignments a user may see, and the queue's health."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.ops.health import queue_health
from submissions.models import Assignment, Submission


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Assignments with their candidate counts and what waits for checks."""
    visible = Submission.objects.visible_to(request.user)
    counts = {
        row["assignment"]: row
        for row in visible.values("assignment").annotate(
            candidates=Count("candidate", distinct=True),
            submissions=Count("id", distinct=True),
            waiting=Count("id", distinct=True, filter=Q(status__in=["received", "processing"])),
        )
    }
    assignments = list(Assignment.objects.all())
    for assignment in assignments:
        row = counts.get(assignment.pk, {})
        assignment.candidate_count = row.get("candidates", 0)
        assignment.submission_count = row.get("submissions", 0)
        assignment.waiting_count = row.get("waiting", 0)
    return render(
        request, "reviewer/home.html", {"assignments": assignments, "health": queue_health()}
    )
