"""The per-turn diff screen: re-record uploads and live spot checks compared turn by turn."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from cassettes_app.checks.catalog import BYTE_IDENTICAL
from cassettes_app.diff import FOLD_AT, diff_turns, render_segments
from reviewer.views.access import HtmxHttpRequest, get_submission_for_user
from submissions.checks.spot_check import SpotCheckRefused, spot_check_create
from submissions.conversations import pair_thread, thread_index
from submissions.forms import RerecordForm, spot_check_form
from submissions.intake.record_pass import RecordPassRefused, record_pass_queue
from submissions.intake.rerecord import rerecord_create
from submissions.intake.upload import UploadRejected
from submissions.models import SpotCheck, Submission, Turn
from submissions.roles import may_spend


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
    context["record_pass_offered"] = (
        bool(submission.assignment.record_command.strip())
        and bool(settings.SPOT_CHECK_ENDPOINTS)
        and may_spend(request.user)
    )
    against_id = request.GET.get("against", "")
    ours = thread_index(submission)
    context["our_threads"] = ours
    other: Submission | None = None
    if against_id.isdigit():
        other = get_object_or_404(others, pk=int(against_id))
    elif not against_id:
        # The page opens on a diff, not an empty form: the first other hand-in with
        # conversations (the form chooses another).
        other = _default_other(others)
    if other is not None:
        theirs = thread_index(other)
        if "thread" in request.GET:
            thread = _int_param(request, "thread")
        else:
            thread = _default_thread(ours, theirs)
        context.update({"other": other, "their_threads": theirs, "thread": thread})
        if "other_thread" in request.GET and request.GET["other_thread"].isdigit():
            other_thread: int | None = int(request.GET["other_thread"])
            paired_by = "your choice"
        else:
            # Pair by what the conversation is about, never by its number: thread 2 of one
            # submission may be another ticket than thread 2 of the other.
            other_thread, paired_by = pair_thread(ours, theirs, thread)
        context.update({"other_thread": other_thread, "paired_by": paired_by})
        if other_thread is None:
            return context
        left, right = _thread_turns(submission, thread), _thread_turns(other, other_thread)
        rows, first = _diff_rows(left, right, full)
        query = f"against={other.pk}&thread={thread}&other_thread={other_thread}"
        context.update(
            {
                "rows": rows,
                "first": first,
                "reordered": sum(1 for r in rows if r["row"].reordered),
                "both_empty": not left and not right,
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
        rows, first = _diff_rows(pair.original_turns, pair.rerecorded_turns, bool(context["full"]))
        context.update(
            {
                "pair": pair,
                "rows": rows,
                "first": first,
                "reordered": sum(1 for r in rows if r["row"].reordered),
                "left_label": "original",
                "right_label": "re-recorded",
                "full_query": f"?pair={pair.pk}&show={show}&full=1",
            }
        )
    return render(request, "reviewer/rerecord.html", context)


_DEFAULT_TRIES = 20


def _default_other(others: QuerySet[Submission]) -> Submission | None:
    """The hand-in the diff opens against: the first other one with a conversation."""
    with_turns = others.filter(Exists(Turn.objects.filter(submission=OuterRef("pk"))))
    return with_turns.order_by("pk").first() or others.order_by("pk").first()


def _default_thread(ours: list[dict], theirs: list[dict]) -> int:
    """The conversation the diff opens on: our first one that has a partner on their side
    (among the first few: pairing by closeness costs a pass over theirs each)."""
    for mine in ours[:_DEFAULT_TRIES]:
        if pair_thread(ours, theirs, mine["thread"])[0] is not None:
            return int(mine["thread"])
    return int(ours[0]["thread"]) if ours else 0


def _int_param(request: HttpRequest, name: str) -> int:
    value = request.GET.get(name, "0")
    return int(value) if value.isdigit() else 0


@login_required
@require_POST
def spot_check_start(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a spot check of the picked (or sampled) recordings; nothing is spent here."""
    submission = get_submission_for_user(request, pk)
    if not may_spend(request.user):
        raise Http404("only reviewers and hiring leads start spot checks")
    form = spot_check_form(submission, request.POST)
    if not form.is_valid():
        errors = "; ".join(str(e) for errs in form.errors.values() for e in errs)
        messages.error(request, f"Spot check not started: {errors}")
        return redirect(f"{submission.get_absolute_url()}#spot-check")
    data = form.cleaned_data
    try:
        spot = spot_check_create(
            submission=submission,
            requested_by=request.user,
            endpoint=data["endpoint"],
            paths=data["recordings"],
            sample=data["sample"] or 0,
            seed=data["seed"],
            repeats=data["repeats"],
        )
    except SpotCheckRefused as exc:
        messages.error(request, f"Spot check not started: {exc}")
        return redirect(f"{submission.get_absolute_url()}#spot-check")
    messages.success(request, "Spot check queued.")
    return redirect(spot)


def _sample_rows(result: dict, full: bool) -> list[dict]:
    """Each try of one re-asked recording, with its per-turn diff against the recording."""
    tries = []
    for attempt in result.get("tries") or []:
        left = [t for t in [result.get("recorded_turn")] if t]
        rows, first = _diff_rows(left, [t for t in [attempt.get("turn")] if t], full)
        tries.append({"try": attempt, "rows": rows, "first": first})
    return tries


@login_required
@require_GET
def spot_check_detail(request: HtmxHttpRequest, pk: int, sid: int) -> HttpResponse:
    """One spot check: its state (polled while it runs), and each try's drift and diff."""
    submission = get_submission_for_user(request, pk)
    spot = get_object_or_404(submission.spot_checks.select_related("job"), pk=sid)
    running = spot.status == SpotCheck.Status.QUEUED
    full = request.GET.get("full") == "1"
    samples = [{"result": r, "tries": _sample_rows(r, full)} for r in spot.results or []]
    context = {
        "submission": submission,
        "spot": spot,
        "running": running,
        "samples": samples,
        "full": full,
    }
    if request.htmx and request.GET.get("panel") == "spot":
        response = render(request, "reviewer/spot_check.html#spot-state", context)
        if not running:
            # The check ended: the whole page carries its results; stop polling here.
            return HttpResponseClientRefresh()
        return response
    return render(request, "reviewer/spot_check.html", context)


@login_required
@require_POST
def record_pass_start(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue the hand-in's record mode in the sandbox behind the model proxy."""
    submission = get_submission_for_user(request, pk)
    if not may_spend(request.user):
        raise Http404("only reviewers and hiring leads start a record pass")
    try:
        record_pass_queue(submission=submission, endpoint=request.POST.get("endpoint") or None)
    except RecordPassRefused as exc:
        messages.error(request, f"Record pass not started: {exc}")
    else:
        messages.success(request, "Record pass queued: its re-record appears here when it ends.")
    return redirect(f"{reverse('turn_diff', args=[submission.pk])}#rerecords")
