"""The hiring lead's home: which cohorts need a decision, and how far each one is.

A hand-in (a candidate's latest submission that was not refused, as in every cohort) is in
exactly one of three states:

- flagged: its submitted reviews disagree (`Candidate.flagged`: a score spread or a yes/no
  split of the recommendations) or a submitted score contradicts its linked checks; the
  lead looks at it first, even while another review is still coming;
- ready: every expected review is submitted and nothing is flagged: it waits for a
  decision;
- in review: a review is still expected (a reviewer assigned to it has not submitted, or a
  review is in progress), or nobody has been assigned to it nor started a review yet.

Expected reviews are those of the reviewers assigned to the hand-in and of anyone who has
started a review of it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth import get_user_model

from reviewer.cohort.cohort import Candidate, cohort_for
from submissions.models import Assignment, Submission
from submissions.roles import is_hiring_lead


def hand_in_state(candidate: Candidate, assigned: set[str]) -> str:
    """ "flagged", "ready" or "in review" (see the module's docstring)."""
    if candidate.flagged or candidate.contradictions:
        return "flagged"
    submitted = set(candidate.totals)
    expected = assigned | submitted | set(candidate.drafts)
    if expected and expected <= submitted:
        return "ready"
    return "in review"


def cohorts_needing_decision(user: Any) -> list[dict[str, Any]]:
    """Per assignment with at least one hand-in, for a hiring lead (anyone else: []):

        {
            "assignment": Assignment,
            "hand_ins": int,       # candidates' latest submissions, refused uploads left out
            "ready": int,          # every expected review submitted, nothing flagged
            "in_review": int,      # a review still expected, or none started or assigned
            "flagged": int,        # reviewers disagree, or a score contradicts its checks
            "needs_decision": bool,  # ready or flagged > 0
        }

    ready + in_review + flagged == hand_ins. Cohorts that need a decision come first (most
    hand-ins waiting first), then by title. Queries: one for the assignments, one for the
    assigned reviewers, and `cohort_for`'s per assignment, whatever the number of hand-ins.
    """
    if not is_hiring_lead(user):
        return []
    assignments = list(Assignment.objects.order_by("title", "slug"))
    if not assignments:
        return []
    assigned: dict[int, set[str]] = defaultdict(set)  # submission -> reviewer names
    through = Submission.reviewers.through
    for sid, who in through.objects.filter(
        submission__assignment__in=[a.pk for a in assignments]
    ).values_list("submission_id", f"user__{get_user_model().USERNAME_FIELD}"):
        assigned[sid].add(who)
    out: list[dict[str, Any]] = []
    for assignment in assignments:
        cohort = cohort_for(assignment)
        if not cohort.candidates:
            continue
        counts = {"ready": 0, "in review": 0, "flagged": 0}
        for c in cohort.candidates:
            counts[hand_in_state(c, assigned[c.submission.pk])] += 1
        out.append(
            {
                "assignment": assignment,
                "hand_ins": len(cohort.candidates),
                "ready": counts["ready"],
                "in_review": counts["in review"],
                "flagged": counts["flagged"],
                "needs_decision": bool(counts["ready"] or counts["flagged"]),
            }
        )
    out.sort(key=_waiting_first)
    return out


def _waiting_first(entry: dict[str, Any]) -> tuple[bool, int]:
    return (not entry["needs_decision"], -(int(entry["ready"]) + int(entry["flagged"])))
