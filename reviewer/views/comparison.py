"""The comparison screen: one cohort side by side, filtered and sorted, and its CSV."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from reviewer.cohort.chart import dot_chart
from reviewer.cohort.cohort import FLAG_RULE, STATUSES, cohort_for
from reviewer.cohort.comparison import SORTS, Filters, comparison_csv, table_rows
from reviewer.cohort.table_cache import cached_fragment
from reviewer.views.access import get_assignment_for_lead, lead_required

COMPARISON_PAGE_SIZE = 50


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

    def table() -> str:
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

    query = request.GET.urlencode()
    html = cached_fragment(assignment, query, table)
    return render(
        request,
        "reviewer/comparison.html",
        # Rendered by our own template from escaped values, then cached as a string.
        {"assignment": assignment, "table_html": mark_safe(html)},  # noqa: S308
    )
