from __future__ import annotations

import os
import sys

from django.apps import AppConfig

# Servers that import the project to answer requests: seeing one loaded means this process
# is a web process (gunicorn imports the WSGI module from its workers, or its master when
# preloading, after itself).
WEB_SERVERS = ("gunicorn", "uvicorn", "daphne")


def serves_web(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> bool:
    """Whether this process answers web requests: loaded by a WSGI/ASGI server, or
    runserver's serving process (its autoreload parent only watches files)."""
    argv = sys.argv if argv is None else argv
    environ = dict(os.environ) if environ is None else environ
    if any(name in sys.modules for name in WEB_SERVERS):
        return True
    if len(argv) > 1 and argv[1] == "runserver":
        return environ.get("RUN_MAIN") == "true" or "--noreload" in argv
    return False


class ReviewerConfig(AppConfig):
    name = "reviewer"
    verbose_name = "Reviewing"

    def ready(self) -> None:
        from reviewer.cohort import agreement, table_cache

        table_cache.connect()
        # The first calibration view of a process used to take ~2.5 s importing the
        # scientific stack. A web process pays it once at start instead; commands, the
        # worker and the tests never compute a figure unless asked, so they do not.
        # Imported here, not in a thread: a preloading server forks after ready(), and a
        # fork while another thread holds an import lock can hang the child.
        if serves_web():
            agreement.warm()
            # Templates parsed and the URLs loaded now, not by the first request (ops/warmup.py).
            from reviewer.ops.warmup import warm_up

            warm_up()
            # And every view module (the URLconf imports them all: git, HTTP, Markdown
            # libraries), which the first request of any page otherwise pays, ~1 s.
            from django.urls import get_resolver

            get_resolver().url_patterns  # noqa: B018 - loading it is the point
