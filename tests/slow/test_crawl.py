"""Every link on every page lands, and no page says "(s)": the demo cohort, judged for real
(sandboxed replays, the trace re-drive, the service probe), crawled as a hiring lead, as a
reviewer and as the public demo's anonymous visitor."""

from __future__ import annotations

import html
import re
from collections import deque
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Submission

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

# Links the crawl does not follow: the admin (Django's own pages), logging out, and static
# files (served by whitenoise or the web server, not by these views).
SKIP = re.compile(r"^/(admin/|logout/|static/)")
LIMIT = 6000  # pages per role; the demo has far fewer, a runaway link scheme would not
_TAGS = re.compile(r"<script\b.*?</script>|<style\b.*?</style>|<[^>]+>", re.S)
_HREF = re.compile(r'\b(?:href|hx-get)="([^"]*)"')


def _text(page: str) -> str:
    return html.unescape(_TAGS.sub(" ", page))


def crawl(client: Client, start: str = "/") -> tuple[set[str], list[str]]:
    """Every internal link reachable from `start` (query strings included), and what was
    wrong: a status other than 200, or '(s)' in a page's text."""
    seen: set[str] = set()
    todo = deque([start])
    problems: list[str] = []
    while todo and len(seen) < LIMIT:
        url = todo.popleft()
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        if response.status_code != 200:
            problems.append(f"{url}: {response.status_code}")
            continue
        if not response["Content-Type"].startswith("text/html"):
            continue
        page = response.content.decode()
        if "(s)" in _text(page):
            problems.append(f"{url}: says '(s)'")
        for href in _HREF.findall(page):
            target = urlsplit(urljoin(url, html.unescape(href)))
            if target.scheme not in ("", "http") or target.netloc not in ("", "testserver"):
                continue
            path = target.path + (f"?{target.query}" if target.query else "")
            if not SKIP.match(target.path) and path not in seen:
                todo.append(path)
    assert len(seen) < LIMIT, "the crawl did not end: a link scheme without end?"
    return seen, problems


@pytest.fixture
def judged_demo(monkeypatch) -> list[Submission]:
    monkeypatch.setattr(queue, "job_enqueue", lambda **_: True)
    call_command("seed_demo")
    submissions = list(Submission.objects.order_by("pk"))
    for submission in submissions:
        jobs_run_inline(submission=submission)
    return submissions


def test_every_link_lands_and_no_page_says_s_for_every_role(judged_demo, settings) -> None:
    problems: dict[str, list[str]] = {}
    for role in ("lead", "reviewer"):
        client = Client()
        client.force_login(User.objects.get(username=role))
        seen, problems[role] = crawl(client)
        # The crawl reached every submission this role may see.
        visible = Submission.objects.visible_to(User.objects.get(username=role))
        assert {f"/submissions/{s.pk}/" for s in visible} <= seen
    settings.DEMO_MODE = True
    seen, problems["demo visitor"] = crawl(Client())
    assert {f"/submissions/{s.pk}/" for s in judged_demo} <= seen
    assert problems == {"lead": [], "reviewer": [], "demo visitor": []}
