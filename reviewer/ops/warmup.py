"""What a web process does once at start, so its first request pays only for itself.

Django builds a great deal lazily: the URL resolver imports every view module on the first
request, each template is parsed on its first render (the cached loader then keeps it), and
a module imported inside a function (the broker for the queue's health line, the Markdown
renderer for notes) is imported by the first request that calls it. In a web process all of
that landed on whoever opened a page first after a deploy or a worker's restart: the
submission page with 10,000 recordings took 3 to 4 times its warm time, most of it parsing
templates. A web process calls `warm_up` at start (the app's ready(), beside
`agreement.warm` for the scientific stack), before it takes a request.

`warm_up` reads no database and writes nothing: a web process may start before the database
answers. A gunicorn worker then calls `worker_started` (gunicorn.conf.py), which opens the
worker's connection when it can.
"""

from __future__ import annotations

import gc
import importlib
import logging
from pathlib import Path

from django.apps import apps
from django.db import DatabaseError, connection
from django.template import Engine, TemplateSyntaxError
from django.urls import NoReverseMatch, URLResolver, get_resolver, reverse

log = logging.getLogger(__name__)

# This project's apps: their templates (and the project's templates folder) are parsed.
_OWN_APPS = ("reviewer", "submissions", "cassettes_app")

# Imported inside the functions that use them (to keep commands and workers light); a page
# that reaches them imports them once per process.
_LAZY_MODULES = (
    "reviewer.broker",  # the queue's health line on every signed-in page
    "reviewer.review.markdown",  # notes
    "submissions.intake.stored",  # a template filter's file links
)


def warm_up() -> dict[str, int]:
    """Load the URLs, parse every template of this project and import what pages import
    lazily; how many of each. A template that does not parse is logged and skipped (its page
    fails on its own request, as it would have)."""
    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018  # imports every view module
    resolver._populate()  # the reverse() lookup tables
    _reverse_each(resolver)
    engine = Engine.get_default()
    engine.template_context_processors  # noqa: B018  # imports them
    templates = 0
    for folder in _template_folders(engine.dirs):
        for path in sorted(folder.rglob("*.html")):
            name = path.relative_to(folder).as_posix()
            try:
                engine.get_template(name)
            except TemplateSyntaxError:
                log.exception("template %s does not parse", name)
                continue
            templates += 1
    # What names the code of a stored comparison table (a file walk, once per process).
    from reviewer.cohort.table_cache import code_digest

    code_digest()
    modules = 0
    for module in _LAZY_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:  # an optional dependency missing: its page says so itself
            continue
        modules += 1
    return {"templates": templates, "modules": modules}


def _reverse_each(resolver: URLResolver) -> None:
    """Reverse every named URL once: reverse() compiles each pattern's regex on its first
    use (a page's links compiled a dozen of them, ~4 ms, on the first request)."""
    for name in [key for key in resolver.reverse_dict if isinstance(key, str)]:
        for possibilities, *_ in resolver.reverse_dict.getlist(name):
            for _, params in possibilities:
                try:
                    reverse(name, kwargs=dict.fromkeys(params, "1"))
                except NoReverseMatch:  # compiled all the same
                    continue


def _template_folders(dirs: list) -> list[Path]:
    folders = [Path(d) for d in dirs]
    for label in _OWN_APPS:
        folder = Path(apps.get_app_config(label).path) / "templates"
        if folder.is_dir():
            folders.append(folder)
    return [f for f in folders if f.is_dir()]


def worker_started(*, threaded: bool) -> None:
    """A server worker that has loaded the app, before its first request (gunicorn.conf.py).

    Everything loaded at start is set aside from the garbage collector (`gc.freeze`): its
    full collections walked it all again and again, 50 to 170 ms each in a web worker. And a
    worker that answers requests in this thread (gunicorn's sync worker) opens its database
    connection now, which its first request used to open (5 to 10 ms of a 30 ms first view):
    it is kept CONN_MAX_AGE and checked before reuse, as a request's own connection is. A
    threaded worker's requests each use their thread's connection: none is opened here.
    A database that does not answer yet is left to the first request, as before.
    """
    gc.collect()
    gc.freeze()
    if threaded:
        return
    try:
        connection.ensure_connection()
    except DatabaseError:
        log.warning("database not reachable at worker start; the first request connects")
