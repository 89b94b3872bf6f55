"""The cohort: recorded response ids stored with the analysis, compared across hand-ins."""

from __future__ import annotations

import json

import pytest

from submissions.assignments import assignment_values
from submissions.models import ResponseId
from tests.conftest import ingest_inline
from tests.paths import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild"
CHAT_HAR = (WILD / "polly" / "ragged-openai-chat-tool-calling.har").read_text()
ANTHROPIC_YAML = (WILD / "vcrpy-httpx" / "mirascope-anthropic-call-with-params.yaml").read_text()
CHAT_IDS = {"chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g", "req_3e7342c31f21a8cd10e823a39960d38d"}


def _values(**extra: object) -> dict:
    return assignment_values(
        {
            "slug": "cohort",
            "title": "Cohort",
            "replay_command": "",
            "recordings": ["cassettes/**/*"],
            **extra,
        }
    )


@pytest.mark.django_db
def test_the_analysis_stores_each_recorded_response_id_once_with_its_path() -> None:
    repo = {"cassettes/chat.har": CHAT_HAR, "cassettes/again/chat.har": CHAT_HAR}
    submission, _ = ingest_inline(repo, _values(), candidate="Ada")
    rows = list(submission.response_ids.values_list("value", "path", "kind"))
    assert {value for value, _, _ in rows} == CHAT_IDS
    # Each value once, at the first recording that holds it.
    assert {path for _, path, _ in rows} == {"cassettes/again/chat.har"}
    assert ("chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g", "body.id") in {(v, k) for v, _, k in rows}


@pytest.mark.django_db
def test_a_hostile_tree_keeps_a_bounded_number_of_ids(monkeypatch) -> None:
    # Ids in every field of 2,000 responses (4,000 countable ids) against a cap lowered to
    # 100, so the fast suite stays fast: the cap holds whatever the tree holds (20,000 ids in
    # one body: tests/cassettes_app/test_response_ids.py).
    monkeypatch.setattr(ResponseId, "MAX_PER_SUBMISSION", 100)
    entries = [
        {
            "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions"},
            "response": {
                "status": 200,
                "headers": {"x-request-id": [f"req_{n:08d}ab12cd34ef56"]},
                "body": {
                    "id": f"chatcmpl-{n:08d}Xy9Zw8Vu7",
                    **{f"f{i}": f"chatcmpl-{n:08d}{i:04d}Q" for i in range(5)},
                },
            },
        }
        for n in range(2_000)
    ]
    repo = {f"cassettes/big{k}.json": json.dumps({"interactions": entries[k::4]}) for k in range(4)}
    submission, _ = ingest_inline(repo, _values(), candidate="Ada")
    assert ResponseId.objects.filter(submission=submission).count() == 100
