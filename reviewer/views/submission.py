"""The submission screen: evidence, the job panel that polls on itself, and the rubric."""

from __future__ import annotations

import copy
import secrets
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from reviewer.fragments import fragment_cached
from reviewer.models import Note, Review, RubricRow, Score
from reviewer.ops.health import queue_down
from reviewer.review.forms import RecommendationForm, ScoreForm
from reviewer.review.markdown import render_markdown
from reviewer.review.pins import (
    PinRefused,
    note_place,
    pins_by_target,
    row_anchor,
    target_id,
    visible_pins,
)
from reviewer.review.scoring import (
    ScoreConflict,
    ScoreRefused,
    checks_not_applying,
    checks_passed,
    events_visible_to,
    recommendation_save,
    review_for,
    review_get_or_create,
    review_submit,
    reviews_of,
    reviews_visible_to,
    score_save,
    scoring_offered,
    sees_others,
)
from reviewer.review.verdict import Verdict, chip, verdict_for
from reviewer.review.worklist import queue_for
from reviewer.views.access import HtmxHttpRequest, get_submission_for_user
from submissions.forms import spot_check_form
from submissions.intake.repository import (
    RefCheckRefused,
    ref_check_start,
    submission_auth_forget,
)
from submissions.jobs.rerun import RERUN_KINDS, RerunRefused, submission_rerun
from submissions.models import Job, Submission
from submissions.roles import may_spend
from submissions.selectors import cohort_others, evidence_context, jobs_context


def _rubric_context(
    request: HttpRequest,
    submission: Submission,
    all_checks: list | None = None,
    reviews: list[Review] | None = None,
) -> dict[str, object]:
    """The rubric pane: the user's own scores as forms, and what others' reviews may show.
    `reviews`: `reviews_of(submission)`, when the caller read them already."""
    # Every review with its scores and rubric rows, read once for the own form, for what
    # others' reviews may show and for the blind rule.
    if reviews is None:
        reviews = reviews_of(submission)
    review = review_for(submission=submission, reviewer=request.user, reviews=reviews)
    if review is None:
        return {"review": None}
    if all_checks is None:
        all_checks = list(submission.checks.all())
    checks = {c.check_id: c for c in all_checks}
    statuses = {cid: c.status for cid, c in checks.items()}
    # An unsaved draft (no score yet) has no rows to read; the first save creates it.
    scores = {s.row_id: s for s in review.scores.all()} if review.pk else {}
    notes = dict(
        Note.objects.filter(submission=submission, author_id=request.user.pk)
        .exclude(row=None)
        .values_list("row_id", "body")
    )
    rows = []
    tab = secrets.token_hex(8)  # this page load: its quick successive saves are one intent
    not_applying = checks_not_applying(submission.assignment)
    # Read once for the rows here and the rubric's total weight the page shows.
    prefetch_related_objects([review.rubric], "rows")
    for row in review.rubric.rows.all():
        context = _row_context(
            row, scores.get(row.pk), statuses, notes.get(row.pk, ""), tab, not_applying
        )
        context["evidence_choices"] = _evidence_choices(row, checks)
        rows.append(context)
    unscored = [r["row"].title for r in rows if r["score"] is None or r["score"].value is None]
    # A hiring lead is offered the choice to score (`review_start`), not a scoring form.
    lead_offer = scoring_offered(request.user, review)
    refused = request.GET.get("submit") == "refused"
    return {
        "review": review,
        "rubric_rows": rows,
        "unscored": unscored,
        "lead_offer": lead_offer,
        "submit_refused": refused and bool(unscored),
        "recommendation_refused": refused and not unscored and not review.recommendation,
        "recommendation_choices": Review.Recommendation.choices,
        "visible_reviews": reviews_visible_to(request.user, submission, all_checks, reviews),
        "history": events_visible_to(
            request.user, submission, sees_others(request.user, submission, reviews)
        ),
        "check_statuses": statuses,
    }


def _evidence_choices(row: RubricRow, checks: dict) -> list[str]:
    """Lines a reviewer can pick as evidence: the linked checks' summaries."""
    return [
        f"{cid} ({checks[cid].status}): {checks[cid].summary}"[:300]
        for cid in row.check_ids
        if cid in checks
    ]


def _levels(row: RubricRow, form: ScoreForm) -> tuple[list[dict[str, object]], str]:
    """The segmented control's levels (value, its anchor, whether chosen) and the chosen
    level's anchor, read from the form (a refused form shows what a reload shows)."""
    chosen = form["value"].value()
    chosen = "" if chosen is None else str(chosen)
    anchors = list(row.anchors or [])[:4]
    anchors += [""] * (4 - len(anchors))
    levels = [
        {"value": str(v), "anchor": anchors[v], "checked": str(v) == chosen} for v in range(4)
    ]
    picked = next((lv["anchor"] for lv in levels if lv["checked"]), "")
    return levels, str(picked)


def _row_context(
    row: RubricRow,
    score: Score | None,
    statuses: dict[str, str],
    note: str = "",
    tab: str = "",
    not_applying: frozenset[str] = frozenset(),
) -> dict:
    version = score.version if score else 0
    initial = {
        "value": "" if score is None or score.value is None else str(score.value),
        "evidence": score.evidence if score else "",
        "override_reason": score.override_reason if score else "",
        "version": version,
        "tab": tab,
        "seq": score.seq if score and score.tab == tab else 0,
    }
    passed, missing = checks_passed(row, statuses, not_applying=not_applying)
    form = ScoreForm(initial=initial, prefix=f"row{row.pk}")
    levels, anchor = _levels(row, form)
    return {
        "row": row,
        "score": score,
        "form": form,
        "levels": levels,
        "anchor": anchor,
        "note": note,
        "note_html": render_markdown(note) if note else "",
        "checks_ok": passed,
        "checks_missing": missing,
        "linked": [chip(cid, statuses.get(cid)) for cid in row.check_ids],
    }


def _counts_context(request: HttpRequest, submission: Submission) -> dict[str, Any]:
    """Everything on the desk that counts or states what the rubric holds (the verdict, the
    queue, the phone bar, the submit bar), read from the database after a save, to be sent
    out of band: no place on the page is left saying an older count."""
    context: dict[str, Any] = dict(jobs_context(submission))
    checks = list(submission.checks.all())
    context.update(_rubric_context(request, submission, checks))
    context["verdict"] = _verdict(submission, checks, context)
    context["queue"] = queue_for(request.user, submission)
    context["oob"] = True
    return context


def _with_counts(request: HttpRequest, submission: Submission, response: HttpResponse) -> None:
    """Append the desk's counts, out of band, to an htmx answer."""
    counts = render_to_string(
        "reviewer/submission.html#desk-counts", _counts_context(request, submission), request
    )
    response.content = response.content + counts.encode()


@login_required
@require_GET
def submission_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One submission: header, jobs, checks, recordings, conversations, trace, rubric."""
    submission = get_submission_for_user(request, pk)
    context = jobs_context(submission)
    context["rerun_kinds"] = list(RERUN_KINDS)
    # The live spot check: offered to those who may spend the team's model budget.
    spending = bool(settings.SPOT_CHECK_ENDPOINTS) and may_spend(request.user)
    context["spot_form"] = spot_check_form(submission) if spending else None
    context["spot_checks"] = list(submission.spot_checks.all()[:5])
    if request.htmx and request.GET.get("panel") == "jobs":
        response = render(request, "reviewer/submission.html#job-panel", context)
        ended = not context["jobs_active"]
        # The page sends the job states it shows; another state (a job started or ended:
        # analysis done while the replay runs) brings what the jobs wrote so far.
        moved = request.GET.get("seen", context["jobs_seen"]) != context["jobs_seen"]
        if not ended and not moved:
            return response
        # What the jobs changed comes along out of band, so the page turns true without a
        # reload; once they have all ended, 286 tells htmx to stop polling.
        _sections(request, submission, context)
        context["oob"] = True
        live = render_to_string("reviewer/submission.html#live-sections", context, request)
        content = response.content + live.encode()
        return HttpResponseStopPolling(content) if ended else HttpResponse(content)
    checks = _sections(request, submission, context)
    context["queue"] = queue_for(request.user, submission)
    context["queue_down"] = queue_down(request.user)
    context.update(_pin_context(request, submission, checks, context))
    return render(request, "reviewer/submission.html", context)


def _sections(request: HttpRequest, submission: Submission, context: dict) -> list:
    """What the jobs change on the page (evidence, rubric, verdict), into `context`; the
    submission's checks, read once for all three."""
    # Every review, read once for the pins' blind rule and the rubric pane.
    reviews = reviews_of(submission)
    context["pin_notes"] = visible_pins(
        request.user, submission, sees_others(request.user, submission, reviews)
    )
    checks = list(submission.checks.all())
    context["evidence"] = evidence_html(request, context, checks)
    context.update(_rubric_context(request, submission, checks, reviews))
    context["verdict"] = _verdict(submission, checks, context)
    return checks


def _pin_context(request: HttpRequest, submission: Submission, checks: list, context: dict) -> dict:
    """The rubric pane's notes on the evidence and the one pin form's choices."""
    notes = pins_by_target(request_pins(request, submission, context))
    pins = [p for group in notes.values() for p in group]
    review = context.get("review")
    choices = []
    if review is not None and review.state == Review.State.DRAFT and not context.get("lead_offer"):
        # A note on a rubric row: the same form, the row's one note (edited in place).
        choices += [
            (row_anchor(rc["row"].pk), f"row: {rc['row'].title}")
            for rc in context.get("rubric_rows") or []
        ]
    choices += [(f"check:{c.check_id}", f"check {c.check_id}") for c in checks]
    turns = submission.turns.order_by("thread", "index").values_list("thread", "index")[:500]
    choices += [(f"turn:{t}.{i}", f"thread {t}, turn {i}") for t, i in turns]
    hops = submission.trace_rows.order_by("line").values_list("line", flat=True)[:500]
    choices += [(f"hop:{line}", f"trace line {line}") for line in hops]
    selected = request.GET.get("pin", "")
    row_notes = {row_anchor(rc["row"].pk): rc["note"] for rc in context.get("rubric_rows") or []}
    return {
        "pin_list": pins,
        "pin_choices": choices,
        "pin_selected": selected,
        # Opened on a row (no JS: ?pin=row:<id>): its note, to edit in place.
        "pin_body": row_notes.get(selected, ""),
    }


def _verdict(submission: Submission, checks: list, context: dict[str, Any]) -> Verdict:
    review = context.get("review")
    rows = context.get("rubric_rows") or []
    return verdict_for(
        checks,
        submission_status=submission.status,
        status_reason=submission.status_reason or "",
        jobs_active=bool(context.get("checks_active")),
        rows_total=len(rows) if review is not None else None,
        rows_scored=len(rows) - len(context.get("unscored") or []),
        review_state=review.state if review is not None and review.pk else None,
        recommended=bool(review is not None and review.recommendation),
        scoring=not context.get("lead_offer"),
    )


def _reverted(form: ScoreForm, review: Review, row: RubricRow) -> tuple[ScoreForm, int | None]:
    """The refused form with its score back at the stored value (what a reload shows), the
    rest of what was typed kept."""
    stored = Score.objects.filter(review=review, row=row).values_list("value", flat=True).first()
    data = form.data.copy()  # type: ignore[attr-defined]  # bound to request.POST, a QueryDict
    data[form.add_prefix("value")] = "" if stored is None else str(stored)
    reverted = ScoreForm(data, prefix=form.prefix)
    reverted.is_valid()
    return reverted, stored


@login_required
@require_POST
def score_update(request: HtmxHttpRequest, pk: int, row_id: int) -> HttpResponse:
    """Autosave one rubric row: an ordinary form, re-rendered as its own partial, with the
    desk's counts out of band."""
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
                # A row's note is written by the note form; an older form may still send it.
                notes=data["notes"] if form.add_prefix("notes") in request.POST else None,
                tab=data["tab"] or "",
                seq=data["seq"] or 0,
            )
            saved = True
        except ScoreConflict as exc:
            conflict = exc
            status = 409
        except ScoreRefused as exc:
            form, stored = _reverted(form, review, row)
            kept = "no score" if stored is None else stored
            form.add_error(None, f"Not saved, the row keeps {kept}: {exc}")
            status = 400
    else:
        status = 400
    if not request.htmx:
        if saved:
            messages.success(request, f"Saved: {row.title}")
        elif conflict:
            messages.error(request, f"Not saved: {conflict}")
        else:
            text = "; ".join(str(e) for e in form.non_field_errors())
            messages.error(request, text if text.startswith("Not saved") else f"Not saved: {text}")
        return redirect(f"{submission.get_absolute_url()}#row-{row.pk}")
    score = Score.objects.filter(review=review, row=row).first()
    note = Note.objects.filter(submission=submission, author_id=request.user.pk, row=row).first()
    tab = form.cleaned_data.get("tab", "") if form.is_valid() else ""
    not_applying = checks_not_applying(submission.assignment)
    context = _row_context(row, score, statuses, note.body if note else "", tab or "", not_applying)
    checks = {c.check_id: c for c in submission.checks.filter(check_id__in=row.check_ids)}
    context["evidence_choices"] = _evidence_choices(row, checks)
    if not saved:
        context["form"] = form  # keep what was typed, with its errors
        context["levels"], context["anchor"] = _levels(row, form)
    context.update(
        {
            "submission": submission,
            "review": review,
            "saved": saved,
            "conflict": conflict,
            "now": timezone.now(),
        }
    )
    response = render(request, "reviewer/submission.html#rubric-row", context, status=status)
    _with_counts(request, submission, response)
    return response


@login_required
@require_POST
def recommendation_update(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Autosave the overall recommendation (strong no … strong yes), like a row."""
    submission = get_submission_for_user(request, pk)
    review = review_get_or_create(submission=submission, reviewer=request.user)
    if review is None:
        raise Http404("this assignment has no rubric")
    form = RecommendationForm(request.POST)
    error = ""
    saved = False
    if form.is_valid():
        try:
            recommendation_save(review=review, value=form.cleaned_data["recommendation"])
            saved = True
        except ScoreRefused as exc:
            error = f"Not saved: {exc}"
    else:
        error = "Not saved: a recommendation is strong no, no, yes or strong yes"
    if not request.htmx:
        if saved:
            messages.success(request, "Saved: the overall recommendation")
        else:
            messages.error(request, error)
        return redirect(f"{submission.get_absolute_url()}#recommendation")
    review.refresh_from_db()
    context = {
        "submission": submission,
        "review": review,
        "recommendation_choices": Review.Recommendation.choices,
        "saved": saved,
        "rec_error": error,
        "now": timezone.now(),
    }
    response = render(
        request,
        "reviewer/submission.html#recommendation",
        context,
        status=200 if saved else 400,
    )
    _with_counts(request, submission, response)
    return response


@login_required
@require_POST
def review_start(request: HttpRequest, pk: int) -> HttpResponse:
    """A hiring lead chooses to score this hand-in: their draft review starts, and others'
    reviews are hidden from them until they submit it."""
    submission = get_submission_for_user(request, pk)
    if review_get_or_create(submission=submission, reviewer=request.user) is None:
        raise Http404("this assignment has no rubric")
    return redirect(f"{submission.get_absolute_url()}#rubric")


@login_required
@require_POST
def review_submit_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Submit one's review; then others' scores become visible. On success, on to the next
    hand-in of the queue still to score (or, at the end of the queue, its done state)."""
    submission = get_submission_for_user(request, pk)
    review = review_get_or_create(submission=submission, reviewer=request.user)
    if review is None:
        raise Http404("this assignment has no rubric")
    try:
        review_submit(review=review)
    except ScoreRefused:
        # Said where the reviewer lands (#rubric), beside what is still missing.
        url = f"{submission.get_absolute_url()}?submit=refused#rubric"
    else:
        messages.success(request, f"Review of {submission.candidate.name} submitted.")
        queue = queue_for(request.user, submission)
        if queue.next_unscored is not None:
            url = reverse("submission", args=[queue.next_unscored])
        else:
            url = f"{submission.get_absolute_url()}#queue-done"
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


# Bump when the evidence partials change, so no cached HTML of the old layout is served.
_EVIDENCE_LAYOUT = 8


_EVIDENCE_TTL = 3600


_EVIDENCE_PARTS = ("banner", "top", "bottom")

_PAGE_PARAMS = frozenset({"recordings", "turns", "trace", "findings"})


class _Item(dict):
    """An evidence item as the template reads it: a key it lacks reads as "", as Django's
    template engine renders a missing variable (string_if_invalid), without the engine's
    slow path for a failed lookup (a KeyError, an AttributeError, dir() and int() for each
    of the keys an item may lack: most of the checks table's rendering time)."""

    def __missing__(self, key: str) -> str:
        return ""


def request_pins(request: HttpRequest, submission: Submission, context: dict) -> list:
    """The pinned notes this user may see: read once per request (the view puts them in
    the context), else read here."""
    pins = context.get("pin_notes")
    return pins if pins is not None else visible_pins(request.user, submission)


def evidence_html(
    request: HttpRequest, context: dict[str, Any], checks: list | None = None
) -> dict[str, str]:
    """The page's evidence sections as HTML, cached while no job of the submission runs.

    Only a running job writes what these sections show (checks, recordings, turns, trace
    rows, findings, logs). While none runs the rows stay as they are until a job is queued
    or starts, which changes the jobs' states and attempts: the cache key holds them. (A
    job only queued writes nothing: a hand-in whose replay waits for a worker is read
    once, not on every view. A job that starts counts an attempt, so a job queued again
    never meets an entry from before it ran.)
    """
    submission: Submission = context["submission"]
    jobs: list[Job] = context["jobs"]
    pins = request_pins(request, submission, context)
    # Blind across the cohort: another hand-in is named only to a viewer who may see it.
    cohort = cohort_others(request.user, submission)

    def build() -> dict[str, str]:
        # The page's checks when read already (copies: their evidence is rewritten for the
        # template, and the verdict and rubric read the originals).
        own = None if checks is None else [copy.copy(c) for c in checks]
        shown = evidence_context(submission, jobs, request.GET, own)
        for check in shown["checks"]:  # type: ignore[attr-defined]  # the selector's list
            check.evidence = [_Item(e) if isinstance(e, dict) else e for e in check.evidence]
        full = {
            **context,
            **shown,
            "cohort_others": cohort.visible,
            "pins": pins_by_target(pins),
            "can_pin": not settings.DEMO_MODE,
            # Reversed once here, not per evidence item, recording and finding (hundreds
            # of `{% url %}` calls were a tenth of the page's rendering).
            "file_url": reverse("submission_file", args=[submission.pk]),
        }
        return {
            part: str(render_to_string(f"reviewer/submission.html#evidence-{part}", full, request))
            for part in _EVIDENCE_PARTS
        }

    if any(job.state == Job.State.RUNNING for job in jobs):
        html = build()
    else:
        signature = (
            _EVIDENCE_LAYOUT,
            # The notes pinned in these sections that this user may see.
            sorted((n.pk, n.updated) for n in pins),
            # Which submission this is, even if a deleted one's id is given again.
            (submission.archive_sha256, submission.created),
            # The assignment's rules decide which sections show (its shape, its overrides).
            (submission.assignment.shape, submission.assignment.updated),
            [(j.pk, j.state, j.attempts, j.finished_at) for j in jobs],
            # Another hand-in's analysis rewrites the cohort check; whom this user may see.
            (cohort.updated, sorted(cohort.visible)),
            # Only the paging parameters change these sections (not ?pin=, ?submit=).
            sorted((k, v) for k, v in request.GET.lists() if k in _PAGE_PARAMS),
        )
        html = fragment_cached("evidence", submission.pk, signature, build, ttl=_EVIDENCE_TTL)
    # Our own templates rendered these from escaped values.
    return {part: mark_safe(text) for part, text in html.items()}  # noqa: S308


@login_required
@require_POST
def note_pin_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The one note form: a note on a rubric row or pinned to a check, a turn or a hop.
    With htmx the form answers in place, the note shown where it belongs out of band;
    without, back to it on the page."""
    submission = get_submission_for_user(request, pk)
    anchor = request.POST.get("anchor", "")
    body = request.POST.get("body", "")
    error = ""
    try:
        note_place(submission=submission, author=request.user, anchor=anchor, body=body)
    except PinRefused as exc:
        error = f"Note not pinned: {exc}"
    if not request.htmx:
        if error:
            messages.error(request, error)
            return redirect(submission.get_absolute_url())
        target = target_id(anchor) or f"row-{anchor.partition(':')[2]}"
        return redirect(f"{submission.get_absolute_url()}#{target}")
    context: dict[str, Any] = dict(jobs_context(submission))
    checks = _sections(request, submission, context)
    context["queue"] = queue_for(request.user, submission)
    context.update(_pin_context(request, submission, checks, context))
    context.update(
        {
            "pin_selected": anchor,
            "pin_body": body if error else "",
            "pin_error": error,
            "pin_saved": not error,
            "now": timezone.now(),
        }
    )
    form = render_to_string("reviewer/submission.html#pin-form", context, request)
    context["oob"] = True
    rest = render_to_string("reviewer/submission.html#note-answer", context, request)
    return HttpResponse(form + rest, status=400 if error else 200)


@login_required
@require_POST
def jobs_rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """Run a submission's jobs again (all, or one kind), then show the job panel."""
    submission = get_submission_for_user(request, pk)
    what = request.POST.get("what", "all")
    try:
        job = submission_rerun(submission=submission, what=what)
    except RerunRefused as exc:
        messages.error(request, f"Not run again: {exc}")
    else:
        messages.success(request, f"{job.get_kind_display()} queued again.")
    return redirect(f"{submission.get_absolute_url()}#job-panel")


@sensitive_post_parameters("token")
@login_required
@require_POST
def ref_check_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue *Check again* of a repository submission's ref; the job panel shows it run.

    A token typed in replaces the kept one, sealed (`submission_auth_save`) before the job is
    queued: the job reads it from there, so no job row, log or page ever holds it.
    """
    submission = get_submission_for_user(request, pk)
    try:
        job = ref_check_start(submission=submission, token=request.POST.get("token", "").strip())
    except RefCheckRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"{job.get_kind_display()} queued: the job panel shows it run.")
    return redirect(f"{submission.get_absolute_url()}#job-panel")


@login_required
@require_POST
def token_forget_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Drop the access token kept (sealed) for a repository submission's *Check again*."""
    submission = get_submission_for_user(request, pk)
    submission_auth_forget(submission)
    messages.info(request, "The access token kept for this repository is forgotten.")
    return redirect(f"{submission.get_absolute_url()}#submission-header")
