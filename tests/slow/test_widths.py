"""Every page of the public demo, of the hiring lead and of a reviewer fits a phone (390×844)
and a laptop (1440×900): nothing wider than the viewport, the top bar one line, the verdict
before the folded metadata card, and each page view loaded within a second.

The demo cohort is seeded and judged inline (without a sandbox its replays end `error`, a
state the pages must show too), then walked in real Chromium. Screenshots and the measured
widths and times go to tests/artifacts/widths/."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from urllib.parse import quote

import pytest
from django.core.management import call_command

from reviewer.cohort import agreement
from reviewer.cohort.similarity import similar_pairs
from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Assignment, Submission
from tests.paths import ROOT
from tests.slow.test_browser import browser  # noqa: F401 - the shared Chromium fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = ROOT / "tests" / "artifacts" / "widths"
VIEWPORTS = {"phone": (390, 844), "desktop": (1440, 900)}
PAGE_BUDGET_MS = 1000
TOP_BAR_ONE_LINE_PX = 64
# What a page measures of itself: the document's width against the viewport's, the page
# view's time from navigation start to the end of its load event (Navigation Timing 2), the
# top bar's height, and where the verdict and the metadata card sit.
_MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const top = e => e ? e.getBoundingClientRect().top + scrollY : null;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('details:not([open])'))
    .slice(0, 3).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : ''));
  const bar = document.querySelector('header.top');
  const meta = document.querySelector('#submission-header details');
  return {scroll: document.documentElement.scrollWidth, inner: innerWidth,
          ms: nav ? nav.loadEventEnd - nav.startTime : -1, wide,
          bar: bar ? bar.getBoundingClientRect().height : 0,
          verdict: top(document.querySelector('#verdict')),
          meta: top(meta), meta_open: meta ? meta.open : null};
}"""


@dataclass
class Seen:
    who: str
    viewport: str
    url: str
    scroll: int
    inner: int
    first_ms: float  # the first view of this page in this browser context
    ms: float  # a second view (what a reviewer going back and forth sees)
    bar: float
    verdict: float | None
    meta: float | None
    meta_open: bool | None
    wide: list[str]
    status: int


# Not served in the demo: the login and Django's admin (our 404 page).
MISSING_IN_DEMO = frozenset({"/login/", "/admin/"})


def _pages(submissions: list[Submission], *, lead: bool) -> list[str]:
    """Every kind of screen, for every assignment and every hand-in of the demo."""
    urls = ["/", "/formats/", "/calibration/", "/no-such-page/"]
    urls += ["/assignments/new/"] if lead else ["/login/", "/admin/"]
    for assignment in Assignment.objects.order_by("slug"):
        slug = assignment.slug
        pair = [s.pk for s in submissions if s.assignment_id == assignment.pk][:2]
        urls += [
            f"/assignments/{slug}/",
            f"/assignments/{slug}/compare/",
            f"/assignments/{slug}/calibration/",
            f"/assignments/{slug}/report.html",
            f"/assignments/{slug}/similarity/",
        ]
        # The similarity page with its first pair's matching spans opened.
        urls += [
            f"/assignments/{slug}/similarity/?pair={p.key}" for p in similar_pairs(assignment)[:1]
        ]
        if len(pair) == 2:
            urls.append(f"/assignments/{slug}/compare/pair/?a={pair[0]}&b={pair[1]}")
    for s in submissions:
        other = next(
            (o.pk for o in submissions if o.assignment_id == s.assignment_id and o.pk != s.pk),
            None,
        )
        urls += [f"/submissions/{s.pk}/", f"/submissions/{s.pk}/report.html"]
        urls.append(f"/submissions/{s.pk}/diff/" + (f"?against={other}" if other else ""))
        recording = s.recordings.order_by("path").first()
        if recording is not None:
            urls.append(f"/submissions/{s.pk}/file/?path={quote(recording.path)}")
    return urls


def _inline(route) -> None:
    """The reports are downloads (an attachment); here they open as the page they are."""
    response = route.fetch()
    headers = {k: v for k, v in response.headers.items() if k != "content-disposition"}
    route.fulfill(response=response, headers=headers)


def _walk(browser, base: str, urls: list[str], who: str, password: str = "") -> list[Seen]:  # noqa: F811
    seen = []
    for viewport, (width, height) in VIEWPORTS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        context.route("**/report.html", _inline)
        page = context.new_page()
        if password:
            page.goto(f"{base}/login/")
            seen.append(_measure(page, who, viewport, "/login/", None, 200))
            page.fill("input[name=username]", who)
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
        for url in urls:
            answer = page.goto(f"{base}{url}")
            status = answer.status if answer is not None else 0
            first = page.evaluate(_MEASURE)["ms"]
            page.reload()
            seen.append(_measure(page, who, viewport, url, first, status))
        context.close()
    return seen


def _measure(page, who: str, viewport: str, url: str, first_ms: float | None, status: int) -> Seen:
    page.wait_for_load_state("load")
    got = page.evaluate(_MEASURE)
    name = url.strip("/").replace("/", "_").replace("?", "_").replace("&", "_") or "home"
    page.screenshot(path=str(SHOTS / f"{who}-{viewport}-{name[:80]}.png"), full_page=True)
    return Seen(
        who,
        viewport,
        url,
        got["scroll"],
        got["inner"],
        got["ms"] if first_ms is None else first_ms,
        got["ms"],
        got["bar"],
        got["verdict"],
        got["meta"],
        got["meta_open"],
        got["wide"],
        status,
    )


def _problems(seen: list[Seen]) -> list[str]:
    out = []
    for s in seen:
        where = f"{s.who} {s.viewport} {s.url}"
        missing = s.url == "/no-such-page/" or (s.who == "demo" and s.url in MISSING_IN_DEMO)
        if s.status != (404 if missing else 200):
            out.append(f"{where}: HTTP {s.status}")
        if s.scroll > s.inner:
            out.append(f"{where}: {s.scroll} px wide in {s.inner} ({s.wide})")
        if max(s.first_ms, s.ms) > PAGE_BUDGET_MS:
            out.append(f"{where}: {s.first_ms:.0f} ms, then {s.ms:.0f} ms")
        if s.bar > TOP_BAR_ONE_LINE_PX:
            out.append(f"{where}: the top bar is {s.bar:.0f} px tall")
        if s.meta is not None and (s.verdict is None or s.verdict > s.meta or s.meta_open):
            out.append(f"{where}: the metadata card is open or before the verdict")
    return out


def test_every_page_fits_a_phone_and_a_laptop(
    browser,  # noqa: F811
    live_server,
    settings,
    monkeypatch,
) -> None:
    monkeypatch.setattr(queue, "job_enqueue", lambda **_: True)
    # What a web process does at start (reviewer/apps.py); the test's server is not one.
    agreement.warm()
    call_command("seed_demo")
    submissions = list(Submission.objects.order_by("pk"))
    for submission in submissions:
        jobs_run_inline(submission=submission)
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url

    settings.DEMO_MODE = True
    seen = _walk(browser, base, _pages(submissions, lead=False), "demo")
    settings.DEMO_MODE = False
    seen += _walk(browser, base, _pages(submissions, lead=True), "lead", "lead-the-hiring")
    mine = [s for s in submissions if s.reviewers.filter(username="reviewer").exists()]
    reviewer_pages = ["/", "/assignments/cassette-triage/"]
    reviewer_pages += [f"/submissions/{s.pk}/" for s in mine]
    seen += _walk(browser, base, reviewer_pages, "reviewer", "review-the-tapes")

    (SHOTS / "widths.json").write_text(json.dumps([asdict(s) for s in seen], indent=1))
    assert len(seen) > 200  # every page, both viewports, three visitors
    assert _problems(seen) == []
