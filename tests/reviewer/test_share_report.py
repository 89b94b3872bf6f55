"""The committee's shareable report: one self-contained, redacted HTML file per cohort or
per submission, with the cohort's own numbers, the disagreements and the audit trail."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import re
import string
from html.parser import HTMLParser
from unittest import mock

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.template.defaultfilters import floatformat
from django.urls import reverse

from reviewer.cohort.cohort import cohort_for
from reviewer.cohort.committee_report import cohort_report_html, submission_report_html
from reviewer.models import Note, Review, RubricTemplate, Score, ScoreEvent
from reviewer.review.pins import pin_note
from reviewer.review.scoring import review_get_or_create, review_submit, score_save
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, CheckResult, Submission
from submissions.roles import REVIEWERS
from tests.conftest import make_zip

HOSTILE_NAME = "<script>alert(1)</script>"
HOSTILE_EVIDENCE = '"><img src=https://evil.example/x onerror=alert(2)>'
HOSTILE_NOTE = "<a href='https://evil.example/'>click</a> **bold**"


def fake_key() -> str:
    """An OpenAI-shaped project key, built at run time so the repository holds none."""
    rng = random.Random("share-report")
    body = string.ascii_letters + string.digits + "_-"
    half = "".join(rng.choice(body) for _ in range(74))
    return "sk-" + "proj-" + half + "T3Blbk" + "FJ" + half[::-1]


KEY = fake_key()


# ------------------------------------------------------------------ reading the file


URL_ATTRS = {"src", "href", "action", "formaction", "srcset", "xlink:href", "poster", "data"}


class Page(HTMLParser):
    """The file's tags, attributes, <style> text and table rows, as the browser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.style = ""
        self.rows: list[tuple[str | None, list[str]]] = []  # (tr id, cell texts)
        self._stack: list[str] = []
        self._row: tuple[str | None, list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._stack.append(tag)
        if tag == "tr":
            self._row = (dict(attrs).get("id"), [])
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if self._stack and self._stack[-1] == tag:
            self._stack.pop()
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row[1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1] == "style":
            self.style += data
        if self._cell is not None:
            self._cell.append(data)

    def row(self, first: str) -> list[str]:
        return next(cells for _, cells in self.rows if cells and cells[0] == first)

    def row_by_id(self, row_id: str) -> list[str]:
        return next(cells for rid, cells in self.rows if rid == row_id)


def assert_self_contained(html: str) -> Page:
    page = Page(html)
    names = {tag for tag, _ in page.tags}
    for banned in ("script", "link", "img", "iframe", "object", "embed", "form", "base", "audio"):
        assert banned not in names, banned
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in URL_ATTRS:
                assert (value or "").startswith("#"), (tag, name, value)
            assert not name.startswith("on"), (tag, name)  # no event handler anywhere
            assert name != "style", tag  # the one stylesheet is the <style> element
        if tag == "meta":
            assert (attrs.get("http-equiv") or "").lower() != "refresh"
    assert page.style
    assert "url(" not in page.style and "@import" not in page.style.lower()
    assert "http" not in page.style
    return page


# ------------------------------------------------------------------ the cast


def _submission(assignment, name: str) -> Submission:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        return submission_create(
            upload=io.BytesIO(make_zip({"name": name})),
            filename="c.zip",
            candidate=Candidate.objects.create(name=name),
            assignment=assignment,
        ).submission


def _score_all(submission, user, value: int, *, evidence: str = "", reason: str = "", notes=None):
    review = review_get_or_create(submission=submission, reviewer=user)
    for row in review.rubric.rows.all():
        score_save(
            review=review,
            row=row,
            value=value,
            evidence=evidence or f"{user.username} saw {row.title}",
            override_reason=reason,
            expected_version=Score.objects.filter(review=review, row=row)
            .values_list("version", flat=True)
            .first()
            or 0,
            notes=(notes or {}).get(row.title),
        )
    return review


@pytest.fixture
def seeded(assignment, lead, reviewer, reviewer2):
    """Ada: reviewed by alice (3s, after a 2) and bob (1s): flagged, with a fail and an
    error, a secret in a check, a note, a pin and a reason. Bea: alice submitted, bob still
    scoring. A hostile name: no review yet."""
    ada = _submission(assignment, "Ada")
    bea = _submission(assignment, "Bea")
    hostile = _submission(assignment, HOSTILE_NAME)
    CheckResult.objects.create(
        submission=ada,
        check_id="cassettes.no_secrets",
        status="fail",
        summary=f"a live key in cassettes/a.json: {KEY}",
        evidence=[{"path": "cassettes/a.json", "line": 3, "match": KEY}],
    )
    CheckResult.objects.create(
        submission=ada,
        check_id="replay.offline_pass",
        status="error",
        summary="the replay could not start: the package index timed out",
    )
    CheckResult.objects.create(
        submission=ada, check_id="docs.entrypoints", status="pass", summary="make test found"
    )
    CheckResult.objects.create(
        submission=bea, check_id="docs.entrypoints", status="pass", summary="make test found"
    )
    rows = list(RubricTemplate.objects.get(slug="cassette").rows.all())
    first = rows[0]
    # alice: a 2 first, then 3s with a reason (the linked checks did not pass).
    review = review_get_or_create(submission=ada, reviewer=reviewer)
    score_save(
        review=review,
        row=first,
        value=2,
        evidence="first look",
        override_reason="",
        expected_version=0,
    )
    _score_all(
        ada,
        reviewer,
        3,
        evidence=HOSTILE_EVIDENCE,
        reason=f"reproduced it by hand; the key was {KEY}",
    )
    review_submit(
        review=Review.objects.get(submission=ada, reviewer=reviewer), recommendation="yes"
    )
    _score_all(
        ada,
        reviewer2,
        1,
        evidence="the replay needed the network",
        notes={first.title: f"{HOSTILE_NOTE}\nkey pasted here: {KEY}"},
    )
    review_submit(
        review=Review.objects.get(submission=ada, reviewer=reviewer2), recommendation="no"
    )
    pin_note(
        submission=ada, author=reviewer2, anchor="check:cassettes.no_secrets", body=f"see {KEY}"
    )
    review_submit(review=_score_all(bea, reviewer, 2), recommendation="yes")
    _score_all(bea, reviewer2, 0)  # a draft: never counted
    return {"ada": ada, "bea": bea, "hostile": hostile, "rows": rows}


# ------------------------------------------------------------------ the cohort report


def test_it_shows_the_cohorts_own_numbers(seeded, assignment) -> None:
    html = cohort_report_html(assignment)
    page = Page(html)
    data = cohort_for(assignment).as_json()
    assert len(data["candidates"]) == 3
    header = next(cells for _, cells in page.rows if cells and cells[0] == "Candidate")
    assert header[1:3] == ["alice", "bob"]  # each reviewer their own column
    for c in data["candidates"]:
        cells = page.row_by_id(f"row-{c['submission']}")
        totals = {r["reviewer"]: r["total"] for r in c["reviews"]}
        for i, name in enumerate(["alice", "bob"], start=1):
            if name in totals:
                assert cells[i] == str(totals[name])
        if c["min"] is None:
            assert cells[3] == "—"
        elif c["min"] == c["max"]:
            assert cells[3] == str(c["min"])
        else:
            assert cells[3] == f"{c['min']}–{c['max']}"
        assert cells[4] == (str(c["mean"]) if c["mean"] is not None else "—")
        assert cells[5].startswith("⚑") == c["flagged"]
    ada = page.row_by_id(f"row-{seeded['ada'].pk}")
    assert ada[1:5] == ["100.0", "33.3", "33.3–100.0", "66.7"]
    bea = page.row_by_id(f"row-{seeded['bea'].pk}")
    assert bea[2] == "in progress"  # bob's draft: shown as such, never counted
    assert "1 review still in progress, not counted" in html
    agreement = data["agreement"]
    # Figures read to three decimals, as on the pages (Django's floatformat).
    shown = {"alpha": floatformat(agreement["alpha_ordinal"], 3)}
    assert f"Krippendorff’s alpha (ordinal) <strong>{shown['alpha']}</strong> (95 %" in html
    for title, figures in agreement["row_figures"].items():
        cells = next(cells for _, cells in page.rows if cells and cells[0].startswith(title))
        alpha = figures["alpha"]
        if alpha["value"] is None:
            assert cells[1] == "not defined"
        else:
            low, high = alpha["ci95"]
            interval = f" ({floatformat(low, 2)} to {floatformat(high, 2)})"
            assert cells[1] == floatformat(alpha["value"], 3) + interval
        assert cells[3] == alpha["reading"]
    for pair in agreement["pairs"]:
        cells = page.row(f"{pair['a']} and {pair['b']}")
        kappa = pair["weighted_kappa"]
        want = "not defined" if kappa is None else floatformat(kappa, 3)
        assert cells[1:] == [str(pair["n"]), want]
    for r in data["reviewers"]:
        cells = page.row(r["reviewer"])
        figures = [floatformat(r["mean_offset"], 3), floatformat(r["share_of_3"], 3)]
        assert cells[1:] == [str(r["n"]), *figures]
    assert "3 candidates</strong>, <strong>1 flagged</strong>" in html


def test_it_shows_each_flagged_disagreement_with_its_evidence(seeded, assignment) -> None:
    html = cohort_report_html(assignment)
    start = html.index(f'id="disagreement-{seeded["ada"].pk}"')
    section = html[start : html.index('<h2 id="details">')]
    first = seeded["rows"][0].title
    assert f"{first}: 1 to 3" in section
    assert "the replay needed the network" in section  # bob's evidence line
    assert "&quot;&gt;&lt;img src=https://evil.example/x" in section  # alice's, escaped
    assert "&lt;a href=&#x27;https://evil.example/&#x27;&gt;click&lt;/a&gt;" in section
    assert "totals 33.3 to 100.0 (66.7 apart)" in section
    assert f'id="disagreement-{seeded["bea"].pk}"' not in html


def test_it_keeps_flaws_and_could_not_run_apart(seeded, assignment) -> None:
    html = cohort_report_html(assignment)
    ada = Page(html).row_by_id(f"row-{seeded['ada'].pk}")
    assert ada[6:9] == ["1", "1", "flaws found"]  # flaws found, could not run, status
    assert "Flaws found: 1" in html
    assert "Could not run (says nothing about the candidate): 1" in html
    assert '<span class="status status-error">could not run</span>' in html
    assert '<span class="status status-fail">flaw found</span>' in html


def test_it_shows_the_audit_trail(seeded, assignment) -> None:
    html = cohort_report_html(assignment, generated_by="test")
    first = seeded["rows"][0].title
    assert "<strong>alice</strong> · score · " + first in html
    assert "score: 2 → 3" in html and "score: — → 1" in html
    assert "evidence: first look → &quot;&gt;&lt;img" in html
    assert "reason: reproduced it by hand; the key was sk-p" in html
    assert "override reason: — → reproduced" not in html  # shown once, as the reason
    assert "state: draft → submitted" in html
    assert "note: — → &lt;a href=" in html
    assert "review in progress" in html  # bob's draft changes of Bea, marked as such
    assert re.search(
        r'<time datetime="\d{4}-\d\d-\d\dT[\d:]+\+00:00">[\d-]+ [\d:]+ UTC</time>', html
    )
    assert "generated" in html and "by test" in html


def test_it_redacts_every_secret_and_escapes_hostile_text(seeded, assignment) -> None:
    for html in (
        cohort_report_html(assignment),
        submission_report_html(Submission.objects.get(pk=seeded["ada"].pk)),
    ):
        assert KEY not in html
        assert KEY[8:40] not in html and KEY[-40:] not in html  # not even a long piece
        assert html.count("sk-p…") >= 4  # summary, evidence, reason, note, pin: redacted
        assert HOSTILE_NAME not in html and HOSTILE_EVIDENCE not in html
        assert "<a href='https" not in html
        page = assert_self_contained(html)
        assert not [t for t, _ in page.tags if t == "script"]
    cohort = cohort_report_html(assignment)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cohort


def test_the_file_makes_no_request(seeded, assignment) -> None:
    html = cohort_report_html(assignment)
    page = assert_self_contained(html)
    assert "<svg" in html  # the dot chart, inline
    hrefs = [a["href"] for t, a in page.tags if t == "a"]
    ids = {a.get("id") for _, a in page.tags}
    assert hrefs and all(h[1:] in ids for h in hrefs)  # every anchor lands in the file
    meta = next(a for t, a in page.tags if t == "meta" and a.get("http-equiv"))
    assert "default-src 'none'" in meta["content"]
    digest = base64.b64encode(hashlib.sha256(page.style.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in meta["content"]
    assert "@media print" in page.style and "max-width: 640px" in page.style


def test_the_submission_report_holds_one_submission(seeded, assignment) -> None:
    html = submission_report_html(Submission.objects.get(pk=seeded["ada"].pk))
    assert_self_contained(html)
    assert "<h1>Ada</h1>" in html
    assert "Bea" not in html
    assert (
        "alice <strong>100.0</strong>, bob <strong>33.3</strong>; mean <strong>66.7</strong>"
        in html
    )
    assert "1 flaw found</strong>, 1 could not run" in html
    assert 'docs.entrypoints</code>: <span class="text">make test found' in html  # passes too
    assert "score: 2 → 3" in html and "state: draft → submitted" in html
    assert "Notes on the evidence" in html and "check:cassettes.no_secrets" in html


# ------------------------------------------------------------------ downloads


def test_the_lead_downloads_the_cohort_report(client, seeded, lead, assignment) -> None:
    client.force_login(lead)
    response = client.get(reverse("cohort_report", args=[assignment.slug]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="cassette-triage-report.html"'
    policy = response["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy and "form-action 'none'" in policy
    html = response.content.decode()
    style = Page(html).style
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in policy  # its own inline style, and only that
    assert "no-store" in response["Cache-Control"]
    assert "by carol" in html
    assert KEY not in html


def test_reviewers_get_404_for_the_cohort_report(client, seeded, reviewer, assignment) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("cohort_report", args=[assignment.slug])).status_code == 404


def test_the_cohort_report_needs_a_login_and_a_get(client, lead, assignment) -> None:
    url = reverse("cohort_report", args=[assignment.slug])
    assert client.get(url).status_code == 302
    client.force_login(lead)
    assert client.post(url).status_code == 405
    assert client.get(reverse("cohort_report", args=["no-such-thing"])).status_code == 404


def test_the_submission_report_follows_the_blind_rule(
    client, seeded, lead, reviewer, reviewer2, assignment
) -> None:
    ada, bea = seeded["ada"], seeded["bea"]
    ada.reviewers.add(reviewer)
    bea.reviewers.add(reviewer2)
    client.force_login(lead)
    response = client.get(reverse("submission_report", args=[ada.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="cassette-triage-submission-{ada.pk}-report.html"'
    )
    assert "default-src 'none'" in response["Content-Security-Policy"]
    client.force_login(reviewer)  # assigned to Ada, review submitted: sees every review
    assert client.get(reverse("submission_report", args=[ada.pk])).status_code == 200
    assert client.get(reverse("submission_report", args=[bea.pk])).status_code == 404  # not theirs
    client.force_login(reviewer2)  # assigned to Bea, still scoring: not others' scores yet
    assert client.get(reverse("submission_report", args=[bea.pk])).status_code == 404
    outsider = User.objects.create_user("dave", password="pw-dave-123")
    outsider.groups.add(Group.objects.get_or_create(name=REVIEWERS)[0])
    client.force_login(outsider)
    assert client.get(reverse("submission_report", args=[ada.pk])).status_code == 404


def test_the_submission_page_links_the_report_only_to_who_may_download_it(
    client, seeded, lead, reviewer, reviewer2, assignment
) -> None:
    ada, bea = seeded["ada"], seeded["bea"]
    ada.reviewers.add(reviewer)
    bea.reviewers.add(reviewer2)
    link = reverse("submission_report", args=[bea.pk])
    client.force_login(lead)
    assert link in client.get(bea.get_absolute_url()).content.decode()
    client.force_login(reviewer2)  # still scoring Bea: no link, and the file is refused
    assert link not in client.get(bea.get_absolute_url()).content.decode()
    client.force_login(reviewer)
    assert (
        reverse("submission_report", args=[ada.pk])
        in client.get(ada.get_absolute_url()).content.decode()
    )


# ------------------------------------------------------------------ the command


def test_the_command_writes_the_file(seeded, assignment, tmp_path) -> None:
    target = tmp_path / "committee.html"
    target.write_text("an older report")
    out = io.StringIO()
    call_command("cohort_report", assignment.slug, "--output", str(target), stdout=out)
    html = target.read_text(encoding="utf-8")
    assert "<!DOCTYPE html>" in html[:400]
    assert "Committee report: Cassette triage" in html
    assert "by manage.py cohort_report" in html
    assert out.getvalue().strip() == f"{target} ({target.stat().st_size:,} bytes)"
    assert [p.name for p in tmp_path.iterdir()] == ["committee.html"]  # no temp file left
    one = tmp_path / "ada.html"
    call_command(
        "cohort_report",
        assignment.slug,
        "-o",
        str(one),
        "--submission",
        str(seeded["ada"].pk),
        stdout=io.StringIO(),
    )
    assert "<h1>Ada</h1>" in one.read_text(encoding="utf-8")


def test_the_command_errors_clearly(seeded, assignment, tmp_path) -> None:
    with pytest.raises(CommandError, match="no assignment 'nope'"):
        call_command("cohort_report", "nope", "--output", str(tmp_path / "x.html"))
    with pytest.raises(CommandError, match="no folder"):
        call_command("cohort_report", assignment.slug, "--output", str(tmp_path / "a" / "x.html"))
    with pytest.raises(CommandError, match="it is a folder"):
        call_command("cohort_report", assignment.slug, "--output", str(tmp_path))
    with pytest.raises(CommandError, match="no submission 999999 in assignment"):
        call_command(
            "cohort_report",
            assignment.slug,
            "-o",
            str(tmp_path / "x.html"),
            "--submission",
            "999999",
        )


def test_the_command_leaves_the_old_file_when_the_write_fails(seeded, assignment, tmp_path) -> None:
    from reviewer.management.commands import cohort_report

    target = tmp_path / "committee.html"
    target.write_text("an older report")
    denied = PermissionError(13, "Permission denied")
    refused = pytest.raises(CommandError, match=r"cannot write .*committee.html: Permission")
    with mock.patch.object(cohort_report.tempfile, "mkstemp", side_effect=denied), refused:
        call_command("cohort_report", assignment.slug, "-o", str(target))
    full = OSError(28, "No space left")
    refused = pytest.raises(CommandError, match="No space left")
    with mock.patch.object(cohort_report.os, "replace", side_effect=full), refused:
        call_command("cohort_report", assignment.slug, "-o", str(target))
    assert target.read_text() == "an older report"
    assert [p.name for p in tmp_path.iterdir()] == ["committee.html"]  # the temp file went


# ------------------------------------------------------------------ bounded


def _bulk_cohort(assignment, reviewers: list[User], n: int) -> None:
    """n candidates, each with two submitted reviews 2 apart and a handful of checks."""
    rubric = RubricTemplate.objects.get(slug="cassette")
    rows = list(rubric.rows.all())
    people = Candidate.objects.bulk_create([Candidate(name=f"Bulk {i:04d}") for i in range(n)])
    subs = Submission.objects.bulk_create(
        [
            Submission(
                candidate=p,
                assignment=assignment,
                archive=f"archives/bulk-{i}.zip",
                archive_sha256=f"{i:064x}",
                status=Submission.Status.READY,
            )
            for i, p in enumerate(people)
        ]
    )
    checks = []
    for s in subs:
        for cid, status in (
            ("cassettes.no_secrets", "fail"),
            ("replay.offline_pass", "error"),
            ("docs.entrypoints", "pass"),
            ("cassettes.fresh", "skip"),
        ):
            checks.append(
                CheckResult(
                    submission=s,
                    check_id=cid,
                    status=status,
                    summary="x" * 2000,
                    evidence=["e" * 1000] * 50,
                )
            )
    CheckResult.objects.bulk_create(checks)
    reviews = Review.objects.bulk_create(
        [
            Review(submission=s, reviewer=r, rubric=rubric, state=Review.State.SUBMITTED)
            for s in subs
            for r in reviewers
        ]
    )
    Score.objects.bulk_create(
        [
            Score(review=rv, row=row, value=3 if i % 2 else 1, evidence="y" * 3000)
            for i, rv in enumerate(reviews)
            for row in rows
        ]
    )
    Note.objects.bulk_create(
        [
            Note(submission=rv.submission, author=rv.reviewer, row=rows[0], body="n" * 5000)
            for rv in reviews
        ]
    )
    ScoreEvent.objects.bulk_create(
        [
            ScoreEvent(
                submission=rv.submission,
                review=rv,
                row=rows[i % len(rows)],
                actor=rv.reviewer,
                kind=ScoreEvent.Kind.SCORE,
                old={"value": 1, "evidence": "o" * 3000},
                new={"value": 2, "evidence": "w" * 3000},
                reason="r" * 3000,
            )
            for rv in reviews
            for i in range(20)  # 40 a candidate: more than the cohort report shows
        ]
    )


@pytest.mark.scale
@pytest.mark.parametrize("n", [20, 150])
def test_a_big_cohort_renders_in_bounded_queries_and_size(
    n, assignment, reviewer, reviewer2, django_assert_max_num_queries
) -> None:
    _bulk_cohort(assignment, [reviewer, reviewer2], n)
    with django_assert_max_num_queries(12):  # the same for 20 as for 150
        html = cohort_report_html(assignment)
    assert html.count('<section class="candidate"') == n
    # Every text here is far past its cap (the worst case): each candidate still takes a
    # bounded number of kilobytes, whatever its reviewers and checks wrote.
    assert len(html.encode()) < 35_000 * n + 60_000
    assert "x" * 300 not in html and "e" * 200 not in html and "y" * 300 not in html
    assert "n" * 600 not in html and "w" * 80 not in html and "r" * 160 not in html
    assert "15 earlier changes not shown here; the submission’s own report lists them" in html


def test_a_key_hidden_behind_whitespace_is_still_redacted(assignment) -> None:
    # Whitespace is squeezed before the scan: afterwards, it would pull an unscanned tail
    # into the shown part.
    s = _submission(assignment, "Cy")
    CheckResult.objects.create(
        submission=s, check_id="cassettes.fresh", status="warn", summary="old " + " " * 9000 + KEY
    )
    html = cohort_report_html(assignment)
    assert KEY[:20] not in html and "old sk-p…" in html


# ------------------------------------------------------------------ issue 27: the lead's reading


def test_the_audit_trail_is_folded_per_candidate_one_line_a_change(seeded, assignment) -> None:
    html = cohort_report_html(assignment, generated_by="test")
    page = assert_self_contained(html)
    ada = seeded["ada"]
    events = ScoreEvent.objects.filter(submission=ada).order_by("at", "pk")
    people = {e.actor_id for e in events}
    last = events.last().at.strftime("%Y-%m-%d %H:%M:%S UTC")
    start = html.index(f'<details class="audit-trail" id="candidate-{ada.pk}-audit">')
    folded = html[start : html.index("</details>", start)]
    summary = re.search(r"<summary>(.*?)</summary>", folded, re.S)
    assert summary is not None
    assert re.sub(r"<[^>]+>", "", summary.group(1)) == (
        f"Audit trail: {events.count()} changes by {len(people)} people, last {last}"
    )
    lines = re.findall(r"<li>(.*?)</li>", folded, re.S)
    assert len(lines) == events.count()
    assert all("\n" not in line and "<div" not in line for line in lines)  # one line each
    assert "score: 2 → 3" in folded and "reason: reproduced it by hand" in folded
    # Closed on screen (no `open`), every line shown in print.
    assert [attrs.get("open") for tag, attrs in page.tags if tag == "details"] == [None] * 2
    assert "details.audit-trail::details-content { content-visibility: visible" in page.style
    assert ".audit .change { display: block" not in page.style
    # The hostile name's candidate has no change: no fold, the words say so.
    hostile = html[html.index(f'id="candidate-{seeded["hostile"].pk}"') :]
    assert "No change recorded yet." in hostile[: hostile.index("</section>")]


def test_the_report_shows_each_recommendation_and_contradiction_as_the_json(
    seeded, assignment
) -> None:
    ada, bea = seeded["ada"], seeded["bea"]
    Review.objects.filter(submission=ada, reviewer__username="alice").update(
        recommendation="strong_yes"
    )
    Review.objects.filter(submission=ada, reviewer__username="bob").update(recommendation="no")
    Review.objects.filter(submission=bea, reviewer__username="alice").update(recommendation="yes")
    data = {c["submission"]: c for c in cohort_for(assignment).as_json()["candidates"]}
    html = cohort_report_html(assignment)
    page = Page(html)
    words = {"strong_yes": "strong yes", "yes": "yes", "no": "no", "strong_no": "strong no"}
    for sid, c in data.items():
        cells = page.row_by_id(f"row-{sid}")
        text = " · ".join(f"{n} {words[v]}" for v, n in c["recommendations"].items())
        split = " ⚑ split" if c["recommendation_agreement"] == "split" else ""
        assert cells[-1] == (text or "—") + split
        assert ("⚠ contradicts its checks" in cells[-2]) == c["contradicted"]
    assert page.row_by_id(f"row-{ada.pk}")[-1] == "1 strong yes · 1 no ⚑ split"
    section = html[html.index(f'id="candidate-{ada.pk}"') :]
    section = section[: section.index("</section>")]
    assert Page(section).row("Recommendation") == ["Recommendation", "Strong yes", "No"]
    # alice's 3s beside the failed no-secrets check, marked with its id, as in the JSON.
    marks = {r["reviewer"]: r["contradicts_checks"] for r in data[ada.pk]["reviews"]}
    assert marks["alice"] == {
        "Recording hygiene": {"value": 3, "checks": ["cassettes.no_secrets"], "failed": True}
    }
    # bob's 1 beside the one entry-point check that passed: the other direction.
    assert marks["bob"] == {
        "Entry points and notes": {"value": 1, "checks": ["docs.entrypoints"], "failed": False}
    }
    assert (
        "alice on Recording hygiene: contradicts its checks: 3 while cassettes.no_secrets failed"
        in section
    )
    assert (
        "bob on Entry points and notes: contradicts its checks: 1 while docs.entrypoints passed"
        in section
    )
    assert "⚠ contradicts its checks (cassettes.no_secrets)" in section
    one = submission_report_html(Submission.objects.get(pk=ada.pk))
    assert "Recommendations: <strong>1 strong yes · 1 no</strong>" in one
