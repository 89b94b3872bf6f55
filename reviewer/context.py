"""Template context shared by every page."""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpRequest

from submissions.roles import is_hiring_lead

_SANDBOX_CHECK_SECONDS = 30.0
_sandbox_seen: tuple[float, tuple[str, ...]] | None = None


def sandbox_missing() -> tuple[str, ...]:
    """What stops the sandbox where jobs run: the workers' own report (their heartbeats), so a
    web host without bubblewrap says nothing while its workers' replays pass; only when no
    worker is alive, this host's static checks (the embedded default, a host not started
    yet). Cached for half a minute."""
    global _sandbox_seen
    now = time.monotonic()
    if _sandbox_seen is None or now - _sandbox_seen[0] > _SANDBOX_CHECK_SECONDS:
        from submissions.jobs.workers import fresh_workers
        from submissions.sandbox.slots import sandbox_problems

        workers = fresh_workers()
        if workers:
            # The banner is for a deployment whose replays will all fail: every live worker
            # reports a problem. One able worker takes the replays.
            broken = [w for w in workers if w.sandbox_problems]
            found = tuple(broken[0].sandbox_problems) if len(broken) == len(workers) else ()
        else:
            found = tuple(sandbox_problems())
        _sandbox_seen = (now, found)
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
