"""Small things a reviewer meets: the login page, a page one may not see, the icon, code in
summaries, the live job panel."""

from __future__ import annotations

from django.urls import reverse

from reviewer.templatetags.review_tags import ticks


def test_the_login_page_names_the_site_and_says_a_wrong_password_once(client, db) -> None:
    page = client.get(reverse("login")).content.decode()
    assert '<a class="brand" href="/">Cassette Review</a>' in page
    assert "<title>Log in · Cassette Review</title>" in page
    wrong = client.post(reverse("login"), {"username": "nobody", "password": "wrong"})
    assert wrong.content.decode().count("Please enter a correct username and password") == 1


def test_a_page_one_may_not_see_is_our_404_even_with_debug_on(
    client, reviewer, settings, db
) -> None:
    settings.DEBUG = True
    client.force_login(reviewer)
    response = client.get(reverse("submission", args=[999]))
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Not found</h1>" in page and "URLconf" not in page and "Traceback" not in page


def test_every_page_names_its_icon(client, db) -> None:
    assert 'rel="icon" href="/static/img/favicon.svg"' in client.get(reverse("login")).text


def test_backticks_become_code_and_nothing_else_becomes_markup() -> None:
    assert ticks("run `make test` now") == "run <code>make test</code> now"
    assert ticks("`<script>`") == "<code>&lt;script&gt;</code>"
    assert ticks("a ` lone tick <b>") == "a ` lone tick &lt;b&gt;"


def test_one_banner_says_the_queue_is_down_and_the_fix(
    client, reviewer, assignment, candidate, settings
) -> None:
    import io
    from unittest import mock

    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from tests.conftest import make_zip

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        submission = submission_create(
            upload=io.BytesIO(make_zip({"a": "1"})), filename="a.zip", candidate=candidate,
            assignment=assignment, uploaded_by=reviewer,
        ).submission  # fmt: skip
    client.force_login(reviewer)
    down = {"broker_ok": False, "worker_ok": False, "worker_seen_s": None}
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    with mock.patch("reviewer.ops.health.queue_health", return_value=down):
        page = client.get(submission.get_absolute_url()).content.decode()
    assert page.count("The job queue is unreachable") == 1 and "unset <code>REDIS_URL" in page
    up = {**down, "broker_ok": True}
    with mock.patch("reviewer.ops.health.queue_health", return_value=up):
        assert "job queue is unreachable" not in client.get(submission.get_absolute_url()).text
