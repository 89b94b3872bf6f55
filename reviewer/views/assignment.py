"""The assignment screens: one assignment with its uploads, and a new assignment."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from reviewer.cohort.comparison import assignment_rows
from submissions.assignments import PRESETS, AssignmentError, assignment_apply, assignment_values
from submissions.checks.spot_schedule import reference_drift
from submissions.checks.spot_spend import spend_ledger
from submissions.forms import AssignmentForm, UploadForm
from submissions.intake.git.fetch import split_credentials
from submissions.intake.repository import AccessRefused, submission_from_repository
from submissions.intake.upload import UploadRejected, submission_create
from submissions.models import Assignment, Candidate, Submission
from submissions.selectors import assignment_rules

ASSIGNMENT_PAGE_SIZE = 50


_SORTS = {"newest": "-created", "oldest": "created", "name": "candidate__name"}


@sensitive_post_parameters("token")
@login_required
@require_http_methods(["GET", "POST"])
def assignment_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """Candidates of an assignment: status, check badges, score, reviews; filter, sort, upload."""
    assignment = get_object_or_404(Assignment, slug=slug)
    form, refusal, done = handle_upload(request, assignment)
    if done is not None:
        return done
    submissions = (
        Submission.objects.visible_to(request.user)
        .filter(assignment=assignment)
        .select_related("candidate")
        .annotate(jobs_pending=Count("jobs", filter=Q(jobs__state__in=["queued", "running"])))
    )
    query = request.GET.get("q", "").strip()
    if query:
        submissions = submissions.filter(candidate__name__icontains=query)
    status = request.GET.get("status", "")
    if status in Submission.Status.values:
        submissions = submissions.filter(status=status)
    sort = request.GET.get("sort", "newest")
    by_score = sort == "score"
    submissions = submissions.order_by(_SORTS.get(sort, "-created"), "pk")
    page = Paginator(submissions, ASSIGNMENT_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = assignment_rows(request.user, assignment, list(page.object_list))
    if by_score:
        rows.sort(key=lambda r: (r["score"] is None, -(r["score"] or 0)))
    return render(
        request,
        "reviewer/assignment.html",
        {
            "assignment": assignment,
            "rows": rows,
            "rules": assignment_rules(assignment),
            "page": page,
            "form": form,
            "refusal": refusal,
            "q": query,
            "status": status,
            "sort": sort,
            "statuses": Submission.Status.choices,
            "reference": reference_drift(assignment),
            # The month's spot-check spend, where the team configured endpoints to spend on.
            "spend": (
                spend_ledger(assignment, settings.SPOT_CHECK_ENDPOINTS)
                if settings.SPOT_CHECK_ENDPOINTS
                else None
            ),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def assignment_new(request: HttpRequest) -> HttpResponse:
    """Create an assignment from a shape preset."""
    form = AssignmentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items() if v not in ("", None)}
        try:
            values = assignment_values(data)
        except AssignmentError as exc:
            form.add_error(None, str(exc))
        else:
            assignment, _ = assignment_apply(values=values)
            messages.success(request, f"Assignment {assignment.title} saved.")
            return redirect(assignment)
    return render(request, "reviewer/assignment_new.html", {"form": form, "presets": PRESETS})


# Where a refused upload's reason waits for the page the refusal redirects to.
_REFUSAL_KEY = "upload_refusal"
# What of a refused upload's form is shown again: never the file, never the token.
_KEPT_FIELDS = ("candidate", "repository_url", "ref", "stub_url")


def handle_upload(
    request: HttpRequest, assignment: Assignment
) -> tuple[UploadForm, dict | None, HttpResponse | None]:
    """The upload form of an assignment page: a redirect to the new submission; after a
    refusal, a redirect back to this page (post/redirect/get: a reload does not send the
    file again), where the form shows the reason at its top and what was typed."""
    if request.method != "POST":
        refusal = request.session.pop(_REFUSAL_KEY, None)
        if refusal is None:
            return UploadForm(), None, None
        return UploadForm(initial=refusal["data"]), refusal, None
    form = UploadForm(request.POST, request.FILES or None)
    if not form.is_valid():
        return form, None, _refused(request, assignment, form)
    candidate, _ = Candidate.objects.get_or_create(name=form.cleaned_data["candidate"])
    upload = form.cleaned_data["archive"]
    field = "archive" if upload else "repository_url"
    try:
        if upload:
            result = submission_create(
                upload=upload,
                filename=upload.name,
                candidate=candidate,
                assignment=assignment,
                stub_url=form.cleaned_data["stub_url"],
                uploaded_by=request.user,
            )
        else:
            result = submission_from_repository(
                url=form.cleaned_data["repository_url"],
                ref=form.cleaned_data["ref"] or None,
                token=form.cleaned_data["token"],
                candidate=candidate,
                assignment=assignment,
                stub_url=form.cleaned_data["stub_url"],
                uploaded_by=request.user,
            )
    except UploadRejected as exc:
        # A token asked for or refused is said beside the token's field.
        form.add_error("token" if isinstance(exc, AccessRefused) else field, str(exc))
        return form, None, _refused(request, assignment, form)
    submission = result.submission
    if request.user.pk is not None:  # signed in (login_required)
        submission.reviewers.add(request.user.pk)
    if result.reason:
        what = "archive" if upload else "repository"
        form.add_error(field, f"The {what} was rejected: {result.reason}")
        return form, None, _refused(request, assignment, form)
    if not result.created:
        messages.info(request, "This hand-in was already uploaded for this candidate.")
    return form, None, redirect(submission)


def _refused(request: HttpRequest, assignment: Assignment, form: UploadForm) -> HttpResponse:
    """Keep the refusal's reasons (each under its field's label) and what was typed, without
    credentials, in the session; then back to the form, by GET."""
    data = {name: str(form.data.get(name, "")) for name in _KEPT_FIELDS}
    data["repository_url"] = _without_credentials(data["repository_url"])
    errors = [
        {
            "field": name,
            "label": form[name].label if name in form.fields else "",
            "messages": [str(m) for m in messages_],
        }
        for name, messages_ in form.errors.items()
    ]
    fields = {e["field"]: True for e in errors if e["label"]}
    request.session[_REFUSAL_KEY] = {"data": data, "errors": errors, "fields": fields}
    return redirect(f"{assignment.get_absolute_url()}#upload-form")


def _without_credentials(url: str) -> str:
    """A repository URL as shown again: without the user and password it held (the token
    field is never shown again)."""
    if not url:
        return ""
    try:
        return split_credentials(url)[0]
    except ValueError:  # not a URL at all: nothing of it is shown again
        return ""
