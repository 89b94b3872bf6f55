"""The scientific stack is imported at start by web processes only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reviewer import apps
from reviewer.cohort import agreement
from tests.paths import ROOT


def test_web_processes_are_told_from_commands_and_tests(monkeypatch) -> None:
    for name in apps.WEB_SERVERS:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert not apps.serves_web(["manage.py", "check"], {})
    assert not apps.serves_web(["pytest"], {})
    assert not apps.serves_web(["manage.py", "runserver"], {})  # the reloader's parent
    assert apps.serves_web(["manage.py", "runserver"], {"RUN_MAIN": "true"})
    assert apps.serves_web(["manage.py", "runserver", "--noreload"], {})
    monkeypatch.setitem(sys.modules, "gunicorn", sys.modules["os"])
    assert apps.serves_web(["gunicorn"], {})


@pytest.mark.parametrize("web", [True, False])
def test_ready_warms_the_stack_only_for_a_web_process(monkeypatch, web) -> None:
    from django.apps import apps as registry

    warmed = []
    monkeypatch.setattr(apps, "serves_web", lambda: web)
    monkeypatch.setattr(agreement, "warm", lambda: warmed.append(True))
    registry.get_app_config("reviewer").ready()
    assert warmed == ([True] if web else [])


def test_warm_imports_every_heavy_module() -> None:
    agreement.warm()
    assert all(name in sys.modules for name in agreement.HEAVY_IMPORTS)


def test_a_management_command_does_not_import_the_stack() -> None:
    code = (
        "import django, sys; django.setup(); "
        "from django.core.management import call_command; call_command('check', verbosity=0); "
        "print(sorted(m for m in ('numpy', 'krippendorff', 'sklearn') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("web", [True, False])
def test_ready_warms_templates_and_urls_only_for_a_web_process(monkeypatch, web) -> None:
    from django.apps import apps as registry

    from reviewer.ops import warmup

    warmed = []
    monkeypatch.setattr(apps, "serves_web", lambda: web)
    monkeypatch.setattr(agreement, "warm", lambda: None)
    monkeypatch.setattr(warmup, "warm_up", lambda: warmed.append(True))
    registry.get_app_config("reviewer").ready()
    assert warmed == ([True] if web else [])


def test_warm_up_parses_every_template_and_reads_no_database() -> None:
    """No database fixture: a query would raise."""
    from django.template import engines

    from reviewer.ops import warmup

    engine = engines["django"].engine
    for loader in engine.template_loaders:
        loader.reset()  # nothing parsed yet
    done = warmup.warm_up()
    names = sorted(
        p.relative_to(ROOT / "templates").as_posix() for p in (ROOT / "templates").rglob("*.html")
    )
    assert done["templates"] >= len(names) > 0
    assert done["modules"] == len(warmup._LAZY_MODULES)
    # Parsed now: the cached loader holds them, so no request parses them again.
    (cached,) = engine.template_loaders[0].loaders
    assert all(name in cached.get_template_cache for name in names)


@pytest.mark.django_db
@pytest.mark.parametrize("threaded", [False, True])
def test_a_started_worker_freezes_its_heap_and_connects_unless_threaded(
    monkeypatch, threaded
) -> None:
    import gc

    from django.db import connection

    from reviewer.ops import warmup

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    opened = []
    monkeypatch.setattr(connection, "ensure_connection", lambda: opened.append(True))
    warmup.worker_started(threaded=threaded)
    assert frozen == [True]
    assert opened == ([] if threaded else [True])


@pytest.mark.django_db
def test_a_worker_starts_while_the_database_is_down(monkeypatch) -> None:
    from django.db import OperationalError, connection

    from reviewer.ops import warmup

    monkeypatch.setattr("gc.freeze", lambda: None)

    def down() -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(connection, "ensure_connection", down)
    warmup.worker_started(threaded=False)  # logged, not raised


def test_gunicorn_reads_the_hook_from_the_repository(monkeypatch) -> None:
    """gunicorn reads ./gunicorn.conf.py where it starts (the bench, the image's /app)."""
    from gunicorn.config import Config

    from reviewer.ops import warmup

    namespace: dict = {}
    exec((ROOT / "gunicorn.conf.py").read_text(), namespace)  # noqa: S102  # our own file
    seen = []
    monkeypatch.setattr(warmup, "worker_started", lambda *, threaded: seen.append(threaded))
    for threads, threaded in ((1, False), (4, True)):
        config = Config()
        config.set("threads", threads)
        namespace["post_worker_init"](type("Worker", (), {"cfg": config})())
        assert seen[-1] is threaded
