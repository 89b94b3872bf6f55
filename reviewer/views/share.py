"""Downloads of the shareable report: a cohort's, or one submission's, as one HTML file."""

from __future__ import annotations

from csp.constants import NONE
from csp.decorators import csp
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from reviewer.cohort.committee_report import (
    cohort_report_html,
    style_source,
    submission_report_html,
)
from reviewer.review.scoring import sees_others
from reviewer.views.access import get_assignment_for_lead, get_submission_for_user, lead_required

# Nothing may load, not even from this site; the one inline stylesheet is allowed by its
# hash, so a style injected into the file (were escaping ever to fail) would not apply.
REPORT_CSP = {
    "default-src": [NONE],
    "style-src": [style_source()],
    "img-src": [NONE],
    "base-uri": [NONE],
    "form-action": [NONE],
    "frame-ancestors": [NONE],
}


def _attachment(html: str, filename: str) -> HttpResponse:
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # An attachment: the browser saves it rather than opening it inside the dashboard.
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@lead_required
@require_GET
@never_cache
@csp(REPORT_CSP)  # type: ignore[arg-type]  # django-csp types views as taking the request only
def cohort_report(request: HttpRequest, slug: str) -> HttpResponse:
    """Hiring leads: the committee's report of one assignment's cohort (others get 404)."""
    assignment = get_assignment_for_lead(request, slug)
    html = cohort_report_html(assignment, request=request)
    return _attachment(html, f"{assignment.slug}-report.html")


@login_required
@require_GET
@never_cache
@csp(REPORT_CSP)  # type: ignore[arg-type]  # django-csp types views as taking the request only
def submission_report(request: HttpRequest, pk: int) -> HttpResponse:
    """One submission's report, for a hiring lead or for a reviewer of it who has
    submitted their own review.

    The report holds every reviewer's scores, notes and history, as a hiring lead sees
    them. The blind rule (`sees_others`) shows those to a reviewer only once their own
    review is submitted, so a reviewer still scoring (or who has not started) gets 404
    here rather than a cut-down file: a shared file cannot follow them as the page does,
    and one that changes content with who downloaded it would mislead the committee.
    """
    submission = get_submission_for_user(request, pk)
    if not sees_others(request.user, submission):
        raise Http404("the report shows every review: submit your own first")
    html = submission_report_html(submission, request=request)
    return _attachment(html, f"{submission.assignment.slug}-submission-{submission.pk}-report.html")
