"""The submission screen: evidence, the job panel that polls on itself, and the rubric."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from reviewer.fragments import fragment_cached
from reviewer.models import Note, Review, RubricRow, Score
from reviewer.ops.health import queue_down
from reviewer.review.forms import ScoreForm
from reviewer.review.pins import PinRefused, pin_note, pins_by_target, target_id, visible_pins
from reviewer.review.scoring import (
    ScoreConflict,
    ScoreRefused,
    checks_not_applying,
    checks_passed,
    events_visible_to,
    review_for,
    review_get_or_create,
    review_submit,
    reviews_visible_to,
    score_save,
)
from reviewer.review.verdict import Verdict, verdict_for
from reviewer.review.worklist import queue_for
from reviewer.views.access import HtmxHttpRequest, get_submission_for_user
from submissions.intake.repository import ref_check
from submissions.jobs.rerun import RERUN_KINDS, RerunRefused, submission_rerun
from submissions.models import Job, Submission
from submissions.selectors import cohort_others, evidence_context, jobs_context


def _rubric_context(
    request: HttpRequest, submission: Submission, all_checks: list | None = None
) -> dict[str, object]:
    """The rubric pane: the user's own scores as forms, and what others' reviews may show."""
    review = review_for(submission=submission, reviewer=request.user)
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
    for row in review.rubric.rows.all():
        context = _row_context(
            row, scores.get(row.pk), statuses, notes.get(row.pk, ""), tab, not_applying
        )
        context["evidence_choices"] = _evidence_choices(row, checks)
        rows.append(context)
    unscored = [r["row"].title for r in rows if r["score"] is None or r["score"].value is None]
    return {
        "review": review,
        "rubric_rows": rows,
        "unscored": unscored,
        "submit_refused": request.GET.get("submit") == "refused" and bool(unscored),
        "visible_reviews": reviews_visible_to(request.user, submission),
        "history": events_visible_to(request.user, submission),
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
        "notes": note,
        "version": version,
        "tab": tab,
        "seq": score.seq if score and score.tab == tab else 0,
    }
    passed, missing = checks_passed(row, statuses, not_applying=not_applying)
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
def submission_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One submission: header, jobs, checks, recordings, conversations, trace, rubric."""
    submission = get_submission_for_user(request, pk)
    context = jobs_context(submission)
    context["rerun_kinds"] = list(RERUN_KINDS)
    if request.htmx and request.GET.get("panel") == "jobs":
        response = render(request, "reviewer/submission.html#job-panel", context)
        if not context["jobs_active"]:
            # The jobs have ended: what they changed comes along out of band, so the page
            # turns true without a reload; 286 tells htmx to stop polling.
            checks = _sections(request, submission, context)
            context["oob"] = True
            live = render_to_string("reviewer/submission.html#live-sections", context, request)
            return HttpResponseStopPolling(response.content + live.encode())
        return response
    checks = _sections(request, submission, context)
    context["queue"] = queue_for(request.user, submission)
    context["queue_down"] = queue_down(request.user)
    context.update(_pin_context(request, submission, checks, context))
    return render(request, "reviewer/submission.html", context)


def _sections(request: HttpRequest, submission: Submission, context: dict) -> list:
    """What the jobs change on the page (evidence, rubric, verdict), into `context`; the
    submission's checks, read once for all three."""
    context["pin_notes"] = visible_pins(request.user, submission)
    context["evidence"] = evidence_html(request, context)
    checks = list(submission.checks.all())
    context.update(_rubric_context(request, submission, checks))
    context["verdict"] = _verdict(submission, checks, context)
    return checks


def _pin_context(request: HttpRequest, submission: Submission, checks: list, context: dict) -> dict:
    """The rubric pane's notes on the evidence and the one pin form's choices."""
    notes = pins_by_target(request_pins(request, submission, context))
    pins = [p for group in notes.values() for p in group]
    choices = [(f"check:{c.check_id}", f"check {c.check_id}") for c in checks]
    turns = submission.turns.order_by("thread", "index").values_list("thread", "index")[:500]
    choices += [(f"turn:{t}.{i}", f"thread {t}, turn {i}") for t, i in turns]
    hops = submission.trace_rows.order_by("line").values_list("line", flat=True)[:500]
    choices += [(f"hop:{line}", f"trace line {line}") for line in hops]
    return {
        "pin_list": pins,
        "pin_choices": choices,
        "pin_selected": request.GET.get("pin", ""),
    }


def _verdict(submission: Submission, checks: list, context: dict[str, Any]) -> Verdict:
    review = context.get("review")
    rows = context.get("rubric_rows") or []
    return verdict_for(
        checks,
        submission_status=submission.status,
        status_reason=submission.status_reason or "",
        jobs_active=bool(context.get("jobs_active")),
        rows_total=len(rows) if review is not None else None,
        rows_scored=len(rows) - len(context.get("unscored") or []),
        review_state=review.state if review is not None and review.pk else None,
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
    context.update(
        {
            "submission": submission,
            "review": review,
            "saved": saved,
            "conflict": conflict,
            "now": timezone.now(),
        }
    )
    return render(request, "reviewer/submission.html#rubric-row", context, status=status)


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
    except ScoreRefused:
        # Said where the reviewer lands (#rubric), beside the rows still to score.
        return redirect(f"{submission.get_absolute_url()}?submit=refused#rubric")
    return redirect(f"{submission.get_absolute_url()}#rubric")


# Bump when the evidence partials change, so no cached HTML of the old layout is served.
_EVIDENCE_LAYOUT = 7


_EVIDENCE_TTL = 3600


_EVIDENCE_PARTS = ("banner", "top", "bottom")

_PAGE_PARAMS = frozenset({"recordings", "turns", "trace", "findings"})


def request_pins(request: HttpRequest, submission: Submission, context: dict) -> list:
    """The pinned notes this user may see: read once per request (the view puts them in
    the context), else read here."""
    pins = context.get("pin_notes")
    return pins if pins is not None else visible_pins(request.user, submission)


def evidence_html(request: HttpRequest, context: dict[str, Any]) -> dict[str, str]:
    """The page's evidence sections as HTML, cached while no job of the submission runs.

    Only jobs write what these sections show (checks, recordings, turns, trace rows,
    findings, logs). Once every job has ended the rows stay as they are until a job is
    queued or runs again, which changes the jobs' states: the cache key holds them.
    """
    submission: Submission = context["submission"]
    jobs: list[Job] = context["jobs"]
    pins = request_pins(request, submission, context)
    # Blind across the cohort: another hand-in is named only to a viewer who may see it.
    cohort = cohort_others(request.user, submission)

    def build() -> dict[str, str]:
        full = {
            **context,
            **evidence_context(submission, jobs, request.GET),
            "cohort_others": cohort.visible,
            "pins": pins_by_target(pins),
            "can_pin": not settings.DEMO_MODE,
        }
        return {
            part: str(render_to_string(f"reviewer/submission.html#evidence-{part}", full, request))
            for part in _EVIDENCE_PARTS
        }

    if context["jobs_active"]:
        html = build()
    else:
        signature = (
            _EVIDENCE_LAYOUT,
            # The notes pinned in these sections that this user may see.
            sorted((n.pk, n.updated) for n in pins),
            # Which submission this is, even if a deleted one's id is given again.
            (submission.archive_sha256, submission.created),
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
def note_pin_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Pin a note to a check, a turn or a hop; back to it on the page."""
    submission = get_submission_for_user(request, pk)
    anchor = request.POST.get("anchor", "")
    try:
        pin_note(
            submission=submission,
            author=request.user,
            anchor=anchor,
            body=request.POST.get("body", ""),
        )
    except PinRefused as exc:
        messages.error(request, f"Note not pinned: {exc}")
        return redirect(submission.get_absolute_url())
    return redirect(f"{submission.get_absolute_url()}#{target_id(anchor)}")


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
    """Fetch a repository submission's ref again; say whether it moved. Judges nothing anew.

    The token field, when filled, is used for this fetch only: never stored, logged or shown.
    """
    submission = get_submission_for_user(request, pk)
    if submission.source_kind != Submission.SourceKind.REPOSITORY:
        messages.error(
            request, "Only a hand-in fetched from a repository URL can be checked again."
        )
        return redirect(submission.get_absolute_url())
    checked = ref_check(submission, token=request.POST.get("token", "").strip())
    messages.info(request, f"Checked again: {checked.ref_check_detail}")
    return redirect(f"{submission.get_absolute_url()}#submission-header")
