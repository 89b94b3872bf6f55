"""The per-turn diff screen, and re-record uploads compared turn by turn."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from cassettes_app.checks.catalog import BYTE_IDENTICAL
from cassettes_app.diff import FOLD_AT, diff_turns, render_segments
from reviewer.views.access import get_submission_for_user
from submissions.forms import RerecordForm
from submissions.intake.rerecord import rerecord_create
from submissions.intake.upload import UploadRejected
from submissions.models import Submission, Turn


def _identity_of(turn: Turn) -> tuple[str, str]:
    """(how, identity) of a conversation from its first turn: its first user message
    (whitespace folded: two candidates' agents on the same ticket send the same one, while
    their recording keys differ with every setting), else the recording's key, else none."""
    for message in turn.new_messages or []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = " ".join(str(message.get("text") or "").split())
            if text:
                return "first user message", text[:2000]
    if turn.recording_id and turn.recording and turn.recording.key:
        return "recording key", turn.recording.key
    return "", ""


def thread_index(submission: Submission) -> list[dict]:
    """Each conversation's thread number, identity and a label (its first user message)."""
    firsts = submission.turns.filter(index=0).select_related("recording").order_by("thread")
    out = []
    for turn in firsts[:2000]:
        how, identity = _identity_of(turn)
        label = identity if how == "first user message" else (turn.recording.path if how else "")
        out.append({"thread": turn.thread, "how": how, "identity": identity, "label": label[:80]})
    return out


_WORDS = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# Two first messages this alike (shared words over all words) are the same request worded
# by two candidates' prompts: "Ticket T-1001 (customer C-118): Checkout…" and
# "Ticket T-1001 from customer C-118 Subject: Checkout…".
SAME_REQUEST = 0.5


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()[:2000]))


def pair_thread(ours: list[dict], theirs: list[dict], thread: int) -> tuple[int | None, str]:
    """Their conversation on the same request as our `thread`: the same identity, else the
    clearly closest first user message; never the same number by default."""
    mine = next((t for t in ours if t["thread"] == thread), None)
    if mine is None or not mine["identity"]:
        return None, ""
    for other in theirs:
        if (other["how"], other["identity"]) == (mine["how"], mine["identity"]):
            return other["thread"], mine["how"]
    if mine["how"] != "first user message":
        return None, mine["how"]
    words = _words(mine["identity"])
    scored = []
    for other in theirs:
        if other["how"] == "first user message":
            theirs_words = _words(other["identity"])
            union = words | theirs_words
            scored.append((len(words & theirs_words) / len(union) if union else 0.0, other))
    scored.sort(key=lambda pair: -pair[0])
    if (
        scored
        and scored[0][0] >= SAME_REQUEST
        and (len(scored) == 1 or scored[1][0] < scored[0][0])
    ):
        share = round(scored[0][0] * 100)
        return scored[0][1]["thread"], f"closest first user message ({share}% of its words)"
    return None, mine["how"]


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
    ours = thread_index(submission)
    context["our_threads"] = ours
    if against_id.isdigit():
        other = get_object_or_404(others, pk=int(against_id))
        theirs = thread_index(other)
        thread = _int_param(request, "thread")
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
