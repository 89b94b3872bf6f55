"""The lead's similarity page: the cohort's pairs that share recordings or code, and why."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.cohort.similarity import pair_detail, similar_pairs
from reviewer.views.access import get_assignment_for_lead, lead_required

KINDS = {"": "ids or code", "ids": "shared recorded ids", "code": "similar code only"}


@lead_required
@require_GET
def similarity(request: HttpRequest, slug: str) -> HttpResponse:
    """Pairs ranked (shared ids first, then by file share), filtered by kind, candidate and
    least share; `?pair=A-B` opens that pair's matching spans, shared ids and prompt."""
    assignment = get_assignment_for_lead(request, slug)
    pairs = similar_pairs(assignment)
    kind = request.GET.get("kind", "")
    kind = kind if kind in KINDS else ""
    try:
        least = max(0, min(100, int(request.GET.get("min") or 0)))
    except ValueError:
        least = 0
    who = request.GET.get("candidate", "")
    shown = [
        p
        for p in pairs
        if (not kind or p.kind == kind)
        and (p.ids or p.share * 100 >= least)
        and (not who or who in (str(p.left.pk), str(p.right.pk)))
    ]
    opened = None
    wanted = request.GET.get("pair", "")
    for p in pairs:
        if wanted == p.key:
            opened = {"pair": p, **pair_detail(p)}
    candidates = sorted(
        {s.pk: s for p in pairs for s in (p.left, p.right)}.values(),
        key=lambda s: s.candidate.name.lower(),
    )
    context = {
        "assignment": assignment,
        "pairs": shown,
        "total": len(pairs),
        "kinds": KINDS,
        "kind": kind,
        "least": least,
        "who": who,
        "candidates": candidates,
        "opened": opened,
        "starter": len(assignment.starter_fingerprints),
    }
    return render(request, "reviewer/similarity.html", context)
