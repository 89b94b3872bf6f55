"""The comparison screen: one cohort side by side, filtered and sorted, and its CSV."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from reviewer.cohort.cohort import cohort_for
from reviewer.cohort.comparison import Filters, comparison_csv
from reviewer.cohort.table_cache import comparison_table
from reviewer.views.access import get_assignment_for_lead, lead_required


@lead_required
@require_GET
def comparison(request: HttpRequest, slug: str) -> HttpResponse:
    """Hiring leads: every reviewer's total per candidate, the range and the disagreement
    flag, each rubric row's range with the evidence behind it, filters, CSV and a chart."""
    assignment = get_assignment_for_lead(request, slug)
    if request.GET.get("format") == "csv":
        cohort = cohort_for(assignment)
        candidates = Filters.from_query(request.GET, cohort).apply(cohort)
        response = HttpResponse(comparison_csv(cohort, candidates), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{assignment.slug}-comparison.csv"'
        return response
    html = comparison_table(assignment, request)
    return render(
        request,
        "reviewer/comparison.html",
        # Rendered by our own template from escaped values, then cached as a string.
        {"assignment": assignment, "table_html": mark_safe(html)},  # noqa: S308
    )
