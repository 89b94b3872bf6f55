"""*Check again* runs as a `refcheck` job in a real worker process against a git server on
loopback: a ref moved after intake is reported on the page and in the report JSON, and what
was judged stays."""

from __future__ import annotations

import io
import json
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse

from submissions.intake.repository import submission_from_repository
from submissions.jobs import queue
from submissions.models import Job
from tests.conftest import SMALL_REPO
from tests.git_factories import add_commit, make_repo, serve_repository
from tests.workers import wait_final

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TOKEN = "ghp_RefcheckWorkerToken0123456789"


def test_check_again_in_a_real_worker_reports_a_moved_ref_and_keeps_the_judged_commit(
    start_worker, assignment, candidate, lead, client, settings, monkeypatch
) -> None:
    # The worker is another process: it reads the allowlist from its environment.
    monkeypatch.setenv("OUTBOUND_ALLOW", "127.0.0.0/8")
    settings.OUTBOUND_ALLOW = ["127.0.0.0/8"]
    repo = make_repo([{"v.txt": "one"}, {**SMALL_REPO, "v.txt": "two"}])
    with serve_repository(repo, token=TOKEN) as url:
        with mock.patch.object(queue, "job_enqueue", return_value=True):  # intake not needed
            s = submission_from_repository(
                url=url, candidate=candidate, assignment=assignment, token=TOKEN
            ).submission
        s.jobs.update(state=Job.State.PASSED)
        judged = s.source_commit
        later = add_commit(
            repo, {"v.txt": "late"}, parents=[judged.encode()], message="late fix"
        ).decode()
        worker = start_worker("filesystem")
        client.force_login(lead)
        # The page's button: the job is queued, the worker fetches with the kept token.
        response = client.post(reverse("ref_check", args=[s.pk]))
        assert response.status_code == 302
        job = wait_final(s.jobs.get(kind=Job.Kind.REFCHECK), worker)
    assert job.state == Job.State.PASSED, job.error
    s.refresh_from_db()
    assert s.ref_check_state == "moved" and s.ref_check_commit == later
    assert s.source_commit == judged  # what was judged stays
    page = client.get(s.get_absolute_url()).content.decode()
    assert "Moved" in page or "moved" in page
    assert later[:10] in page and "late fix" in page and judged[:10] in page
    out = io.StringIO()
    call_command("report", s.pk, stdout=out)
    source = json.loads(out.getvalue())["source"]
    assert source["commit"] == judged
    assert source["ref_check"]["state"] == "moved" and source["ref_check"]["commit"] == later
    assert TOKEN not in page + out.getvalue() + Path(worker.log_path).read_text() + job.log
