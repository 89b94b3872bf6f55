"""The formats page: every recording family this tool reads, its files, what is read."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from cassettes_app.formats.families import FAMILIES, STREAMS


@require_GET
def formats(request: HttpRequest) -> HttpResponse:
    """Public documentation: it shows no submission's data, so it needs no login."""
    return render(request, "reviewer/formats.html", {"families": FAMILIES, "streams": STREAMS})
