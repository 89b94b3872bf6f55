"""The comparison screen: one cohort side by side, and its CSV."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from reviewer.cache import cached_fragment
from reviewer.comparison import chart_bars, comparison_csv, comparison_rows
from submissions.models import Assignment
from submissions.roles import is_hiring_lead

COMPARISON_PAGE_SIZE = 50


@login_required
@require_GET
def comparison(request: HttpRequest, slug: str) -> HttpResponse:
    """Hiring leads: candidates × rubric rows, totals, reviewer spread, CSV and a chart."""
    if not is_hiring_lead(request.user):
        raise Http404("only hiring leads compare candidates")
    assignment = get_object_or_404(Assignment, slug=slug)
    sort = request.GET.get("sort", "total")
    if request.GET.get("format") == "csv":
        rubric_rows, rows = comparison_rows(assignment, sort=sort)
        response = HttpResponse(comparison_csv(rubric_rows, rows), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{assignment.slug}-comparison.csv"'
        return response

    def table() -> str:
        rubric_rows, rows = comparison_rows(assignment, sort=sort)
        # The CSV holds every candidate; the page shows them COMPARISON_PAGE_SIZE at a time.
        page = Paginator(rows, COMPARISON_PAGE_SIZE).get_page(request.GET.get("page"))
        bars = chart_bars(page.object_list)
        context = {
            "assignment": assignment,
            "rubric_rows": rubric_rows,
            "rows": page.object_list,
            "page": page,
            "sort": sort,
            "bars": bars,
            "chart_height": max(30, len(bars) * 28),
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
