"""Page security: CSP, login throttling, the read-only demo, deploy checks."""

from __future__ import annotations

import os
import subprocess
import sys
from unittest import mock

from django.core.management import call_command
from django.urls import reverse

from submissions.jobs import queue
from tests.paths import ROOT


def test_pages_send_a_csp_without_inline_scripts(client, reviewer) -> None:
    client.force_login(reviewer)
    response = client.get(reverse("home"))
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert b"<script>" not in response.content  # no inline script blocks at all


def test_login_is_throttled_after_repeated_failures(client, reviewer, settings) -> None:
    settings.LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        bad = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
        assert bad.status_code == 200
    blocked = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})
    assert blocked.status_code == 429
    assert b"Too many failed log-ins" in blocked.content
    assert "_auth_user_id" not in client.session


def test_a_good_login_passes_below_the_limit(client, reviewer, settings) -> None:
    settings.LOGIN_MAX_FAILURES = 3
    client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    ok = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})
    assert ok.status_code == 302


def test_demo_mode_is_readable_anonymously_and_refuses_writes(client, db, settings) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    home = client.get(reverse("home"))
    assert home.status_code == 200
    assert b"Cassette take-home" in home.content
    assert b"read-only demo" in home.content
    from submissions.models import Submission

    s = Submission.objects.first()
    assert client.get(s.get_absolute_url()).status_code == 200
    refused = client.post(s.assignment.get_absolute_url(), {"candidate": "X"})
    assert refused.status_code == 403
    assert b"Writes are refused" in refused.content
    assert Submission.objects.count() == 8


def test_check_deploy_reports_nothing_with_production_settings(tmp_path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DEBUG"}},
        "DJANGO_SETTINGS_MODULE": "reviewer.settings",
        "DEBUG": "0",
        "SECRET_KEY": "k" * 30 + "-not-a-real-key-" + "z" * 30,
        "ALLOWED_HOSTS": "review.example.org",
        "DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_home_shows_queue_health(client, reviewer, settings) -> None:
    from django.core.cache import cache

    from submissions.jobs.workers import worker_beat

    cache.set("cr:broker-ok", False, 15)
    client.force_login(reviewer)
    page = client.get(reverse("home")).content
    assert b"broker unreachable" in page and b"no worker seen yet" in page
    worker_beat(sandbox_problems=[])
    cache.set("cr:broker-ok", True, 15)
    page = client.get(reverse("home")).content
    assert b"broker reachable" in page and b"worker seen 0 s ago" in page


def test_the_demo_renders_no_control_that_writes_and_no_get_writes(client, db, settings) -> None:
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from submissions.models import Submission

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    submission = Submission.objects.first()
    pages = [
        reverse("home"),
        reverse("formats"),
        reverse("assignment_new"),
        submission.assignment.get_absolute_url(),
        reverse("comparison", args=[submission.assignment.slug]),
        submission.get_absolute_url(),
        reverse("turn_diff", args=[submission.pk]),
    ]
    with CaptureQueriesContext(connection) as queries:
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, url
            html = response.content.decode()
            posts = re.findall(r'<form[^>]*method="post"|hx-(?:post|put|patch|delete)=', html)
            assert posts == [], (url, posts)
            assert "Log out" not in html and "New assignment</a>" not in html
            assert "Public read-only demo" in html
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
        and "cassette_review_cache" not in q["sql"]  # the page cache, no stored data
    ]
    assert writes == []
