"""The home screen: a reviewer's queue, the hiring lead's cohorts, the demo's tour."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.cohort.decisions import cohorts_needing_decision
from reviewer.ops.demo import demo_start_here
from reviewer.ops.health import queue_health
from reviewer.review.worklist import assignment_queues


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """A reviewer's work per assignment (left to score, drafts, submitted, the next one to
    start); for a hiring lead, every cohort and how far its reviews are; in the public demo,
    where to start reading. The queue's health is for those who run it, not the demo."""
    # Whose home it is (a hiring lead's or a reviewer's) the template reads from the
    # role every page has (`is_hiring_lead`, reviewer/context.py).
    context: dict[str, object] = {"queues": assignment_queues(request.user)}
    if not settings.DEMO_MODE:
        # The lead's cohorts: flagged, ready to decide, still in review (empty for others).
        context["decisions"] = cohorts_needing_decision(request.user)
    if settings.DEMO_MODE:
        context["start_here"] = demo_start_here()
    else:
        context["health"] = queue_health()
    return render(request, "reviewer/home.html", context)
