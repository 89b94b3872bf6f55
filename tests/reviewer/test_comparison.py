"""The hiring lead's comparison: totals, reviewer spread, CSV, chart, constant queries."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from reviewer.models import Review, RubricTemplate, Score
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.models import Candidate, CheckResult
from tests.conftest import make_zip


def _cohort(assignment, reviewers, n: int, scores=(3, 1), prefix: str = "Candidate") -> list:
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
                review = Review.objects.create(submission=s, reviewer=reviewer, rubric=rubric)
                Score.objects.bulk_create(
                    [Score(review=review, row=row, value=value) for row in rows]
                )
            out.append(s)
    return out


def test_reviewers_cannot_open_the_comparison(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("comparison", args=[assignment.slug])).status_code == 404


def test_comparison_shows_totals_and_highlights_a_spread_of_two(
    client, lead, reviewer, reviewer2, assignment
) -> None:
    _cohort(assignment, [reviewer, reviewer2], 2, scores=(3, 1))
    client.force_login(lead)
    page = client.get(reverse("comparison", args=[assignment.slug]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "Candidate 000" in body and "Candidate 001" in body
    assert 'class="spread"' in body and "±2" in body
    assert "<svg" in body and "<rect" in body
    # (100 + 33.3) / 2 reviewers
    assert "66.7" in body


def test_comparison_csv_export(client, lead, reviewer, assignment) -> None:
    _cohort(assignment, [reviewer], 2, scores=(2,))
    Candidate.objects.filter(name="Candidate 001").update(name="=HYPERLINK(1)")
    client.force_login(lead)
    response = client.get(reverse("comparison", args=[assignment.slug]) + "?format=csv")
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("candidate,submission,Replays offline (mean)")
    assert len(lines) == 3
    assert any(line.startswith("'=HYPERLINK(1)") for line in lines)  # no formula injection
    assert all(",66.7," in line for line in lines[1:])


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
    subs = _cohort(assignment, [reviewer, reviewer2], 2, scores=(3, 0))
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

    from reviewer.comparison import chart_bars, comparison_rows

    _cohort(assignment, [reviewer], 5, scores=(2,))
    rubric_rows, rows = comparison_rows(assignment, sort="name")
    page = Paginator(rows, 2).get_page("2")
    request = rf.get(reverse("comparison", args=[assignment.slug]), {"sort": "name", "page": 2})
    request.user = lead
    context = {
        "assignment": assignment,
        "rubric_rows": rubric_rows,
        "rows": page.object_list,
        "page": page,
        "sort": "name",
        "bars": chart_bars(page.object_list),
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
    from reviewer.scoring import score_save
    from submissions.checks.store import checks_store

    (sub,) = _cohort(assignment, [reviewer], 1, scores=(1,))
    client.force_login(lead)
    url = reverse("comparison", args=[assignment.slug])
    first = client.get(url).content.decode()
    with mock.patch("reviewer.views.comparison.comparison_rows") as rows:
        again = client.get(url).content.decode()
        rows.assert_not_called()  # served from the cache,
    assert again.split("<main")[1] == first.split("<main")[1]  # the same table
    assert again.split("<main")[0] != first.split("<main")[0]  # with a fresh CSRF token

    review = Review.objects.get(submission=sub)
    row = review.rubric.rows.first()
    score = Score.objects.get(review=review, row=row)
    score_save(
        review=review, row=row, value=2, evidence="", override_reason="",
        expected_version=score.version,
    )  # fmt: skip
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
    assert before.count("not scored") == 1  # the newcomer
    Review.objects.filter(pk=review.pk).delete()  # cascades to its scores
    chart = client.get(url).content.decode().split("</svg>")[0]
    assert chart.count("not scored") == 2  # the newcomer, and now the renamed candidate


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
