"""The verdict at the top of a submission: counts, flaws linked to their evidence, checks
that could not run told apart from flaws, one banner for the environment, the next step."""

from __future__ import annotations

import io
import re
from unittest import mock

import pytest

from reviewer.review.verdict import verdict_for
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import CheckResult
from tests.conftest import make_zip
from tests.paths import ROOT

SANDBOX_ERROR = (
    "the replay needs the sandbox: bubblewrap (bwrap) is not installed; "
    + "install it with apt; " * 40
)


class _Check:
    def __init__(self, check_id: str, status: str, summary: str = "s", cause: str = "") -> None:
        self.check_id, self.status, self.summary, self.cause = check_id, status, summary, cause


def test_the_headline_counts_flaws_apart_from_checks_that_could_not_run() -> None:
    checks = [
        _Check("cassettes.keys_match", "fail", "2 of 9 keys differ"),
        _Check("cassettes.fresh", "fail", "3 older than 42 days"),
        _Check("replay.offline_pass", "error", SANDBOX_ERROR, "sandbox"),
        _Check("cassettes.no_secrets", "pass"),
        _Check("cassettes.pruned", "skip"),
    ]
    v = verdict_for(checks, submission_status="ready", rows_total=5, rows_scored=2)
    assert v.headline.startswith("2 flaws found, 1 check could not run, 1 passed, 1 skipped")
    assert [f.check_id for f in v.flaws] == ["cassettes.keys_match", "cassettes.fresh"]
    assert v.flaws[0].anchor == "check-cassettes.keys_match"
    assert v.environment_blocked and "sandbox" in v.next_action
    clean = verdict_for(checks[3:], submission_status="ready", rows_total=5, rows_scored=2)
    assert clean.next_action == "Score the rubric: 3 rows of 5 left."
    done = verdict_for(checks[3:], submission_status="ready", rows_total=5, rows_scored=5,
                       review_state="submitted")  # fmt: skip
    assert done.next_action == "Your review is submitted."
    assert verdict_for([], submission_status="received").headline == "No checks yet"


def test_the_verdict_reads_the_cause_not_the_words_of_the_summary() -> None:
    """Whether the sandbox kept a check from running is the result's cause field."""
    caused = _Check("replay.offline_pass", "error", "bwrap: uid map: Permission denied", "sandbox")
    v = verdict_for([caused], submission_status="ready")
    assert v.environment_blocked and v.could_not_run[0].environment
    assert "set the sandbox up" in v.next_action
    worded = _Check("replay.offline_pass", "error", "the suite says it needs the sandbox")
    assert not verdict_for([worded], submission_status="ready").environment_blocked


@pytest.fixture
def flawed(reviewer, assignment, candidate):
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(make_zip({"README.md": "x"})),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
            uploaded_by=reviewer,
        ).submission
    rows = [
        ("cassettes.keys_match", "fail", "2 of 9 stored keys differ from the recomputed ones", ""),
        ("replay.offline_pass", "error", SANDBOX_ERROR, "sandbox"),
        ("replay.byte_identical", "error", "run 2 was killed after 600 s", ""),
        ("cassettes.no_secrets", "pass", "no credentials", ""),
        ("cassettes.pruned", "skip", "not for this shape", ""),
    ]
    for check_id, status, summary, cause in rows:
        CheckResult.objects.create(
            submission=s, check_id=check_id, status=status, summary=summary, cause=cause
        )
    return s


def test_the_page_opens_on_the_verdict_and_links_each_flaw_to_its_check(
    client, reviewer, flawed
) -> None:
    client.force_login(reviewer)
    page = client.get(flawed.get_absolute_url()).content.decode()
    verdict = page[page.index('id="verdict"') : page.index('id="job-panel"')]
    assert "1 flaw found, 2 checks could not run, 1 passed, 1 skipped" in verdict
    assert 'href="#check-cassettes.keys_match"' in verdict
    assert 'id="check-cassettes.keys_match"' in page  # the link lands on the evidence
    assert "the sandbox is not set up on this server (see the banner)" in verdict
    assert "run 2 was killed after 600 s" in verdict  # a job's own error is shown as is
    assert "Next:" in verdict and "sandbox" in verdict
    assert page.index('id="verdict"') < page.index('id="checks"')
    assert '<section id="job-panel" aria-live="polite"' in page  # job states are announced
    assert '<code class="check-id">cassettes.keys_match</code>' in page  # ids never break


def test_could_not_run_never_looks_like_a_flaw(client, reviewer, flawed) -> None:
    client.force_login(reviewer)
    page = client.get(flawed.get_absolute_url()).content.decode()
    row = re.search(r'<tr id="check-replay.offline_pass">.*?</tr>', page, re.S).group(0)
    assert 'class="status status-error">could not run<' in row
    assert "could not run: see the banner" in row
    assert SANDBOX_ERROR[:60] in row  # the cause kept, folded away
    assert row.count("install it with apt") == 40  # once, in its details, not per page part
    flaw = re.search(r'<tr id="check-cassettes.keys_match">.*?</tr>', page, re.S).group(0)
    assert 'class="status status-fail">flaw found<' in flaw
    css = (ROOT / "static" / "css" / "site.css").read_text(encoding="utf-8")
    error_rule = next(line for line in css.splitlines() if line.startswith(".status-error"))
    assert "var(--bad)" not in error_rule and "dashed" in error_rule


def test_the_queue_keeps_upload_order_and_next_goes_to_the_next_to_score(
    client, reviewer, assignment
) -> None:
    """A submitted hand-in never moves in the queue (moving it to the end made "next" dead
    on the page one lands on after submitting): next is the next hand-in still to score."""
    from reviewer.models import Review
    from reviewer.review.rubrics import rubric_for
    from submissions.models import Candidate

    subs = []
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for name in ("A", "B", "C"):
            subs.append(
                submission_create(
                    upload=io.BytesIO(make_zip({"n": name})),
                    filename="r.zip",
                    candidate=Candidate.objects.create(name=name),
                    assignment=assignment,
                    uploaded_by=reviewer,
                ).submission
            )
    Review.objects.create(
        submission=subs[0],
        reviewer=reviewer,
        rubric=rubric_for(subs[0].assignment),
        state="submitted",
    )
    client.force_login(reviewer)

    def nav(sub) -> str:
        page = client.get(sub.get_absolute_url()).content.decode()
        return page[
            page.index('<nav class="queue"') : page.index("</nav>", page.index('class="queue"'))
        ]

    b = nav(subs[1])
    assert "2 left to score" in b and "2 of 3" in b
    assert f'<a rel="next" href="/submissions/{subs[2].pk}/">' in b
    assert f'<a rel="prev" href="/submissions/{subs[0].pk}/">' in b
    # From the submitted A, next is B, the next still to score (not a dead link).
    a = nav(subs[0])
    assert f'<a rel="next" href="/submissions/{subs[1].pk}/">next to score' in a
    # From C, the last, next wraps round to B.
    assert f'<a rel="next" href="/submissions/{subs[1].pk}/">' in nav(subs[2])
    # B submitted too: from C, the only one left to score, next is still a link (to A).
    Review.objects.create(
        submission=subs[1], reviewer=reviewer, rubric=rubric_for(subs[1].assignment),
        state="submitted",
    )  # fmt: skip
    c = nav(subs[2])
    assert "1 left to score" in c and f'<a rel="next" href="/submissions/{subs[0].pk}/">next →' in c
    page = client.get(subs[1].get_absolute_url()).content.decode()
    assert '<script src="/static/js/desk.js" defer></script>' in page
