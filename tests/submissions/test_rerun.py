"""Running a submission's jobs again, from the page and the command line."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from submissions.assignments import assignment_apply, assignment_values
from submissions.intake.upload import submission_create
from submissions.jobs import queue
from submissions.jobs.engine import job_execute
from submissions.jobs.inline import jobs_run_inline
from submissions.jobs.rerun import RerunRefused, submission_rerun
from submissions.models import Candidate, Job, Submission
from tests.conftest import SMALL_REPO, ingest_inline, make_zip

CASSETTE = {"slug": "rerun-c", "title": "Rerun", "shape": "cassette"}


def _judged() -> Submission:
    """A cassette hand-in judged with no replay command (analysis only)."""
    values = assignment_values({**CASSETTE, "replay_command": ""})
    submission, _ = ingest_inline(dict(SMALL_REPO), values, candidate="Rerun")
    return submission


def _run_queued(submission: Submission) -> None:
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        jobs_run_inline(submission=submission)


@pytest.mark.django_db
def test_all_runs_analysis_again_which_queues_its_followers_again() -> None:
    submission = _judged()
    before = submission.jobs.count()
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        job = submission_rerun(submission=submission, what="all")
    assert job.kind == Job.Kind.ANALYSIS and job.params == {"rerun": True}
    submission.refresh_from_db()
    assert submission.status == Submission.Status.PROCESSING
    _run_queued(submission)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.READY
    assert submission.jobs.count() == before + 1
    assert submission.checks.filter(job=job).exists()  # the new run's results replaced the old


@pytest.mark.django_db
def test_a_rerun_analysis_queues_the_replay_again_once() -> None:
    values = assignment_values({**CASSETTE, "replay_command": "make test"})
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        assignment = assignment_apply(values=values)[0]
        submission = submission_create(
            upload=io.BytesIO(make_zip(SMALL_REPO)),
            filename="r.zip",
            candidate=Candidate.objects.create(name="R"),
            assignment=assignment,
        ).submission
        for kind in (Job.Kind.INTAKE, Job.Kind.ANALYSIS):
            job_execute(job_id=submission.jobs.get(kind=kind).pk)
        first_replay = submission.jobs.get(kind=Job.Kind.REPLAY)
        Job.objects.filter(pk=first_replay.pk).update(state=Job.State.ERROR, error="no sandbox")
        analysis = submission_rerun(submission=submission, what="all")
        job_execute(job_id=analysis.pk)
        job_execute(job_id=analysis.pk)  # a redelivery queues nothing more
    replays = submission.jobs.filter(kind=Job.Kind.REPLAY).order_by("pk")
    assert [j.state for j in replays] == [Job.State.ERROR, Job.State.QUEUED]


@pytest.mark.django_db
def test_a_rerun_is_refused_with_the_reason() -> None:
    submission = _judged()
    with pytest.raises(RerunRefused, match="no replay command"):
        submission_rerun(submission=submission, what="replay")
    with pytest.raises(RerunRefused, match="no trace rows"):
        submission_rerun(submission=submission, what="trace")
    with pytest.raises(RerunRefused, match="no service start command"):
        submission_rerun(submission=submission, what="probe")
    with pytest.raises(RerunRefused, match="unknown job kind"):
        submission_rerun(submission=submission, what="everything")
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        submission_rerun(submission=submission, what="all")
        with pytest.raises(RerunRefused, match="1 job still queued or running"):
            submission_rerun(submission=submission, what="all")


@pytest.mark.django_db
def test_a_rejected_archive_is_not_run_again(assignment, candidate) -> None:
    result = submission_create(
        upload=io.BytesIO(b"not an archive"),
        filename="x.zip",
        candidate=candidate,
        assignment=assignment,
    )
    assert result.submission.status == Submission.Status.REJECTED
    with pytest.raises(RerunRefused, match="rejected at upload"):
        submission_rerun(submission=result.submission, what="all")


@pytest.mark.django_db
def test_the_command_reruns_inline_and_refuses_with_a_reason(capsys) -> None:
    submission = _judged()
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("rerun", str(submission.pk), "--inline")
    out = capsys.readouterr()
    assert out.out.strip().splitlines()[-1] == str(submission.pk)
    assert "analysis job" in out.err and ": passed" in out.err
    with pytest.raises(CommandError, match="no replay command"):
        call_command("rerun", str(submission.pk), "--kind", "replay")
    with pytest.raises(CommandError, match="no submission with id 999999"):
        call_command("rerun", "999999")


@pytest.mark.django_db
def test_the_page_runs_again_by_post_only_and_only_for_who_may_see_it(
    client, reviewer, reviewer2
) -> None:
    submission = _judged()
    submission.reviewers.add(reviewer)
    url = f"/submissions/{submission.pk}/rerun/"
    client.force_login(reviewer)
    page = client.get(submission.get_absolute_url()).content.decode()
    assert f'action="{url}"' in page
    assert client.get(url).status_code == 405  # a GET never writes
    jobs = submission.jobs.count()
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        response = client.post(url, {"what": "replay"}, follow=True)
    assert "Not run again: the assignment has no replay command" in response.content.decode()
    assert submission.jobs.count() == jobs
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        response = client.post(url, {"what": "all"}, follow=True)
    assert "Analysis queued again." in response.content.decode()
    assert submission.jobs.count() == jobs + 1
    client.force_login(reviewer2)
    assert client.post(url, {"what": "all"}).status_code == 404


@pytest.mark.sandbox
@pytest.mark.django_db
def test_a_hand_in_judged_before_the_sandbox_existed_is_judged_after_a_rerun(settings) -> None:
    """The issue's case: the demo replayed before `make sandbox-runtime`, then run again."""
    import json

    files = {
        "run.py": (
            "import json, pathlib\n"
            "text = json.loads(pathlib.Path('fixtures/a.json').read_text())['text']\n"
            "pathlib.Path('out').mkdir(exist_ok=True)\n"
            "pathlib.Path('out/answers.json').write_text(json.dumps([text]))\n"
        ),
        "fixtures/a.json": json.dumps({"text": "alpha"}),
    }
    values = assignment_values(
        {
            "slug": "rerun-rt",
            "title": "RT",
            "shape": "run-twice",
            "replay_command": "python3 run.py",
            "recordings": ["fixtures/*.json"],
        }
    )
    real = settings.SANDBOX_BWRAP
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    submission, checks = ingest_inline(files, values, candidate="Before the sandbox")
    assert checks["replay.offline_pass"].status == "error"
    settings.SANDBOX_BWRAP = real
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        submission_rerun(submission=submission, what="replay")
    _run_queued(submission)
    checks = {c.check_id: c for c in submission.checks.all()}
    assert checks["replay.offline_pass"].status == "pass", checks["replay.offline_pass"].summary
    assert checks["replay.byte_identical"].status == "pass"
    replays = submission.jobs.filter(kind=Job.Kind.REPLAY).order_by("pk")
    assert [j.state for j in replays] == [Job.State.ERROR, Job.State.PASSED]
