"""The demo cohort seeds cleanly and idempotently, like real uploads."""

from __future__ import annotations

from unittest import mock

from django.core.management import call_command

from reviewer.ops.demo import DEMO_DIR, zip_tree
from submissions.jobs import queue
from submissions.models import Assignment, Submission


def test_seed_demo_ingests_every_demo_repo_and_prints_logins(db, capsys) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
        out = capsys.readouterr().out
        assert "reviewer:review-the-tapes" in out and "lead:lead-the-hiring" in out
        repos = {p.name for p in (DEMO_DIR / "repos").iterdir() if p.is_dir()}
        assert Submission.objects.count() == len(repos) >= 8
        assert not Submission.objects.filter(status=Submission.Status.REJECTED).exists()
        assert Assignment.objects.count() == 4
        # A new user can try the record pass on the demo without editing its assignment.
        assert Assignment.objects.get(slug="cassette-triage").record_command == "make record"
        call_command("seed_demo")  # idempotent: same archives, same submissions
    assert Submission.objects.count() == len(repos)


def test_demo_zip_is_deterministic_and_has_one_top_folder() -> None:
    repo = DEMO_DIR / "repos" / "cassette-good"
    first = zip_tree(repo, "cassette-good-main")
    assert first == zip_tree(repo, "cassette-good-main")
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert all(n.startswith("cassette-good-main/") for n in names)
    assert not any("__pycache__" in n for n in names)


def test_demo_users_can_log_in(client, db) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    assert client.login(username="reviewer", password="review-the-tapes")
    page = client.get("/")
    assert b"Cassette" in page.content


def test_the_demo_has_earlier_reviews_for_the_lead_and_nothing_scored_for_its_logins(
    client, db
) -> None:
    from django.contrib.auth.models import User
    from django.urls import reverse

    from reviewer.cohort.cohort import cohort_for
    from reviewer.models import Review, ScoreEvent

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
        call_command("seed_demo")  # each review once
    reviews = Review.objects.filter(reviewer__username__in=["ana.k", "ben.o"])
    assert reviews.count() == 8 and all(r.state == "submitted" for r in reviews)
    assert not Review.objects.filter(reviewer__username__in=["reviewer", "reviewer2"]).exists()
    assert not User.objects.get(username="ana.k").has_usable_password()
    # Through the scoring functions: every score and the submit are in the audit trail.
    assert ScoreEvent.objects.filter(kind="submit").count() == 8
    assert ScoreEvent.objects.filter(kind="score").count() == 8 * 5  # five rows each
    cohort = cohort_for(Assignment.objects.get(slug="cassette-triage"))
    flagged = {c.name for c in cohort.candidates if c.flagged}
    assert flagged == {"Tomasz Wielgosz"}  # 26.7 against 75.0
    assert cohort.alpha is not None
    client.force_login(User.objects.get(username="lead"))
    page = client.get(reverse("comparison", args=["cassette-triage"])).content.decode()
    assert "ana.k" in page and "26.7–75.0" in page


def test_the_demo_offers_no_way_in(client, db, settings) -> None:
    """No login page and no Django admin (its own login first) in the public demo: not
    linked, and not there when asked for; with the demo off, both are back."""
    from django.contrib.auth.models import User

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    for url in ("/login/", "/admin/", "/admin/login/", "/admin/auth/user/"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"Not found" in response.content
    assert client.post("/login/", {"username": "lead", "password": "x"}).status_code == 404
    for page in ("/", "/formats/", "/no-such-page/"):
        html = client.get(page).content.decode()
        assert 'href="/login/' not in html and 'href="/admin/' not in html, page
    settings.DEMO_MODE = False
    assert client.get("/login/").status_code == 200
    User.objects.create_superuser("root", password="pw-root-2026")
    assert client.get("/admin/login/").status_code == 200


def test_the_demo_speaks_to_a_visitor_not_a_reviewer(client, db, settings) -> None:
    """Where a reviewer would score, the demo shows the earlier reviewers' submitted scores;
    no count of what is left to score, no next step for a reviewer."""
    from reviewer.models import Review
    from submissions.models import Submission

    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("seed_demo")
    settings.DEMO_MODE = True
    flawed = Submission.objects.get(candidate__name="Tomasz Wielgosz")
    html = client.get(flawed.get_absolute_url()).content.decode()
    assert "left to score" not in html and "Next:</strong>" not in html
    assert "Score <strong>—</strong>" not in html
    rubric = html[html.index('id="rubric"') :]
    for review in Review.objects.filter(submission=flawed, state="submitted"):
        for score in review.scores.all():
            line = f"{review.reviewer.username}: <strong>{score.value}</strong>"
            assert line in rubric
