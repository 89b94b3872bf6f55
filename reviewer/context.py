"""Template context shared by every page."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from submissions.roles import is_hiring_lead


def site(request: HttpRequest) -> dict[str, object]:
    """Site name, demo flag and the user's role for the base layout."""
    user = getattr(request, "user", None)
    return {
        "site_name": settings.SITE_NAME,
        "demo_mode": settings.DEMO_MODE,
        "unsandboxed_dev": settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
        "is_hiring_lead": is_hiring_lead(user),
    }
