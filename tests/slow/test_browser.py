"""The reviewer's journey in real Chromium, against a live server and a real Celery worker."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from playwright.sync_api import expect

from reviewer.ops.demo import DEMO_DIR, zip_tree
from submissions.assignments import assignment_apply, assignment_values
from submissions.models import Submission
from submissions.roles import HIRING_LEADS, REVIEWERS
from tests.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # between page steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _user(name: str, group: str) -> User:
    user = User.objects.create_user(name, password=f"pw-{name}-2026")
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def _login(context, base: str, name: str):
    page = context.new_page()
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", f"pw-{name}-2026")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _upload(page, base: str, slug: str, candidate: str, archive: Path) -> int:
    page.goto(f"{base}/assignments/{slug}/")
    page.fill("input[name=candidate]", candidate)
    page.set_input_files("input[name=archive]", str(archive))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/submissions/\d+/$"))
    # The job panel polls until every job has ended, then stops (htmx status 286).
    page.wait_for_selector("#job-panel:not([hx-trigger])", timeout=120_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def test_reviewer_journey(browser, live_server, start_worker, tmp_path) -> None:
    base = live_server.url
    start_worker("filesystem")
    _user("alice", REVIEWERS)
    bob = _user("bob", REVIEWERS)
    _user("carol", HIRING_LEADS)
    data = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    assignment_apply(values=assignment_values({**data, "replay_command": ""}))
    archives = {}
    for repo in ("cassette-flawed", "cassette-good"):
        archives[repo] = tmp_path / f"{repo}.zip"
        archives[repo].write_bytes(zip_tree(DEMO_DIR / "repos" / repo, repo))

    ctx_a = browser.new_context()
    page = _login(ctx_a, base, "alice")
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    _shot(page, "cohorts")
    flawed = _upload(page, base, "cassette-triage", "Tomasz W", archives["cassette-flawed"])
    # The verdict appeared without a reload: the poll's last answer brought it.
    verdict = page.locator("#verdict").inner_text()
    assert "No checks yet" not in verdict and "flaw" in verdict
    good = _upload(page, base, "cassette-triage", "Ines M", archives["cassette-good"])
    # The keyboard: ? lists the keys; the first row to score is current on load, so a digit
    # scores it; Esc leaves the rubric, and then j goes to the next in the queue.
    page.goto(f"{base}/submissions/{flawed}/")
    page.keyboard.press("?")
    assert page.locator("#shortcuts").get_attribute("open") is not None
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.wait_for_url(f"{base}/submissions/{good}/")
    page.wait_for_selector("form.rubric-row.current")
    page.keyboard.press("1")
    page.wait_for_selector("form.rubric-row >> nth=0 >> .saved")
    assert page.locator("form.rubric-row").first.locator("input:checked").input_value() == "1"
    # Two quick changes on the next row (0, back with k, 1): the later one is saved.
    page.keyboard.press("0")
    page.keyboard.press("k")
    page.keyboard.press("1")
    page.wait_for_timeout(1500)
    from reviewer.models import Score

    saved = Score.objects.get(review__submission_id=good, review__reviewer__username="alice",
                              row=Score.objects.filter(review__submission_id=good)
                              .order_by("row__order")[1].row)  # fmt: skip
    assert saved.value == 1
    _shot(page, "keyboard")
    # Pin a note to a turn: the turn's link opens the one note form in place (no reload),
    # with that turn chosen and the textarea focused; it saves without a reload.
    page.locator("#conversations .pin-link").first.click()
    assert page.evaluate("document.activeElement.name") == "body"
    anchor = page.locator("#pin-form select[name=anchor]").input_value()
    assert anchor.startswith("turn:")
    page.keyboard.type("this turn invents an order id")
    page.click("#pin-form button[type=submit]")
    page.wait_for_selector("#pin-form .saved")
    turn_id = "turn-" + anchor.split(":", 1)[1]
    assert "invents an order id" in page.locator(f'[id="{turn_id}"]').inner_text()
    assert "invents an order id" in page.locator("#rubric").inner_text()
    # The desk on a wide screen: the rubric beside the evidence; a check chip of a rubric
    # row lands on that check.
    login = ctx_a.storage_state()
    wide_ctx = browser.new_context(viewport={"width": 1440, "height": 900}, storage_state=login)
    wide = wide_ctx.new_page()
    wide.goto(f"{base}/submissions/{flawed}/")
    checks_box, rubric_box = (wide.locator(s).bounding_box() for s in ("#checks", "#rubric"))
    assert rubric_box["x"] >= checks_box["x"] + checks_box["width"]
    chip = wide.locator("#rubric .linked a").first
    target = chip.get_attribute("href")
    chip.click()
    assert wide.evaluate("location.hash") == target
    assert wide.locator(f'[id="{target[1:]}"]').is_visible()
    _shot(wide, "desk-wide")
    # On a phone: one column, the rubric one tap away, controls a finger wide.
    phone_ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
        storage_state=login,
    )  # fmt: skip
    phone = phone_ctx.new_page()
    phone.goto(f"{base}/submissions/{flawed}/")
    bar = phone.locator(".to-rubric")
    assert bar.is_visible()
    bar.click()
    assert phone.evaluate("location.hash") == "#rubric"
    level = phone.locator("form.rubric-row fieldset.levels .level span").first
    assert level.bounding_box()["height"] >= 44
    _shot(phone, "desk-phone")
    wide_ctx.close()
    phone_ctx.close()
    page.goto(f"{base}/submissions/{flawed}/")
    assert page.locator("#job-panel").inner_text().count("Finished") == 2
    # A failing check's evidence is open and names the hand-edited cassette.
    keys = page.locator("#checks tr", has_text="cassettes.keys_match")
    assert "1610a6524d6320f3" in keys.inner_text()
    _shot(page, "submission")
    # Follow a flaw from the verdict to its evidence, then to the file it names.
    page.click("#verdict a[href='#check-cassettes.keys_match']")
    assert page.evaluate("location.hash") == "#check-cassettes.keys_match"
    page.locator('[id="check-cassettes.keys_match"] ul.evidence a').first.click()
    page.wait_for_url(re.compile(r".*/file/\?path=.*"))
    assert page.locator("table.file tr").count() > 3
    assert "secrets redacted" in page.content()
    _shot(page, "file-viewer")
    page.go_back()

    page.goto(f"{base}/submissions/{flawed}/diff/?against={good}")
    assert page.locator("text=First diverging turn").count() == 1
    page.click("text=First diverging turn >> a")
    _shot(page, "diff")

    # A re-recorded version of the good repo, one answer changed, compared turn by turn.
    rerecorded = tmp_path / "rerecorded"
    shutil.copytree(DEMO_DIR / "repos" / "cassette-good", rerecorded)
    changed = sorted((rerecorded / "cassettes").glob("*.json"))[0]
    doc = json.loads(changed.read_text())
    doc["response"]["choices"][0]["message"]["content"] += " Re-recorded today."
    changed.write_text(json.dumps(doc))
    rerecord_zip = tmp_path / "rerecorded.zip"
    rerecord_zip.write_bytes(zip_tree(rerecorded, "cassette-good"))
    page.goto(f"{base}/submissions/{good}/diff/")
    page.set_input_files("#rerecords input[name=archive]", str(rerecord_zip))
    page.click("#rerecords button[type=submit]")
    page.wait_for_url(re.compile(r".*/rerecords/\d+/$"))
    for _ in range(120):  # the worker compares; the page says so until it is done
        if "differ" in page.locator("p.card").inner_text():
            break
        page.wait_for_timeout(500)
        page.reload()
    assert "1 differ" in page.locator("p.card").inner_text()
    page.click(f"text={changed.relative_to(rerecorded).as_posix()} >> xpath=../.. >> a")
    expect(page.locator("tr.first td strong", has_text="first divergence")).to_have_count(1)
    assert page.locator("td ins").count() > 0  # the changed words are highlighted
    _shot(page, "rerecord")

    # Score every rubric row by keyboard (a 2 each: the current row moves on); each saves.
    page.goto(f"{base}/submissions/{flawed}/")
    forms = page.locator("form.rubric-row[data-keys='0123']")
    for i in range(forms.count()):
        page.keyboard.press("2")
        page.wait_for_selector(f"form.rubric-row >> nth={i} >> .saved")
    page.reload()
    values = [forms.nth(i).locator("input:checked").input_value() for i in range(forms.count())]
    assert values == ["2"] * forms.count()
    _shot(page, "rubric")

    # The same review open in a second tab: its stale save is refused, showing both values.
    stale = ctx_a.new_page()
    stale.goto(f"{base}/submissions/{flawed}/")
    first = page.locator("form.rubric-row").first
    first.locator("details.row-more > summary").click()
    first.locator("input[name$=evidence]").fill("tab one")
    first.locator("input[name$=evidence]").dispatch_event("change")
    page.wait_for_selector("form.rubric-row >> nth=0 >> .saved")
    other = stale.locator("form.rubric-row").first
    other.locator("details.row-more > summary").click()
    other.locator("input[name$=evidence]").fill("tab two")
    other.locator("input[name$=evidence]").dispatch_event("change")
    stale.wait_for_selector("text=someone else saved this row")
    assert "tab one" in stale.locator("form.rubric-row").first.inner_text()
    page.locator("#recommendation .level-yes").click()
    page.wait_for_selector("#recommendation .saved")
    page.click("text=Submit my review")

    Submission.objects.get(pk=flawed).reviewers.add(bob)
    ctx_b = browser.new_context()
    bob_page = _login(ctx_b, base, "bob")
    bob_page.goto(f"{base}/submissions/{flawed}/")
    assert "tab one" not in bob_page.content()  # blind until bob submits
    for i in range(bob_page.locator("form.rubric-row[data-keys='0123']").count()):
        bob_page.locator("form.rubric-row").nth(i).locator(".level").first.click()
        bob_page.wait_for_selector(f"form.rubric-row >> nth={i} >> .saved")
    bob_page.locator("#recommendation .level-no").click()
    bob_page.wait_for_selector("#recommendation .saved")
    bob_page.click("text=Submit my review")
    bob_page.wait_for_selector("text=it is read-only now")

    ctx_c = browser.new_context(accept_downloads=True)
    lead = _login(ctx_c, base, "carol")
    lead.goto(f"{base}/assignments/cassette-triage/compare/")
    head = lead.locator("table.compare > thead").inner_text()
    assert "alice" in head and "bob" in head  # a column per reviewer
    row = lead.locator("table.compare tbody.candidate", has_text="Tomasz W").locator("tr").first
    assert "66.7" in row.inner_text() and "0.0" in row.inner_text()  # 2s and 0s
    assert "reviewers disagree" in row.inner_text()
    assert row.locator("td.spread").count() > 0  # 2 vs 0 on every row
    _shot(lead, "comparison")
    with lead.expect_download() as download:
        lead.click("text=Download CSV")
    csv_text = Path(download.value.path()).read_text()
    assert "Tomasz W" in csv_text and "alice bob" in csv_text
    for ctx in (ctx_a, ctx_b, ctx_c):
        ctx.close()
    # No Content-Security-Policy refusal (or other script error) on any swap of the journey;
    # the 409 of the stale tab is the one expected network error. (htmx's settle used to copy
    # an empty style attribute onto each swapped element: a CSP refusal per swap.)
    # htmx reports the change a later one replaced (sendAbort, its afterRequest) as errors.
    expected = ("htmx:sendAbort", "htmx:afterRequest", "409")
    assert [e for e in console_errors if not e.startswith(expected)] == []


def test_public_demo_is_readable_anonymously_and_refuses_writes(
    browser, live_server, settings
) -> None:
    from unittest import mock

    from submissions.jobs import queue

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    page = browser.new_page()
    page.goto(f"{live_server.url}/")
    assert "read-only demo" in page.content()
    assert page.locator("text=Cassette take-home").count() >= 1
    _shot(page, "demo")
    slug = "cassette-triage"
    response = page.request.post(
        f"{live_server.url}/assignments/{slug}/", form={"candidate": "Intruder"}
    )
    assert response.status == 403
    assert "Writes are refused" in response.text()
    assert not Submission.objects.filter(candidate__name="Intruder").exists()
    # Anonymous, every page of a submission shows no control that writes.
    demo_submission = Submission.objects.order_by("pk").first()
    for url in (f"/submissions/{demo_submission.pk}/", f"/assignments/{slug}/",
                f"/submissions/{demo_submission.pk}/diff/", f"/assignments/{slug}/compare/"):  # fmt: skip
        page.goto(f"{live_server.url}{url}")
        assert page.locator("form[method=post], [hx-post]").count() == 0, url
        assert page.locator("text=Log out").count() == 0
    _shot(page, "demo-compare")


def test_hiring_lead_journey(browser, live_server, tmp_path) -> None:
    """Comparison → a flagged row and its evidence → two candidates side by side →
    calibration → the committee report, downloaded and read with the network cut."""
    import io
    from unittest import mock

    from reviewer.cohort.cohort import cohort_for
    from reviewer.models import Note, Review, RubricRow, RubricTemplate, Score
    from reviewer.review.rubrics import install_builtin_rubrics
    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.models import Candidate, CheckResult, Recording, Turn
    from tests.conftest import make_zip

    base = live_server.url
    # An earlier transactional test's flush took the migration's rubrics with it.
    install_builtin_rubrics(RubricTemplate, RubricRow)
    alice, bob = _user("alice", REVIEWERS), _user("bob", REVIEWERS)
    _user("carol", HIRING_LEADS)
    data = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    assignment, _ = assignment_apply(values=assignment_values({**data, "replay_command": ""}))
    rubric = RubricTemplate.objects.get(slug=assignment.rubric)
    rows = list(rubric.rows.all())
    # Split: alice 3 on every row, bob 1; Agreed: both 2; Third: both 1, bob's a draft.
    plan = {"Split Person": (3, 1), "Agreed Person": (2, 2), "Third Person": (1, 1)}
    subs = {}
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name, (a, b) in plan.items():
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": name})), filename="c.zip",
                candidate=Candidate.objects.create(name=name), assignment=assignment,
            ).submission  # fmt: skip
            subs[name] = s
            for who, value in ((alice, a), (bob, b)):
                state = "draft" if (name, who) == ("Third Person", bob) else "submitted"
                review = Review.objects.create(
                    submission=s, reviewer=who, rubric=rubric, state=state
                )
                Score.objects.bulk_create(
                    [Score(review=review, row=row, value=value,
                           evidence=f"{who.username} read the replay log of {name}")
                     for row in rows]
                )  # fmt: skip
    Note.objects.create(
        submission=subs["Split Person"], author=bob, row=rows[0], body="the retry hides a 500"
    )
    CheckResult.objects.create(
        submission=subs["Split Person"], check_id="cassettes.keys_match", status="fail",
        summary="a hand-edited cassette",
    )  # fmt: skip
    CheckResult.objects.create(
        submission=subs["Agreed Person"], check_id="cassettes.keys_match", status="error",
        summary="could not read",
    )  # fmt: skip
    for name, reply in (("Split Person", "Refunded ord_1"), ("Agreed Person", "Refund ord_1 done")):
        recording = Recording.objects.create(
            submission=subs[name], path=f"cassettes/{name[0]}.json", format="cassette_json",
            key=f"k-{name}",
        )  # fmt: skip
        Turn.objects.create(
            submission=subs[name], thread=0, index=0, recording=recording,
            new_messages=[{"role": "user", "text": "Refund order ord_1 please",
                           "tool_calls": [], "tool_results": []}],
            response={"role": "assistant", "text": reply, "tool_calls": []},
        )  # fmt: skip
    figures = cohort_for(assignment).as_json()

    ctx = browser.new_context(accept_downloads=True)
    lead = _login(ctx, base, "carol")
    console_errors: list[str] = []
    lead.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    lead.goto(f"{base}/assignments/{assignment.slug}/compare/")
    split = lead.locator("tbody.candidate", has_text="Split Person")
    first_line = split.locator("tr").first.inner_text()
    assert "100.0" in first_line and "33.3" in first_line and "33.3–100.0" in first_line
    assert "reviewers disagree" in first_line
    third = lead.locator("tbody.candidate", has_text="Third Person").locator("tr").first
    assert "in progress" in third.inner_text()  # bob's draft, not counted
    # The evidence behind each score unfolds under the row.
    split.locator("summary").click()
    evidence = split.locator("table.evidence").inner_text()
    assert "bob read the replay log of Split Person" in evidence
    assert "the retry hides a 500" in evidence
    _shot(lead, "lead-comparison")
    # Flagged only: the one split candidate.
    lead.check("input[name=flagged]")
    lead.click("form.filters button[type=submit]")
    # A plain GET form: the click starts a navigation, count() would not wait for it.
    lead.wait_for_url(re.compile(r".*[?&]flagged=1.*"))
    expect(lead.locator("tbody.candidate")).to_have_count(1)
    assert "Split Person" in lead.locator("tbody.candidate").inner_text()
    # The dot chart names each reviewer's total for screen readers.
    label = lead.locator("figure.dot-chart g[role=img]").first.get_attribute("aria-label")
    assert label.startswith("Split Person: alice: 100.0, bob: 33.3")

    # Two candidates side by side: pick B, compare.
    lead.click("text=Two candidates side by side")
    lead.select_option("select[name=a]", str(subs["Split Person"].pk))
    lead.select_option("select[name=b]", str(subs["Agreed Person"].pk))
    lead.click("text=Compare")
    checks = lead.locator("#checks").inner_text()
    assert "flaw found" in checks and "could not run" in checks
    conversations = lead.locator("#conversations").inner_text()
    assert "Refunded ord_1" in conversations and "Refund ord_1 done" in conversations
    _shot(lead, "lead-pairwise")

    # Calibration shows the same alpha as the JSON.
    lead.goto(f"{base}/assignments/{assignment.slug}/calibration/")
    alpha = figures["agreement"]["alpha_ordinal"]
    assert f"{alpha:.3f}" in lead.locator("main").inner_text()
    _shot(lead, "lead-calibration")

    # The committee report: downloaded, then read with every request refused.
    lead.goto(f"{base}/assignments/{assignment.slug}/compare/")
    with lead.expect_download() as download:
        lead.click("text=Download the committee report")
    report = tmp_path / "report.html"
    download.value.save_as(report)
    offline = browser.new_context(offline=True)
    requested: list[str] = []
    offline.on("request", lambda r: requested.append(r.url))
    page = offline.new_page()
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.goto(report.as_uri())
    text = page.locator("body").inner_text()
    for name in plan:
        assert name in text
    assert "bob read the replay log of Split Person" in text
    assert f"{alpha:.3f}" in text
    assert requested == [report.as_uri()]  # nothing but the file itself
    _shot(page, "lead-report-offline")
    offline.close()
    ctx.close()
    assert console_errors == []


@pytest.mark.parametrize(
    "width,height", [(1440, 900), (390, 844)], ids=["desktop-1440x900", "phone-390x844"]
)
def test_a_whole_hand_in_is_scored_with_the_keyboard_alone(
    browser, live_server, width, height
) -> None:
    """From page load to the next hand-in with keys only: five rows, the recommendation,
    Ctrl+Enter; at most 15 presses (issue #27: it took 87 Tabs to reach the first score)."""
    import io
    from unittest import mock

    from reviewer.models import Review, RubricRow, RubricTemplate
    from reviewer.review.rubrics import install_builtin_rubrics
    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.models import Candidate, CheckResult, Job
    from tests.conftest import make_zip

    base = live_server.url
    install_builtin_rubrics(RubricTemplate, RubricRow)  # a flush took the migration's
    alice = _user("alice", REVIEWERS)
    data = yaml.safe_load((DEMO_DIR / "assignments" / "cassette-triage.yaml").read_text())
    assignment, _ = assignment_apply(values=assignment_values({**data, "replay_command": ""}))
    rows = list(RubricTemplate.objects.get(slug=assignment.rubric).rows.all())
    assert len(rows) == 5
    subs = []
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name in ("First Person", "Second Person"):
            subs.append(
                submission_create(
                    upload=io.BytesIO(make_zip({"README.md": name})), filename="h.zip",
                    candidate=Candidate.objects.create(name=name), assignment=assignment,
                    uploaded_by=alice,
                ).submission
            )  # fmt: skip
    Job.objects.filter(submission__in=subs).update(state=Job.State.PASSED)
    # The first row's check failed: the server would refuse a 3 there without a reason.
    for cid in rows[0].check_ids:
        CheckResult.objects.create(
            submission=subs[0], check_id=cid, status="fail", summary="exit 2 with the network off"
        )
    # Every check of the fourth row passed: a 3 there is earned, no reason needed.
    for cid in rows[3].check_ids:
        CheckResult.objects.create(submission=subs[0], check_id=cid, status="pass", summary="ok")
    phone = width < 700
    ctx = browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
    )
    page = _login(ctx, base, "alice")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{base}/submissions/{subs[0].pk}/")
    page.wait_for_selector(".desk-rubric .rubric-row.current")
    score_rows = page.locator(".desk-rubric form.rubric-row[data-keys='0123']")
    heights = [score_rows.nth(i).bounding_box()["height"] for i in range(score_rows.count())]
    pane = page.locator(".desk-rubric").bounding_box()
    # Where the submit button sits in the pane, before any scroll of it.
    submit_bottom = page.evaluate(
        "() => document.querySelector('#submit-form button').getBoundingClientRect().bottom"
        " - document.querySelector('.desk-rubric').getBoundingClientRect().top"
    )
    _shot(page, f"desk-keys-{width}x{height}-start")
    presses = 0

    def press(key: str) -> None:
        nonlocal presses
        page.keyboard.press(key)
        presses += 1

    plan = ["1", "2", "2", "3", "2"]
    for digit in plan:
        press(digit)
    press("3")  # the recommendation: 1 strong no, 2 no, 3 yes, 4 strong yes
    # No waiting for the saves: Ctrl+Enter itself waits for the answers in flight.
    press("Control+Enter")
    page.wait_for_url(f"{base}/submissions/{subs[1].pk}/")
    page.wait_for_selector(".desk-rubric .rubric-row.current")
    _shot(page, f"desk-keys-{width}x{height}-next")
    assert "1 left to score" in page.locator("#queue-nav").inner_text()
    review = Review.objects.get(submission=subs[0], reviewer__username="alice")
    assert review.state == "submitted" and review.recommendation == "yes"
    assert [s.value for s in review.scores.order_by("row__order")] == [int(d) for d in plan]
    assert presses <= 15
    # The next hand-in opens ready: its first row is the current one, no Tab needed.
    assert page.locator(".rubric-row.current").get_attribute("id") == f"row-{rows[0].pk}"
    # A 3 on a row whose checks have not passed asks for the reason instead of a refused
    # save: the override field opens, focused; Enter saves the 3 with it.
    first = page.locator(f"#row-{rows[0].pk}")
    page.keyboard.press("3")
    assert page.evaluate("document.activeElement.name") == f"row{rows[0].pk}-override_reason"
    assert first.locator("details.row-more").get_attribute("open") is not None
    page.keyboard.type("ran make test offline by hand: exit 0")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#row-{rows[0].pk} .saved")
    score = Review.objects.get(submission=subs[1]).scores.get(row=rows[0])
    assert (score.value, score.override_reason) == (3, "ran make test offline by hand: exit 0")
    # n: the one note form, on the current row, its textarea focused.
    page.locator(f"#row-{rows[1].pk}").focus()
    page.keyboard.press("n")
    assert page.evaluate("document.activeElement.name") == "body"
    assert page.locator("#pin-form select").input_value() == f"row:{rows[1].pk}"
    page.keyboard.type("keys recomputed by hand")
    page.keyboard.press("Control+Enter")  # in the note form: saves the note
    page.wait_for_selector(f"#row-note-{rows[1].pk} >> text=keys recomputed by hand")
    assert errors == []
    if not phone:
        # Folded rows fit: five of them in the pane at 1440x900.
        assert max(heights) <= 120, heights
        assert pane["x"] > width / 2
        # Rows, recommendation and submit all within the pane, no scrolling it.
        assert submit_bottom <= pane["height"], (submit_bottom, pane)
    else:
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    print(
        f"\n{width}x{height}: {presses} key presses, rows {[round(h) for h in heights]} px, "
        f"pane {round(pane['height'])} px, submit button bottom at {round(submit_bottom)} px"
    )
    ctx.close()
