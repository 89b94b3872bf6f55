"""Calibration and agreement for hiring leads: one assignment, and each reviewer across
assignments. The figures come from `reviewer.cohort.calibration`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.cohort.calibration import calibration_figures, reviewers_across
from reviewer.cohort.cohort import cohort_for
from reviewer.views.access import get_assignment_for_lead, lead_required
from submissions.models import Assignment


@lead_required
@require_GET
def assignment_calibration(request: HttpRequest, slug: str) -> HttpResponse:
    """Hiring leads: one assignment's agreement (alpha overall and per row, kappa per pair),
    each reviewer's offset and share of 3s, and the units to discuss at calibration."""
    assignment = get_assignment_for_lead(request, slug)
    cohort = cohort_for(assignment)
    context = {"assignment": assignment, "cohort": cohort, **calibration_figures(cohort)}
    return render(request, "reviewer/calibration.html", context)


def _filters(request: HttpRequest, assignments: list[Assignment]) -> tuple[str, str, list[str]]:
    """The shape and assignment asked for; unknown values are dropped with a note."""
    problems = []
    shape = request.GET.get("shape", "")
    if shape and shape not in Assignment.Shape.values:
        problems.append(f"There is no assignment shape “{shape}”: the shape filter is ignored.")
        shape = ""
    slug = request.GET.get("assignment", "")
    if slug and slug not in {a.slug for a in assignments}:
        problems.append(f"There is no assignment “{slug}”: the assignment filter is ignored.")
        slug = ""
    return shape, slug, problems


@lead_required
@require_GET
def reviewers_calibration(request: HttpRequest) -> HttpResponse:
    """Hiring leads: each reviewer across assignments (offset per assignment and pooled,
    share of 3s, pooled pairwise kappa), in a fixed number of queries."""
    assignments = list(Assignment.objects.order_by("title", "slug").only("slug", "title", "shape"))
    shape, slug, problems = _filters(request, assignments)
    selected = [
        a for a in assignments if (not shape or a.shape == shape) and (not slug or a.slug == slug)
    ]
    context = {
        "assignments": assignments,
        "selected": selected,
        "shapes": Assignment.Shape.choices,
        "shape": shape,
        "slug": slug,
        "problems": problems,
        **reviewers_across(selected),
    }
    return render(request, "reviewer/reviewers_calibration.html", context)
