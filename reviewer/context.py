"""Template context shared by every page."""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpRequest

from submissions.roles import is_hiring_lead

_SANDBOX_CHECK_SECONDS = 30.0
_sandbox_seen: tuple[float, tuple[str, ...]] | None = None


def sandbox_missing() -> tuple[str, ...]:
    """What stops the sandbox on this host (static checks, cached for half a minute)."""
    global _sandbox_seen
    now = time.monotonic()
    if _sandbox_seen is None or now - _sandbox_seen[0] > _SANDBOX_CHECK_SECONDS:
        from submissions.sandbox.slots import sandbox_problems

        _sandbox_seen = (now, tuple(sandbox_problems()))
    return _sandbox_seen[1]


def site(request: HttpRequest) -> dict[str, object]:
    """Site name, demo flag and the user's role for the base layout."""
    user = getattr(request, "user", None)
    return {
        "site_name": settings.SITE_NAME,
        "demo_mode": settings.DEMO_MODE,
        # Every write control is left out of the pages (not just refused) in the public demo.
        "read_only": settings.DEMO_MODE,
        "unsandboxed_dev": settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
        "sandbox_missing": () if settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED else sandbox_missing(),
        "is_hiring_lead": is_hiring_lead(user),
    }
