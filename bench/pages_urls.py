"""The app's URLs behind a trivial view: the baseline of bench/bench_pages.py."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def trivial(request: HttpRequest) -> HttpResponse:
    """The least a Django view can do, through the same middleware as every page."""
    return HttpResponse("ok")


urlpatterns = [
    path("bench/trivial/", trivial),
    path("", include("reviewer.urls")),
]
