"""Issue 29: the spend caps hold when two spot checks run at once on two real worker processes.

Two Celery workers (one prefork child each) take one spot-check job each, against one model
server on loopback that answers slowly enough for their calls to interleave. Together they
ask for more calls than the assignment's month cap allows: the calls the model server saw
and the ledger's rows never pass it. On SQLite with the embedded broker by default; on
PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set (as CI runs the slow tests).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from submissions.checks.spot_check import spot_check_create
from submissions.models import Job, SpotCheck, SpotSpend
from submissions.net.endpoints import parse_endpoints
from tests.stubs import chat_model
from tests.stubs.chat_model import ChatModel
from tests.submissions.test_spot_job import KEY, ORDER, _handin

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MONTH_CALLS = 5
REPEATS = 4  # each check asks 4 times: 8 calls wanted, 5 allowed


def test_two_workers_spot_checking_at_once_stop_at_the_month_cap(
    start_worker, settings, monkeypatch
) -> None:
    served = ChatModel()
    served.delay = 0.3  # both checks are mid-way when the cap is reached
    try:
        endpoint = {
            "name": "team", "base_url": served.url, "api": "openai-chat",
            "key_env": "SPOT_WORKER_KEY",
            "caps": {"check_calls": REPEATS, "month_calls": MONTH_CALLS},
        }  # fmt: skip
        # The workers read these from their environment, as a deployment's would.
        monkeypatch.setenv("SPOT_CHECK_ENDPOINTS", json.dumps([endpoint]))
        monkeypatch.setenv("OUTBOUND_ALLOW", "127.0.0.1")
        monkeypatch.setenv("SPOT_WORKER_KEY", KEY)
        settings.SPOT_CHECK_ENDPOINTS = parse_endpoints(json.dumps([endpoint]))
        settings.OUTBOUND_ALLOW = ["127.0.0.1"]
        one = _handin((ORDER, chat_model.answer(ORDER)), slug="race", candidate="One")
        two = _handin((ORDER, chat_model.answer(ORDER)), slug="race", candidate="Two")
        broker = "redis" if os.environ.get("REDIS_URL") else "filesystem"
        workers = [start_worker(broker), start_worker(broker)]
        spots = [
            spot_check_create(
                submission=s, requested_by=None, endpoint="team", sample=1, repeats=REPEATS
            )
            for s in (one, two)
        ]
        jobs = Job.objects.filter(pk__in=[s.job_id for s in spots])
        deadline = time.monotonic() + 60
        while jobs.exclude(state__in=Job.FINAL_STATES).exists() and time.monotonic() < deadline:
            assert all(w.poll() is None for w in workers), "a worker died"
            time.sleep(0.2)
        logs = "\n".join(Path(w.log_path).read_text()[-2000:] for w in workers)  # type: ignore[attr-defined]
        ended = list(jobs.order_by("started_at"))
        assert all(j.is_final for j in ended), logs
        # Two worker processes, at the same time: the later one started before the first ended.
        assert len({j.runner for j in ended}) == 2, [j.runner for j in ended]
        assert ended[1].started_at < ended[0].finished_at
        calls = sum(SpotSpend.objects.values_list("calls", flat=True))
        assert calls == MONTH_CALLS and len(served.seen) == MONTH_CALLS, logs
        assert served.seen == [f"Bearer {KEY}"] * MONTH_CALLS
        made = sorted(len(s.results[0]["tries"]) for s in SpotCheck.objects.all())
        assert sum(made) == MONTH_CALLS and max(made) <= REPEATS
        refused = [s for s in SpotCheck.objects.all() if "cap month_calls" in s.summary]
        assert refused, [s.summary for s in SpotCheck.objects.all()]
        for text in (logs, *(j.log for j in ended)):
            assert KEY not in text
    finally:
        served.close()
