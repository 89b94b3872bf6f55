"""A git hand-in's page: the commit judged, its date and subject, and where it came from."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.urls import reverse

from submissions.intake.upload import submission_create
from submissions.jobs import queue
from tests.conftest import SMALL_REPO
from tests.git_factories import make_bundle


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        yield


def _bundle_submission(assignment, candidate, commits=None, messages=None):
    data = make_bundle(
        commits or [{"v.txt": "one"}, SMALL_REPO], messages=messages or ["start", "Add cassettes"]
    )
    return submission_create(
        upload=io.BytesIO(data), filename="h.bundle", candidate=candidate, assignment=assignment
    ).submission


def test_the_page_shows_the_commit_its_date_and_subject(
    client, lead, assignment, candidate
) -> None:
    s = _bundle_submission(assignment, candidate)
    assert s.source_commit_subject == "Add cassettes"
    assert s.source_commit_time.isoformat() == "2023-11-14T23:13:20+00:00"
    client.force_login(lead)
    page = client.get(s.get_absolute_url()).content.decode()
    assert s.source_commit[:10] in page
    assert "2023-11-14 23:13:20" in page and "“Add cassettes”" in page
    assert "refs/heads/main" in page and "Git bundle" in page
    assert "commit dates are the candidate's to set" in page
    shown = client.get(
        reverse("submission_file", args=[s.pk]) + "?path=cassettes/0123456789abcdef.json"
    )
    assert s.source_commit[:10] in shown.content.decode()


def test_an_archive_shows_no_commit(client, lead, assignment, candidate, small_zip) -> None:
    s = submission_create(
        upload=io.BytesIO(small_zip), filename="r.zip", candidate=candidate, assignment=assignment
    ).submission
    client.force_login(lead)
    page = client.get(s.get_absolute_url()).content.decode()
    assert "<dt>Commit</dt>" not in page


# --- Check again -------------------------------------------------------------------------


@pytest.fixture
def served(settings):
    """A repository on loopback (allowed), and a submission judged at its tip."""
    from submissions.intake.repository import submission_from_repository
    from submissions.models import Candidate
    from tests.conftest import assignment_apply
    from tests.git_factories import make_repo, serve_repository

    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    repo = make_repo([{"v.txt": "one"}, {**SMALL_REPO, "v.txt": "two"}])
    with serve_repository(repo) as url:
        from submissions.assignments import assignment_values

        assignment = assignment_apply(
            values=assignment_values({"slug": "again", "title": "Again", "replay_command": ""})
        )[0]
        person = Candidate.objects.create(name="Ada")
        s = submission_from_repository(url=url, candidate=person, assignment=assignment)
        yield s.submission, repo


def _check_again(client, lead, s, token=""):
    """Press *Check again*, run the job it queued, and return the page after it."""
    from submissions.jobs.engine import job_execute
    from submissions.models import Job

    client.force_login(lead)
    queued = client.post(reverse("ref_check", args=[s.pk]), {"token": token}, follow=True)
    job = s.jobs.get(kind=Job.Kind.REFCHECK, state=Job.State.QUEUED)
    assert job.params == {}
    assert "Check again queued" in queued.content.decode()
    job_execute(job_id=job.pk)
    s.refresh_from_db()
    return queued.content.decode() + client.get(s.get_absolute_url()).content.decode()


def test_check_again_says_the_ref_is_unchanged(client, lead, served) -> None:
    s, _ = served
    checks = {c.check_id: c.status for c in s.checks.all()}
    page = _check_again(client, lead, s)
    assert s.ref_check_state == "same" and s.ref_checked_at is not None
    assert "still points at the commit judged" in page
    assert {c.check_id: c.status for c in s.checks.all()} == checks


def test_check_again_reports_a_push_after_the_deadline(client, lead, served) -> None:
    import json

    from django.core.management import call_command

    from tests.git_factories import add_commit

    s, repo = served
    judged = s.source_commit
    later = add_commit(repo, {"v.txt": "three"}, parents=[judged.encode()], message="late fix")
    page = _check_again(client, lead, s)
    assert s.ref_check_state == "moved" and s.ref_check_commit == later.decode()
    assert s.source_commit == judged  # what was judged stays
    report = io.StringIO()
    call_command("report", str(s.pk), "--format", "json", stdout=report)
    source = json.loads(report.getvalue())["source"]
    assert source["commit"] == judged
    assert source["ref_check"]["state"] == "moved"
    assert source["ref_check"]["commit"] == later.decode() and source["ref_check"]["checked_at"]
    assert "moved on to" in page and "late fix" in page and "still in its history" in page


def test_check_again_reports_a_rewritten_history(client, lead, served) -> None:
    from tests.git_factories import add_commit

    s, repo = served
    judged = s.source_commit
    add_commit(repo, {"v.txt": "rewritten"}, parents=[], message="squashed")
    _check_again(client, lead, s)
    assert s.ref_check_state == "rewritten" and s.source_commit == judged
    assert "no longer in its history" in s.ref_check_detail


def test_check_again_never_writes_on_get_and_is_hidden_in_the_demo(
    client, lead, served, settings
) -> None:
    s, _ = served
    client.force_login(lead)
    assert client.get(reverse("ref_check", args=[s.pk])).status_code == 405
    s.refresh_from_db()
    assert s.ref_checked_at is None
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Check again" in page and "not checked since intake" in page
    settings.DEMO_MODE = True
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Check again</button>" not in page


def test_a_token_given_to_check_again_is_kept_sealed_and_shown_nowhere(
    client, lead, served, caplog
) -> None:
    import base64
    import json

    from django.core.management import call_command

    from submissions.sealed import unseal

    s, _ = served
    token = "ghp_CheckAgainToken0123456789abcdefXYZ"
    with caplog.at_level("DEBUG"):
        page = _check_again(client, lead, s, token=token)
    assert s.ref_check_state == "same"
    assert unseal(s.source_auth_sealed).startswith("Basic ")  # kept, for the next check
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    for text in (out.getvalue(), page, caplog.text):
        assert token not in text and header not in text
    assert "one is kept, sealed" in page
    report = io.StringIO()
    call_command("report", str(s.pk), "--format", "json", stdout=report)
    assert token not in report.getvalue() and json.loads(report.getvalue())["source"]["commit"]
    assert "sealed" not in report.getvalue()


def test_the_job_panel_polls_while_check_again_runs(client, lead, served) -> None:
    from submissions.jobs.engine import job_execute
    from submissions.models import Job

    s, _ = served
    client.force_login(lead)
    client.post(reverse("ref_check", args=[s.pk]))
    again = client.post(reverse("ref_check", args=[s.pk]))  # one at a time
    assert again.status_code == 302
    job = s.jobs.get(kind=Job.Kind.REFCHECK)
    url = s.get_absolute_url() + "?panel=jobs&seen=x"
    panel = client.get(url, HTTP_HX_REQUEST="true")
    body = panel.content.decode()
    assert "<html" not in body and "Check again" in body and 'hx-trigger="every 2s"' in body
    job_execute(job_id=job.pk)
    # (the intake job queued by the fixture still waits, so the panel keeps polling)
    ended = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in ended and 'id="submission-header" hx-swap-oob="true"' in ended
    assert "still points at the commit judged" in ended  # the header, out of band


# --- the upload form: a repository URL and its token ---------------------------------------

TOKEN = "ghp_UploadFormToken9876543210zyxwvuABC"


def test_the_upload_form_takes_a_private_repository_with_its_token(
    client, lead, assignment, settings, caplog
) -> None:
    import json

    from django.core.management import call_command

    from submissions.models import Submission
    from tests.git_factories import make_repo, serve_repository

    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    client.force_login(lead)
    repo = make_repo([{"v.txt": "one"}, {**SMALL_REPO, "v.txt": "two"}])
    with serve_repository(repo, token=TOKEN) as url, caplog.at_level("DEBUG"):
        form = {"candidate": "Grace", "repository_url": url, "ref": "main"}
        refused = client.post(assignment.get_absolute_url(), form, follow=True)
        assert refused.redirect_chain and not Submission.objects.exists()
        assert "401" in refused.content.decode()
        # said beside the token's field, with what to do
        assert "<strong>Access token:</strong> the repository at" in refused.content.decode()
        assert "a private repository needs an access token" in refused.content.decode()
        assert "choose the file again" not in refused.content.decode()  # no file was chosen
        assert "type it again" in refused.content.decode()
        wrong = client.post(assignment.get_absolute_url(), {**form, "token": "ghp_no"}, follow=True)
        assert "the access token was refused" in wrong.content.decode()
        made = client.post(assignment.get_absolute_url(), {**form, "token": TOKEN}, follow=True)
        s = Submission.objects.get()
        again = _check_again(client, lead, s)  # the token kept (sealed) from intake is used
        pages = [
            refused.content.decode(),
            made.content.decode(),
            again,
            client.get(s.get_absolute_url()).content.decode(),
        ]
    assert s.source_kind == "repository" and s.source_url == url
    assert s.ref_check_state == "same", s.ref_check_detail
    assert s.source_auth_sealed and TOKEN not in s.source_auth_sealed
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    report = io.StringIO()
    call_command("report", str(s.pk), "--format", "json", stdout=report)
    assert json.loads(report.getvalue())["source"]["url"] == url
    for text in (*pages, dump.getvalue(), report.getvalue(), caplog.text):
        assert TOKEN not in text
    assert TOKEN not in s.archive.read().decode("latin-1")


def test_the_upload_form_wants_a_file_or_a_url(client, lead, assignment) -> None:
    client.force_login(lead)
    response = client.post(assignment.get_absolute_url(), {"candidate": "Grace"}, follow=True)
    assert response.redirect_chain  # post/redirect/get
    assert "either an archive or bundle file, or a repository URL" in response.content.decode()


def test_a_url_with_credentials_is_shown_again_without_them(client, lead, assignment) -> None:
    client.force_login(lead)
    response = client.post(
        assignment.get_absolute_url(),
        {"candidate": "Grace", "repository_url": f"https://ada:{TOKEN}@example.invalid/r.git"},
    )
    assert response.status_code == 302
    assert TOKEN not in str(dict(client.session))  # the kept refusal holds no credential
    page = client.get(response.url).content.decode()
    assert "https://example.invalid/r.git" in page and TOKEN not in page


def test_a_kept_token_that_no_key_opens_says_so_and_a_new_one_replaces_it(
    client, lead, assignment, settings, caplog
) -> None:
    from cryptography.fernet import Fernet
    from django.db import connection

    from submissions.intake.repository import submission_from_repository
    from submissions.models import Candidate
    from tests.git_factories import make_repo, serve_repository

    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    settings.SECRET_STORE_KEYS = [Fernet.generate_key().decode()]
    repo = make_repo([{"v.txt": "one"}, {**SMALL_REPO, "v.txt": "two"}])
    with serve_repository(repo, token=TOKEN) as url, caplog.at_level("DEBUG"):
        person = Candidate.objects.create(name="Lin")
        s = submission_from_repository(
            url=url, candidate=person, assignment=assignment, token=TOKEN
        ).submission
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM submissions_submission WHERE id = %s", [s.pk])
            assert TOKEN not in repr(cursor.fetchall())
        settings.SECRET_STORE_KEYS = [Fernet.generate_key().decode()]  # the old key lost
        page = _check_again(client, lead, s)
        assert s.ref_check_state == "failed"
        assert "does not open with the keys configured (SECRET_STORE_KEYS)" in s.ref_check_detail
        assert "Save the secret again" in page
        again = _check_again(client, lead, s, token=TOKEN)
        assert s.ref_check_state == "same", s.ref_check_detail
        wrong = _check_again(client, lead, s, token="ghp_wrong")
    assert s.ref_check_state == "failed" and "401" in s.ref_check_detail
    assert "127.0.0.1" in s.ref_check_detail  # the host named, never the token
    assert "give a new one" in s.ref_check_detail
    for text in (page, again, wrong, caplog.text, s.ref_check_detail):
        assert TOKEN not in text and "ghp_wrong" not in text


def test_a_kept_token_can_be_forgotten_and_get_changes_nothing(client, lead, served) -> None:
    s, _ = served
    _check_again(client, lead, s, token="ghp_ForgetMe0123456789")
    assert s.source_auth_sealed
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Forget the kept token" in page
    assert client.get(reverse("token_forget", args=[s.pk])).status_code == 405
    s.refresh_from_db()
    assert s.source_auth_sealed
    response = client.post(reverse("token_forget", args=[s.pk]), follow=True)
    s.refresh_from_db()
    assert not s.source_auth_sealed
    assert "is forgotten" in response.content.decode()
    assert "Forget the kept token" not in response.content.decode()


def test_a_check_again_running_does_not_say_the_checks_are_running(client, lead, served) -> None:
    from submissions.models import Job, Submission

    s, _ = served
    s.jobs.all().update(state=Job.State.PASSED)
    Submission.objects.filter(pk=s.pk).update(status=Submission.Status.READY)
    client.force_login(lead)
    client.post(reverse("ref_check", args=[s.pk]))
    page = client.get(s.get_absolute_url()).content.decode()
    assert 'hx-trigger="every 2s"' in page  # the job panel polls for it
    assert "Checks are running" not in page
