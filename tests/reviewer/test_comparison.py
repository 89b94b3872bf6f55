"""The hiring lead's comparison: totals, reviewer spread, CSV, chart, constant queries."""

from __future__ import annotations

import html
import io
import re
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from reviewer.models import Review, RubricTemplate, Score
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, CheckResult
from tests.conftest import make_zip


def _cohort(
    assignment, reviewers, n: int, scores=(3, 1), prefix: str = "Candidate", state="submitted"
) -> list:
    rubric = RubricTemplate.objects.get(slug="cassette")
    rows = list(rubric.rows.all())
    out = []
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        for i in range(n):
            candidate = Candidate.objects.create(name=f"{prefix} {i:03d}")
            s = submission_create(
                upload=io.BytesIO(make_zip({"n": str(i)})),
                filename="c.zip",
                candidate=candidate,
                assignment=assignment,
            ).submission
            for reviewer, value in zip(reviewers, scores, strict=False):
                review = Review.objects.create(
                    submission=s, reviewer=reviewer, rubric=rubric, state=state
                )
                Score.objects.bulk_create(
                    [Score(review=review, row=row, value=value) for row in rows]
                )
            out.append(s)
    return out


def test_reviewers_cannot_open_the_comparison(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("comparison", args=[assignment.slug])).status_code == 404


def _block(body: str, name: str) -> str:
    """The comparison's tbody of one candidate."""
    for block in body.split('<tbody class="candidate')[1:]:
        if f">{name}</a>" in block:
            return block
    raise AssertionError(f"no line for {name}")


def test_each_reviewers_total_has_its_own_column_and_a_split_is_flagged(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    _cohort(assignment, [reviewer, reviewer2], 2, scores=(3, 1))
    client.force_login(lead)
    page = client.get(reverse("comparison", args=[assignment.slug]))
    assert page.status_code == 200
    body = page.content.decode()
    head = body[body.index("<thead>") : body.index("</thead>")]
    assert head.index(">alice</a>") < head.index(">bob</a>")  # a column per reviewer
    block = _block(body, "Candidate 000")
    cells = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)', block)
    # alice 100.0, bob 33.3, range, mean, then each rubric row's range
    assert cells[:4] == ["100.0", "33.3", "33.3–100.0", ""]
    assert "<strong>66.7</strong>" in block  # (100 + 33.3) / 2, shown with its range
    assert cells[4:] and all(cell.startswith("1–3") for cell in cells[4:])
    assert "⚑ reviewers disagree" in block and block.startswith(' flagged"')
    assert "totals 33.3 to 100.0 (66.7 apart)" in block
    assert "±" not in body  # a range reads as a range


def test_the_mean_never_hides_a_split(client, lead, reviewer, reviewer2, assignment) -> None:
    """The issue's own case: 95.0 and 28.3 average to 61.6 and outrank an agreed 60;
    the range and the flag stand next to it, and sorting by disagreement puts it first."""
    split, _agreed = _cohort(assignment, [reviewer, reviewer2], 2, scores=(2, 2))
    rows = list(RubricTemplate.objects.get(slug="cassette").rows.all())
    weights = [r.weight for r in rows]
    assert sum(weights) == 100
    for score in Score.objects.filter(review__submission=split, review__reviewer=reviewer):
        score.value = 3
        score.save()
    for score in Score.objects.filter(review__submission=split, review__reviewer=reviewer2):
        score.value = 1 if score.row.order % 2 else 0
        score.save()
    from reviewer.cohort.cohort import cohort_for

    data = {c["candidate"]: c for c in cohort_for(assignment).as_json()["candidates"]}
    low, high = data["Candidate 000"]["min"], data["Candidate 000"]["max"]
    assert high - low >= 20 and data["Candidate 000"]["flagged"]
    assert not data["Candidate 001"]["flagged"]
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    body = client.get(url, {"sort": "range"}).content.decode()
    table = body[body.index("<table") :]
    assert table.index("Candidate 000") < table.index("Candidate 001")
    assert f"{low}–{high}" in _block(body, "Candidate 000")


def test_drafts_are_shown_in_progress_and_never_counted(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    (sub,) = _cohort(assignment, [reviewer], 1, scores=(3,))
    rubric = RubricTemplate.objects.get(slug="cassette")
    draft = Review.objects.create(submission=sub, reviewer=reviewer2, rubric=rubric)
    Score.objects.bulk_create([Score(review=draft, row=row, value=0) for row in rubric.rows.all()])
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    block = _block(body, "Candidate 000")
    assert "in progress" in block and "<strong>100.0</strong>" in block
    assert "1 review still in progress, not counted" in block
    assert "reviewers disagree" not in block


def test_filters_by_checks_reviewer_and_flag_and_names_what_it_ignored(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    flawed, broken, clean, unread = _cohort(assignment, [reviewer, reviewer2], 4, scores=(3, 1))
    Review.objects.filter(submission=clean, reviewer=reviewer2).delete()
    Review.objects.filter(submission=unread).delete()
    CheckResult.objects.create(submission=flawed, check_id="replay.runs", status="fail")
    CheckResult.objects.create(submission=flawed, check_id="replay.twice", status="error")
    CheckResult.objects.create(submission=broken, check_id="replay.runs", status="error")
    CheckResult.objects.create(submission=clean, check_id="replay.runs", status="pass")
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])

    def shown(**query) -> list[str]:
        body = client.get(url, query).content.decode()
        return sorted(set(re.findall(r">(Candidate \d{3})</a>", body)))

    assert shown(status="flaws") == ["Candidate 000"]
    assert shown(status="could-not-run") == ["Candidate 001"]  # an error is not a flaw
    assert shown(status="clean") == ["Candidate 002"]
    assert shown(status="unchecked") == ["Candidate 003"]
    assert shown(reviewer="bob") == ["Candidate 000", "Candidate 001"]
    assert shown(flagged="1") == ["Candidate 000", "Candidate 001"]
    assert shown(flagged="1", reviewer="alice", status="flaws") == ["Candidate 000"]
    body = client.get(url, {"status": "nope", "reviewer": "<b>x</b>", "sort": "zz"}).content
    text = body.decode()
    assert "unknown status &#x27;nope&#x27;, ignored" in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    assert "unknown sort" in text and "Candidate 003" in text
    by_bob = client.get(url, {"sort": "reviewer", "by": "bob"}).content.decode()
    table = by_bob[by_bob.index("<table") :]
    assert table.index("Candidate 000") < table.index("Candidate 002")  # bob's, then none
    none = client.get(url, {"status": "clean", "reviewer": "bob"}).content.decode()
    assert "No candidate matches these filters" in none


def test_the_evidence_and_notes_behind_each_score_unfold_escaped(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    from reviewer.models import Note

    (sub,) = _cohort(assignment, [reviewer, reviewer2], 1, scores=(3, 1))
    Candidate.objects.filter(pk=sub.candidate_id).update(name="<script>alert(1)</script>")
    row = RubricTemplate.objects.get(slug="cassette").rows.first()
    Score.objects.filter(review__reviewer=reviewer, row=row).update(
        evidence="replay passed twice <img src=x onerror=alert(2)>"
    )
    Note.objects.create(submission=sub, author=reviewer2, row=row, body="retries **hide** a 500")
    Note.objects.create(submission=sub, author=reviewer2, row=None, body="general, not a row")
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;alert(1)" in body
    assert "<img src=x" not in body
    assert "replay passed twice &lt;img src=x onerror=alert(2)&gt;" in body
    start = body.index("<details>")
    details = body[start : body.index("</details>", start)]
    assert "Note: retries **hide** a 500" in details and "general, not a row" not in details
    # and on hover, the row's cell names each reviewer's score and evidence line
    assert (
        'title="alice: 3 (replay passed twice &lt;img src=x onerror=alert(2)&gt;); bob: 1"' in body
    )


def test_the_page_shows_the_numbers_of_the_cohort_json(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    from django.contrib.auth.models import User

    from reviewer.cohort.cohort import cohort_for

    third = User.objects.create_user("dana")
    subs = _cohort(assignment, [reviewer, reviewer2, third], 6, scores=(3, 2, 1))
    for i, s in enumerate(subs):
        for score in Score.objects.filter(review__submission=s, review__reviewer=third):
            score.value = (i + score.row.order) % 4
            score.save()
    data = cohort_for(assignment).as_json()
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    from django.template.defaultfilters import floatformat

    figure = data["agreement"]["alpha"]
    low, high = figure["ci95"]
    assert figure["value"] == data["agreement"]["alpha_ordinal"] is not None
    assert (
        f"Krippendorff's alpha (ordinal) <strong>{floatformat(figure['value'], 3)}</strong> "
        f"(95 % interval {floatformat(low, 2)} to {floatformat(high, 2)}, "
        f"{figure['units']} units scored by two or more reviewers: {figure['reading']})"
    ) in html.unescape(body)
    for c in data["candidates"]:
        block = _block(body, c["candidate"])
        cells = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)', block)
        totals = {r["reviewer"]: r["total"] for r in c["reviews"]}
        assert cells[:3] == [str(totals[name]) for name in ("alice", "bob", "dana")]
        assert cells[3] == f"{c['min']}–{c['max']}"
        assert f"<strong>{c['mean']}</strong>" in block
        assert ("reviewers disagree" in block) == c["flagged"]


def test_the_dot_chart_puts_each_reviewers_total_on_a_0_to_100_axis(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    from reviewer.cohort.chart import AXIS_WIDTH, LABEL_WIDTH

    _cohort(assignment, [reviewer, reviewer2], 1, scores=(3, 1))
    _cohort(assignment, [], 1, prefix="Unscored")
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    svg = body[body.index("<svg") : body.index("</svg>")]
    assert "<script" not in svg and not re.search(r"\sstyle=", svg)  # draws under the page's CSP
    label = "Candidate 000: alice: 100.0, bob: 33.3; range 33.3 to 100.0; reviewers disagree"
    assert f'aria-label="{label}"' in svg
    assert 'aria-label="Unscored 000: not scored"' in svg
    row = svg[svg.index(f'aria-label="{label}"') :]
    row = row[: row.index("</g>")]
    # the range bar runs from 33.3 to 100 on the axis
    x = float(re.search(r'<rect x="([\d.]+)"', row).group(1))
    width = float(re.search(r'<rect [^>]*width="([\d.]+)"', row).group(1))
    assert x == pytest.approx(LABEL_WIDTH + 0.333 * AXIS_WIDTH, abs=0.2)
    assert x + width == pytest.approx(LABEL_WIDTH + AXIS_WIDTH, abs=0.2)
    assert row.count("<path") == 2 and "<title>alice: 100.0</title>" in row
    for tick in ("0", "25", "50", "75", "100"):
        assert f'text-anchor="middle" fill="#555">{tick}</text>' in svg


def test_comparison_csv_export(client, lead, reviewer, reviewer2, assignment) -> None:
    import csv

    _cohort(assignment, [reviewer, reviewer2], 2, scores=(2, 3))
    unscored = _cohort(assignment, [], 1, prefix="Unscored")
    Candidate.objects.filter(name="Candidate 001").update(name="=HYPERLINK(1)")
    client.force_login(lead)
    response = client.get(reverse("comparison", args=[assignment.slug]) + "?format=csv")
    assert response["Content-Type"].startswith("text/csv")
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(lines) == 3
    by_name = {line["candidate"]: line for line in lines}
    assert "'=HYPERLINK(1)" in by_name  # no formula injection
    line = by_name["Candidate 000"]
    assert (line["alice (total)"], line["bob (total)"]) == ("66.7", "100.0")
    assert (line["lowest total"], line["highest total"], line["flagged"]) == (
        "66.7",
        "100.0",
        "yes",
    )
    assert line["Replays offline (lowest)"] == "2" and line["Replays offline (highest)"] == "3"
    nobody = by_name["Unscored 000"]
    assert unscored and nobody["Replays offline (mean)"] == ""  # not 0, nor a spread of 0
    assert nobody["Replays offline (lowest)"] == "" and nobody["mean total"] == ""
    assert nobody["flagged"] == "no" and nobody["alice (total)"] == ""
    flagged_only = client.get(
        reverse("comparison", args=[assignment.slug]), {"format": "csv", "flagged": "1"}
    )
    assert len(list(csv.DictReader(io.StringIO(flagged_only.content.decode())))) == 2


def test_comparison_sorts_by_total_then_name(client, lead, reviewer, assignment) -> None:
    subs = _cohort(assignment, [reviewer], 3, scores=(1,))
    Score.objects.filter(review__submission=subs[2]).update(value=3)
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    assert body.index("Candidate 002") < body.index("Candidate 000")
    by_name = client.get(reverse("comparison", args=[assignment.slug]) + "?sort=name")
    text = by_name.content.decode()
    assert text.index("Candidate 000") < text.index("Candidate 002")


@pytest.mark.parametrize("n", [3, 30])
def test_comparison_query_count_does_not_grow_with_candidates(
    client, lead, reviewer, reviewer2, assignment, n, django_assert_max_num_queries
) -> None:
    _cohort(assignment, [reviewer, reviewer2], n)
    client.force_login(lead)
    User.objects.get(pk=lead.pk)
    url = reverse("comparison", args=[assignment.slug])
    with django_assert_max_num_queries(18):  # built, and the cache written
        assert client.get(url).status_code == 200
    with django_assert_max_num_queries(7):  # then read from the cache
        assert client.get(url).status_code == 200


def _queries(client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_submission_and_assignment_pages_query_count_is_flat(client, lead, assignment) -> None:
    from submissions.models import Recording, TraceRow, Turn

    def grow(submission, n: int) -> None:
        recs = Recording.objects.bulk_create(
            [
                Recording(submission=submission, path=f"cassettes/{i}.json", format="cassette_json")
                for i in range(n)
            ]
        )
        TraceRow.objects.bulk_create(
            [
                TraceRow(submission=submission, recording=recs[0], line=i, url="/orders")
                for i in range(n)
            ]
        )
        Turn.objects.bulk_create(
            [Turn(submission=submission, thread=0, index=i, recording=recs[i]) for i in range(n)]
        )

    small, big = _cohort(assignment, [], 2)
    grow(small, 3)
    grow(big, 300)
    client.force_login(lead)
    _queries(client, small.get_absolute_url())  # warm: creates the lead's review
    _queries(client, big.get_absolute_url())
    assert _queries(client, small.get_absolute_url()) == _queries(client, big.get_absolute_url())
    url = assignment.get_absolute_url()
    few = _queries(client, url)
    _cohort(assignment, [], 20, prefix="More")
    assert _queries(client, url) == few


def test_assignment_page_badges_scores_filter_and_blind_totals(
    client, reviewer, reviewer2, lead, assignment
) -> None:
    subs = _cohort(assignment, [reviewer, reviewer2], 2, scores=(3, 0), state="draft")
    for s in subs:
        s.reviewers.add(reviewer)
    CheckResult.objects.create(
        submission=subs[0], check_id="replay.offline_pass", status="fail", summary="exit 1"
    )
    CheckResult.objects.create(
        submission=subs[0], check_id="cassettes.keys_match", status="pass", summary="ok"
    )
    url = reverse("assignment", args=[assignment.slug])
    client.force_login(lead)
    page = client.get(url).content.decode()
    assert 'status-fail" title="1 fail ">replay' in page
    assert 'status-pass" title="1 pass ">cassettes' in page
    assert "50.0" in page  # the lead sees the mean of 100 and 0
    client.force_login(reviewer)
    page = client.get(url).content.decode()
    assert "100.0" in page and "50.0" not in page  # a reviewer sees only their own total
    filtered = client.get(url + "?q=001").content.decode()
    assert "Candidate 001" in filtered and "Candidate 000" not in filtered


def test_assignment_page_paginates(client, lead, assignment) -> None:
    _cohort(assignment, [], 55)
    client.force_login(lead)
    page = client.get(reverse("assignment", args=[assignment.slug])).content.decode()
    assert "page 1 of 2" in page
    candidates = page[: page.index('id="rules"')]
    assert candidates.count("<tr>") - 1 == 50  # header row + one page of candidates


def test_comparison_template_pages_when_given_a_page(rf, lead, reviewer, assignment) -> None:
    from django.core.paginator import Paginator
    from django.template.loader import render_to_string

    from reviewer.cohort.chart import dot_chart
    from reviewer.cohort.cohort import cohort_for
    from reviewer.cohort.comparison import Filters, table_rows

    _cohort(assignment, [reviewer], 5, scores=(2,))
    cohort = cohort_for(assignment)
    filters = Filters.from_query({"sort": "name"}, cohort)
    page = Paginator(filters.apply(cohort), 2).get_page("2")
    request = rf.get(reverse("comparison", args=[assignment.slug]), {"sort": "name", "page": 2})
    request.user = lead
    context = {
        "assignment": assignment,
        "cohort": cohort,
        "filters": filters,
        "page": page,
        "lines": table_rows(cohort, list(page.object_list)),
        "chart": dot_chart(page.object_list, cohort.reviewers),
    }
    body = render_to_string("reviewer/comparison.html#table", context, request=request)
    assert "Candidate 002" in body and "Candidate 001" not in body
    assert "candidates 3–4 of 5" in body
    assert "?sort=name&amp;page=1" in body and "?sort=name&amp;page=3" in body


def test_the_comparison_page_shows_fifty_candidates_a_page_and_the_csv_all(
    client, lead, reviewer, assignment
) -> None:
    _cohort(assignment, [reviewer], 55, scores=(2,))
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    first = client.get(url, {"sort": "name"}).content.decode()
    assert "candidates 1–50 of 55" in first
    assert "Candidate 049" in first and "Candidate 050" not in first
    second = client.get(url, {"sort": "name", "page": 2}).content.decode()
    assert "Candidate 054" in second and "Candidate 049" not in second
    csv_text = client.get(url, {"format": "csv"}).content.decode()
    assert "Candidate 000" in csv_text and "Candidate 054" in csv_text


def test_the_cached_table_changes_with_every_score_check_and_name(
    client, lead, reviewer, assignment
) -> None:
    """The comparison is cached between changes, never served stale after one."""
    from cassettes_app.checks import CheckOutcome
    from submissions.checks.store import checks_store

    (sub,) = _cohort(assignment, [reviewer], 1, scores=(1,))
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    first = client.get(url).content.decode()
    with mock.patch("reviewer.cohort.table_cache.cohort_for") as rows:
        again = client.get(url).content.decode()
        rows.assert_not_called()  # served from the cache,
    assert again.split("<main")[1] == first.split("<main")[1]  # the same table
    assert again.split("<main")[0] != first.split("<main")[0]  # with a fresh CSRF token

    review = Review.objects.get(submission=sub)
    row = review.rubric.rows.first()
    score = Score.objects.get(review=review, row=row)
    score.value = 2
    score.save()
    after_score = client.get(url).content.decode()
    assert after_score != first

    checks_store(sub, None, [CheckOutcome("replay.runs", "fail", "it broke")])
    after_check = client.get(url).content.decode()
    assert "1 flaw found" in after_check and "1 flaw found" not in after_score

    candidate = sub.candidate
    candidate.name = "Renamed Person"
    candidate.save()
    assert "Renamed Person" in client.get(url).content.decode()

    newcomer = _cohort(assignment, [], 1, prefix="Newcomer")
    assert newcomer and "Newcomer 000" in client.get(url).content.decode()

    before = client.get(url).content.decode().split("</svg>")[0]
    assert before.count(">not scored</text>") == 1  # the newcomer
    Review.objects.filter(pk=review.pk).delete()  # cascades to its scores
    chart = client.get(url).content.decode().split("</svg>")[0]
    assert chart.count(">not scored</text>") == 2  # the newcomer, and now the renamed one


def test_saving_a_stale_assignment_never_brings_an_old_table_back(
    client, lead, reviewer, assignment
) -> None:
    """An assignment loaded before the table changed, saved after, keeps the newest table."""
    from django.core.cache import caches

    (sub,) = _cohort(assignment, [reviewer], 1, scores=(1,))
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])

    def table() -> str:
        return client.get(url).content.decode().split("<main")[1]

    stale = type(assignment).objects.get(pk=assignment.pk)  # generation N
    table()  # cached at N
    scores = list(Score.objects.filter(review__submission=sub))
    scores[0].delete()  # N + 1
    table()  # cached at N + 1
    scores[1].delete()  # N + 2
    stale.title = "Renamed assignment"
    stale.save()  # must not write N back (a bump would then land on N + 1's old table)
    shown = table()
    caches["fragments"].clear()
    assert shown == table()  # what a fresh build shows


def test_the_csv_counts_flaws_apart_from_checks_that_could_not_run(
    client, lead, reviewer, assignment
) -> None:
    import csv
    import io

    from submissions.models import CheckResult

    (sub,) = _cohort(assignment, [reviewer], 1, scores=(2,))
    for cid, status in [
        ("cassettes.keys_match", "fail"),
        ("replay.offline_pass", "error"),
        ("replay.byte_identical", "error"),
        ("cassettes.fresh", "pass"),
    ]:
        CheckResult.objects.create(submission=sub, check_id=cid, status=status, summary="s")
    client.force_login(lead)
    text = client.get(reverse("comparison", args=[assignment.slug]), {"format": "csv"})
    header, row = list(csv.reader(io.StringIO(text.content.decode())))
    assert header[-2:] == ["flaws found", "could not run"]
    assert row[-2:] == ["1", "2"]
    page = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    assert "2 could not run" in page and "1 flaw found" in page


def test_a_secret_pasted_into_evidence_or_a_note_is_never_shown_in_full(
    client, lead, reviewer, assignment
) -> None:
    from reviewer.models import Note
    from tests.reviewer.test_share_report import fake_key

    key = fake_key()
    (sub,) = _cohort(assignment, [reviewer], 1, scores=(2,))
    row = RubricTemplate.objects.get(slug="cassette").rows.first()
    Score.objects.filter(review__submission=sub, row=row).update(evidence=f"used {key} live")
    Note.objects.create(submission=sub, author=reviewer, row=row, body="x " * 400 + key)
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    body = client.get(url).content.decode()
    assert key[:20] not in body and "used sk-p…" in body
    csv_text = client.get(url, {"format": "csv"}).content.decode()
    assert key[:20] not in csv_text


def test_each_line_links_its_candidate_side_by_side_with_the_next_one(
    client, lead, reviewer, assignment
) -> None:
    first, second = _cohort(assignment, [reviewer], 2, scores=(2,))
    Score.objects.filter(review__submission=second).update(value=3)  # second ranks first
    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    pair = reverse("pairwise", args=[assignment.slug])
    assert f'href="{pair}?a={second.pk}&amp;b={first.pk}"' in _block(body, "Candidate 001")
    assert f'href="{pair}?a={first.pk}">pick…' in _block(body, "Candidate 000")  # the last


def test_the_table_generation_lives_beside_the_assignment_in_the_reviewer_app(
    client, lead, reviewer, assignment
) -> None:
    """A new assignment gets its generation row; a score change moves it on; an assignment
    whose row is missing is served fresh every time rather than from an unkeyed cache."""
    from reviewer.models import TableGeneration

    (sub,) = _cohort(assignment, [reviewer], 1, scores=(1,))
    before = TableGeneration.objects.get(assignment=assignment).value
    Score.objects.filter(review__submission=sub).first().delete()
    assert TableGeneration.objects.get(assignment=assignment).value > before
    # The lower app holds no column for the upper one's cache.
    assert "table_generation" not in [f.name for f in type(assignment)._meta.concrete_fields]

    TableGeneration.objects.filter(assignment=assignment).delete()
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    first = client.get(url).content.decode()
    Score.objects.filter(review__submission=sub).delete()  # no generation to move on
    assert client.get(url).content.decode() != first


def _recommend(submission, reviewer, value: str) -> None:
    Review.objects.filter(submission=submission, reviewer=reviewer).update(recommendation=value)


def test_each_reviewers_recommendation_is_shown_and_counted_as_the_json_says(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    import csv

    from reviewer.cohort.cohort import cohort_for

    dana = User.objects.create_user("dana")
    agreed, split, none = _cohort(assignment, [reviewer, reviewer2, dana], 3, scores=(2, 2, 2))
    for who, value in ((reviewer, "yes"), (reviewer2, "yes"), (dana, "strong_no")):
        _recommend(split, who, value)
    for who, value in ((reviewer, "strong_yes"), (reviewer2, "yes"), (dana, "yes")):
        _recommend(agreed, who, value)
    data = {c["candidate"]: c for c in cohort_for(assignment).as_json()["candidates"]}
    assert [r["recommendation"] for r in data["Candidate 001"]["reviews"]] == [
        "yes",
        "yes",
        "strong_no",
    ]
    assert data["Candidate 001"]["recommendations"] == {"yes": 2, "strong_no": 1}
    assert data["Candidate 001"]["recommendation_agreement"] == "split"
    assert data["Candidate 001"]["flagged"] is True  # same scores, opposite calls
    assert data["Candidate 000"]["recommendation_agreement"] == "same side"
    assert data["Candidate 000"]["flagged"] is False
    assert [r["recommendation"] for r in data["Candidate 002"]["reviews"]] == [None] * 3
    assert data["Candidate 002"]["recommendations"] == {}

    client.force_login(lead)
    body = client.get(reverse("comparison", args=[assignment.slug])).content.decode()
    line = _block(body, "Candidate 001")
    assert "2 yes · 1 strong no" in line and "⚑ split" in line
    assert "recommendations split: 2 yes · 1 strong no" in html.unescape(line)
    assert re.search(r">\s*66\.7<small class=\"rec\"> strong no</small>", line)
    assert "1 strong yes · 2 yes" in _block(body, "Candidate 000")
    assert "⚑ split" not in _block(body, "Candidate 000")
    assert '<td class="rec">—</td>' in _block(body, "Candidate 002")
    # The counts are the JSON's, level by level.
    for c in data.values():
        words = " · ".join(
            f"{n} {label}"
            for value, label in (
                ("strong_yes", "strong yes"),
                ("yes", "yes"),
                ("no", "no"),
                ("strong_no", "strong no"),
            )
            if (n := c["recommendations"].get(value))
        )
        assert (words or "—") in _block(body, c["candidate"])

    rows = csv.DictReader(
        io.StringIO(
            client.get(
                reverse("comparison", args=[assignment.slug]), {"format": "csv"}
            ).content.decode()
        )
    )
    by_name = {r["candidate"]: r for r in rows}
    assert by_name["Candidate 001"]["dana (recommendation)"] == "Strong no"
    assert by_name["Candidate 001"]["recommendations"] == "2 yes · 1 strong no"
    assert by_name["Candidate 001"]["recommendations agree"] == "split"
    assert by_name["Candidate 002"]["alice (recommendation)"] == ""
    assert none


def test_a_score_that_contradicts_its_checks_is_flagged_with_their_ids(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    import csv

    from reviewer.cohort.cohort import cohort_for

    rubric = RubricTemplate.objects.get(slug="cassette")
    row = next(r for r in rubric.rows.all() if r.check_ids)
    (sub,) = _cohort(assignment, [reviewer, reviewer2], 1, scores=(3, 3))
    failing = row.check_ids[0]
    CheckResult.objects.create(submission=sub, check_id=failing, status="fail", summary="s")
    data = cohort_for(assignment).as_json()["candidates"][0]
    marks = [r["contradicts_checks"] for r in data["reviews"]]
    assert marks == [{row.title: {"value": 3, "checks": [failing], "failed": True}}] * 2
    assert data["contradicted"] is True and data["flagged"] is False

    client.force_login(lead)
    body = html.unescape(client.get(reverse("comparison", args=[assignment.slug])).content.decode())
    line = _block(body, "Candidate 000")
    assert "⚠ contradicts its checks</span>" in line
    assert f"⚠ alice on {row.title}: contradicts its checks: 3 while {failing} failed" in line
    assert f"⚠ contradicts its checks ({failing})" in line  # beside the score itself
    text = client.get(reverse("comparison", args=[assignment.slug]), {"format": "csv"})
    (line_csv,) = csv.DictReader(io.StringIO(text.content.decode()))
    assert (
        f"bob on {row.title}: contradicts its checks: 3 while {failing} failed"
        in (line_csv["contradicts its checks"])
    )

    # Nothing observed (the check skipped for a missing precondition): no marker.
    CheckResult.objects.filter(submission=sub).update(status="skip")
    assert cohort_for(assignment).as_json()["candidates"][0]["contradicted"] is False
