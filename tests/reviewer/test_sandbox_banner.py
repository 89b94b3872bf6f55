"""Where the sandbox is not set up, every page says so once, with the command that fixes it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviewer import context

FIX = "sudo make sandbox-runtime"


@pytest.fixture
def problems(monkeypatch):
    found: list[str] = []
    monkeypatch.setattr("submissions.sandbox.slots.sandbox_problems", lambda: list(found))
    monkeypatch.setattr(context, "_sandbox_seen", None)
    return found


@pytest.mark.django_db
def test_a_missing_sandbox_is_named_with_the_one_command_to_run(client, reviewer, problems) -> None:
    problems.append("sandbox user cr-sbx0 (uid 64000) does not exist")
    client.force_login(reviewer)
    page = client.get(reverse("home")).content.decode()
    assert FIX in page and "the static checks" in page.lower()
    assert "cr-sbx0 (uid 64000) does not exist" in page


@pytest.mark.django_db
def test_visitors_see_the_banner_without_the_hosts_details(client, problems) -> None:
    problems.append("runtime /opt/secret-path/runtime is missing")
    page = client.get(reverse("login")).content.decode()
    assert FIX in page and "/opt/secret-path" not in page


@pytest.mark.django_db
def test_no_banner_when_the_sandbox_is_ready(client, reviewer, problems) -> None:
    client.force_login(reviewer)
    assert FIX not in client.get(reverse("home")).content.decode()


@pytest.mark.django_db
def test_the_development_setting_shows_its_own_banner_instead(
    client, reviewer, problems, settings
) -> None:
    settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED = True
    problems.append("bwrap is missing")
    client.force_login(reviewer)
    page = client.get(reverse("home")).content.decode()
    assert FIX not in page and "DEVELOPMENT SETTING ON" in page
