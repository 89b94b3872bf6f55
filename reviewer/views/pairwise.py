"""The pairwise screen: two candidates of one cohort side by side (the figures come from
`reviewer.cohort.pairwise`)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.cohort.cohort import cohort_for
from reviewer.cohort.pairwise import (
    MAX_THREADS,
    MAX_TURNS,
    SUBMISSION_NUMBER,
    TURN_CHARS,
    pick_candidates,
    side_by_side,
)
from reviewer.views.access import get_assignment_for_lead, lead_required


@lead_required
@require_GET
def pairwise(request: HttpRequest, slug: str) -> HttpResponse:
    """Hiring leads: two candidates side by side: checks by id, rubric rows, conversations
    on the same ticket turn by turn, the differences marked. Reads only."""
    assignment = get_assignment_for_lead(request, slug)
    cohort = cohort_for(assignment)
    raw = {side: request.GET.get(side, "").strip() for side in ("a", "b")}
    chosen, problems, status = pick_candidates(assignment, cohort, raw)
    context: dict[str, Any] = {
        "assignment": assignment,
        "candidates": cohort.candidates,
        "selected": {
            side: int(v) if SUBMISSION_NUMBER.fullmatch(v) else None for side, v in raw.items()
        },
        "problems": problems,
        "max_threads": MAX_THREADS,
        "max_turns": MAX_TURNS,
        "turn_chars": TURN_CHARS,
    }
    if len(chosen) == 2:
        context.update(side_by_side(cohort, chosen["a"], chosen["b"]))
    return render(request, "reviewer/pairwise.html", context, status=status)
