"""Pages of the reviewing domain: cohorts, the submission page with its rubric, scoring."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from cassettes_app.checks.catalog import BYTE_IDENTICAL
from cassettes_app.diff import FOLD_AT, diff_turns, render_segments
from reviewer.cache import cached_fragment
from reviewer.comparison import assignment_rows, chart_bars, comparison_csv, comparison_rows
from reviewer.forms import ScoreForm
from reviewer.health import queue_health
from reviewer.models import Note, RubricRow, Score
from reviewer.scoring import (
    ScoreConflict,
    ScoreRefused,
    checks_passed,
    review_get_or_create,
    review_submit,
    reviews_visible_to,
    score_save,
)
from submissions.forms import RerecordForm
from submissions.intake.rerecord import rerecord_create
from submissions.intake.upload import UploadRejected
from submissions.models import Assignment, Submission
from submissions.roles import is_hiring_lead
from submissions.views import (
    evidence_html,
    get_submission_for_user,
    handle_upload,
    jobs_context,
)


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


def _rubric_context(request: HttpRequest, submission: Submission) -> dict[str, object]:
    """The rubric pane: the user's own scores as forms, and what others' reviews may show."""
    review = review_get_or_create(submission=submission, reviewer=request.user)
    if review is None:
        return {"review": None}
    checks = {c.check_id: c for c in submission.checks.all()}
    statuses = {cid: c.status for cid, c in checks.items()}
    scores = {s.row_id: s for s in review.scores.all()}
    notes = dict(
        Note.objects.filter(submission=submission, author=request.user)
        .exclude(row=None)
        .values_list("row_id", "body")
    )
    rows = []
    for row in review.rubric.rows.all():
        context = _row_context(row, scores.get(row.pk), statuses, notes.get(row.pk, ""))
        context["evidence_choices"] = _evidence_choices(row, checks)
        rows.append(context)
    return {
        "review": review,
        "rubric_rows": rows,
        "visible_reviews": reviews_visible_to(request.user, submission),
        "check_statuses": statuses,
    }


def _evidence_choices(row: RubricRow, checks: dict) -> list[str]:
    """Lines a reviewer can pick as evidence: the linked checks' summaries."""
    return [
        f"{cid} ({checks[cid].status}): {checks[cid].summary}"[:300]
        for cid in row.check_ids
        if cid in checks
    ]


def _row_context(
    row: RubricRow, score: Score | None, statuses: dict[str, str], note: str = ""
) -> dict:
    version = score.version if score else 0
    initial = {
        "value": "" if score is None or score.value is None else str(score.value),
        "evidence": score.evidence if score else "",
        "override_reason": score.override_reason if score else "",
        "notes": note,
        "version": version,
    }
    passed, missing = checks_passed(row, statuses)
    return {
        "row": row,
        "score": score,
        "form": ScoreForm(initial=initial, prefix=f"row{row.pk}"),
        "checks_ok": passed,
        "checks_missing": missing,
        "linked": [(cid, statuses.get(cid, "not run")) for cid in row.check_ids],
    }


@login_required
@require_GET
def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One submission: header, jobs, checks, recordings, conversations, trace, rubric."""
    submission = get_submission_for_user(request, pk)
    context = jobs_context(submission)
    if request.htmx and request.GET.get("panel") == "jobs":
        response = render(request, "submissions/submission.html#job-panel", context)
        if not context["jobs_active"]:
            # 286 tells htmx to stop polling: the jobs have ended.
            return HttpResponseStopPolling(response.content)
        return response
    context["evidence"] = evidence_html(request, context)
    context.update(_rubric_context(request, submission))
    return render(request, "submissions/submission.html", context)


@login_required
@require_POST
def score_update(request: HttpRequest, pk: int, row_id: int) -> HttpResponse:
    """Autosave one rubric row: an ordinary form, re-rendered as its own partial."""
    submission = get_submission_for_user(request, pk)
    review = review_get_or_create(submission=submission, reviewer=request.user)
    if review is None:
        raise Http404("this assignment has no rubric")
    row = get_object_or_404(RubricRow, pk=row_id, template=review.rubric)
    form = ScoreForm(request.POST, prefix=f"row{row.pk}")
    statuses = dict(submission.checks.values_list("check_id", "status"))
    status = 200
    conflict = None
    saved = False
    if form.is_valid():
        data = form.cleaned_data
        try:
            score_save(
                review=review,
                row=row,
                value=data["value"],
                evidence=data["evidence"],
                override_reason=data["override_reason"],
                expected_version=data["version"],
                notes=data["notes"],
            )
            saved = True
        except ScoreConflict as exc:
            conflict = exc
            status = 409
        except ScoreRefused as exc:
            form.add_error(None, str(exc))
            status = 400
    else:
        status = 400
    if not request.htmx:
        if saved:
            messages.success(request, f"Saved: {row.title}")
        elif conflict:
            messages.error(request, f"Not saved: {conflict}")
        else:
            messages.error(request, "Not saved: " + "; ".join(form.errors.get("__all__", [])))
        return redirect(f"{submission.get_absolute_url()}#row-{row.pk}")
    score = Score.objects.filter(review=review, row=row).first()
    note = Note.objects.filter(submission=submission, author=request.user, row=row).first()
    context = _row_context(row, score, statuses, note.body if note else "")
    checks = {c.check_id: c for c in submission.checks.filter(check_id__in=row.check_ids)}
    context["evidence_choices"] = _evidence_choices(row, checks)
    if not saved:
        context["form"] = form  # keep what was typed, with its errors
    context.update(
        {
            "submission": submission,
            "review": review,
            "saved": saved,
            "conflict": conflict,
            "now": timezone.now(),
        }
    )
    return render(request, "submissions/submission.html#rubric-row", context, status=status)


@login_required
@require_POST
def review_submit_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Submit one's review; then others' scores become visible."""
    submission = get_submission_for_user(request, pk)
    review = review_get_or_create(submission=submission, reviewer=request.user)
    if review is None:
        raise Http404("this assignment has no rubric")
    try:
        review_submit(review=review)
        messages.success(request, "Review submitted.")
    except ScoreRefused as exc:
        messages.error(request, str(exc))
    return redirect(f"{submission.get_absolute_url()}#rubric")


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


def _thread_turns(submission: Submission, thread: int) -> list[dict]:
    turns = submission.turns.filter(thread=thread).order_by("index")
    return [{"new_messages": t.new_messages, "response": t.response} for t in turns[:1000]]


def _diff_rows(left: list[dict], right: list[dict], full: bool) -> tuple[list[dict], int | None]:
    """Per-turn diff rows of two turn lists, rendered with word highlights and folding."""
    rows, first = diff_turns(left, right)
    fold_at = 10**9 if full else FOLD_AT
    rendered = []
    for row in rows:
        left_html, left_folded = render_segments(row.left_segments, fold_at=fold_at)
        right_html, right_folded = render_segments(row.right_segments, fold_at=fold_at)
        # render_segments escapes every piece of candidate text before adding <del>/<ins>.
        rendered.append(
            {
                "row": row,
                "left": mark_safe(left_html),  # noqa: S308
                "right": mark_safe(right_html),  # noqa: S308
                "folded": left_folded or right_folded,
            }
        )
    return rendered, first


def _diff_context(
    request: HttpRequest, submission: Submission, rerecord_form: RerecordForm | None = None
) -> dict[str, object]:
    """The diff page: another submission's thread, replay runs, and re-recorded versions."""
    full = request.GET.get("full") == "1"
    context: dict[str, object] = {"submission": submission, "full": full}
    replay = submission.checks.filter(check_id=BYTE_IDENTICAL).first()
    context["replay_diffs"] = [
        e for e in (replay.evidence if replay else []) if isinstance(e, dict) and e.get("diff")
    ]
    others = (
        Submission.objects.visible_to(request.user)
        .filter(assignment=submission.assignment)
        .exclude(pk=submission.pk)
        .select_related("candidate")
    )
    context["others"] = others
    context["rerecords"] = submission.rerecords.select_related("job")[:20]
    context["rerecord_form"] = rerecord_form or RerecordForm()
    against_id = request.GET.get("against", "")
    if against_id.isdigit():
        other = get_object_or_404(others, pk=int(against_id))
        thread = _int_param(request, "thread")
        other_thread = _int_param(request, "other_thread")
        rows, first = _diff_rows(
            _thread_turns(submission, thread), _thread_turns(other, other_thread), full
        )
        query = f"against={other.pk}&thread={thread}&other_thread={other_thread}"
        context.update(
            {
                "other": other,
                "rows": rows,
                "first": first,
                "thread": thread,
                "other_thread": other_thread,
                "left_label": submission.candidate.name,
                "right_label": other.candidate.name,
                "full_query": f"?{query}&full=1",
            }
        )
    return context


@login_required
@require_GET
def turn_diff(request: HttpRequest, pk: int) -> HttpResponse:
    """Per-turn diff: this submission's conversation against another's, or replay run 1 vs 2."""
    submission = get_submission_for_user(request, pk)
    return render(request, "reviewer/diff.html", _diff_context(request, submission))


@login_required
@require_POST
def rerecord_upload(request: HttpRequest, pk: int) -> HttpResponse:
    """Take a re-record archive for this submission and queue its comparison."""
    submission = get_submission_for_user(request, pk)
    form = RerecordForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["archive"]
        try:
            rerecord, created = rerecord_create(
                submission=submission,
                upload=upload,
                filename=upload.name,
                uploaded_by=request.user,
            )
        except UploadRejected as exc:
            form.add_error("archive", str(exc))
        else:
            if not created:
                messages.info(request, "This re-record archive was already uploaded.")
            return redirect(rerecord)
    context = _diff_context(request, submission, rerecord_form=form)
    return render(request, "reviewer/diff.html", context, status=400)


RERECORD_PAGE_SIZE = 50


@login_required
@require_GET
def rerecord_detail(request: HttpRequest, pk: int, rid: int) -> HttpResponse:
    """A re-record's pairs (differing first) and, for a chosen pair, its per-turn diff."""
    submission = get_submission_for_user(request, pk)
    rerecord = get_object_or_404(submission.rerecords.select_related("job"), pk=rid)
    pairs = rerecord.pairs.defer("original_turns", "rerecorded_turns")
    show = request.GET.get("show", "changed")
    if show == "changed":
        pairs = pairs.filter(changed=True)
    page = Paginator(pairs, RERECORD_PAGE_SIZE).get_page(request.GET.get("page"))
    context: dict[str, object] = {
        "submission": submission,
        "rerecord": rerecord,
        "page": page,
        "show": show,
        "full": request.GET.get("full") == "1",
    }
    pair_id = request.GET.get("pair", "")
    if pair_id.isdigit():
        pair = get_object_or_404(rerecord.pairs, pk=int(pair_id))
        rows, first = _diff_rows(pair.original_turns, pair.rerecorded_turns, context["full"])
        context.update(
            {
                "pair": pair,
                "rows": rows,
                "first": first,
                "left_label": "original",
                "right_label": "re-recorded",
                "full_query": f"?pair={pair.pk}&show={show}&full=1",
            }
        )
    return render(request, "reviewer/rerecord.html", context)


def _int_param(request: HttpRequest, name: str) -> int:
    value = request.GET.get(name, "0")
    return int(value) if value.isdigit() else 0


ASSIGNMENT_PAGE_SIZE = 50
_SORTS = {"newest": "-created", "oldest": "created", "name": "candidate__name"}


@login_required
@require_http_methods(["GET", "POST"])
def assignment_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """Candidates of an assignment: status, check badges, score, reviews; filter, sort, upload."""
    assignment = get_object_or_404(Assignment, slug=slug)
    form, done = handle_upload(request, assignment)
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
        "submissions/assignment.html",
        {
            "assignment": assignment,
            "rows": rows,
            "page": page,
            "form": form,
            "q": query,
            "status": status,
            "sort": sort,
            "statuses": Submission.Status.choices,
        },
        status=400 if form.errors else 200,
    )
