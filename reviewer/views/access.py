"""Fetching objects for the requesting user, or 404."""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from submissions.models import Submission


def get_submission_for_user(request: HttpRequest, pk: int) -> Submission:
    """The submission if this user may see it, else 404 (never 403: no existence leak)."""
    queryset = Submission.objects.visible_to(request.user).select_related(
        "candidate", "assignment", "uploaded_by"
    )
    return get_object_or_404(queryset, pk=pk)
