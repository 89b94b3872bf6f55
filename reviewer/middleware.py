"""Public read-only demo: anyone may read the demo cohort, nobody may write."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse

DEMO_VIEWER = "demo-viewer"
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class NotFoundPageMiddleware:
    """A page one may not see (or that is not there) is our 404 page, DEBUG or not: never
    Django's debug page, which would list every URL pattern to whoever asks."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return HttpResponse(render_to_string("404.html", request=request), status=404)
        return None


class DemoReadOnlyMiddleware:
    """With DEMO_MODE on, refuse every write and let anonymous visitors read as a demo viewer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not settings.DEMO_MODE:
            return self.get_response(request)
        if _is_a_door(request.path_info):
            # No way in: the demo has no logins to offer, and Django's admin (its own
            # login page first) is not for the public. Not there, as far as a visitor sees.
            return HttpResponse(render_to_string("404.html", request=request), status=404)
        if request.method not in _SAFE_METHODS:
            body = render_to_string("demo_refused.html", request=request)
            return HttpResponse(body, status=403)
        if not request.user.is_authenticated:
            viewer = get_user_model().objects.filter(username=DEMO_VIEWER, is_active=True).first()
            if viewer is not None:
                # Not logged in: no session is written; this request alone reads as the viewer.
                request.user = viewer
        return self.get_response(request)


def _is_a_door(path: str) -> bool:
    """The login page or anything under Django's admin."""
    return path == reverse("login") or path.startswith(reverse("admin:index"))
