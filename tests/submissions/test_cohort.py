"""The cohort: recorded response ids stored with the analysis, compared across hand-ins."""

from __future__ import annotations

import json

import pytest

from cassettes_app.checks.catalog import RECORDINGS_UNIQUE
from submissions.assignments import assignment_values
from submissions.models import ResponseId, Submission
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


def _reformatted(har: str) -> str:
    """The same recording as another candidate would hand it in: re-indented, keys sorted."""
    return json.dumps(json.loads(har), indent=4, sort_keys=True)


@pytest.mark.django_db
def test_a_copied_recording_fails_both_hand_ins_renamed_and_reformatted() -> None:
    first, checks = ingest_inline({"cassettes/chat.har": CHAT_HAR}, _values(), candidate="Ada")
    assert checks[RECORDINGS_UNIQUE].status == "pass"
    copy = {"cassettes/mine/tool_call.json": _reformatted(CHAT_HAR)}
    second, checks = ingest_inline(copy, _values(), candidate="Bo")
    result = checks[RECORDINGS_UNIQUE]
    assert result.status == "fail", result.summary
    assert "2 recorded response ids" in result.summary
    assert "Ada" not in result.summary
    shared = {e["id"]: e for e in result.evidence}
    assert set(shared) == CHAT_IDS
    item = shared["chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g"]
    assert item["path"] == "cassettes/mine/tool_call.json"
    assert item["other"] == {"submission": first.pk, "path": "cassettes/chat.har"}
    assert "Ada" not in item["message"]
    # Both ways: the first hand-in, judged before the copy existed, now fails naming it.
    theirs = first.checks.get(check_id=RECORDINGS_UNIQUE)
    assert theirs.status == "fail"
    assert {e["other"]["submission"] for e in theirs.evidence} == {second.pk}
    assert {e["other"]["path"] for e in theirs.evidence} == {"cassettes/mine/tool_call.json"}


@pytest.mark.django_db
def test_independent_hand_ins_pass() -> None:
    _, first = ingest_inline({"cassettes/chat.har": CHAT_HAR}, _values(), candidate="Ada")
    _, second = ingest_inline({"cassettes/a.yaml": ANTHROPIC_YAML}, _values(), candidate="Bo")
    assert first[RECORDINGS_UNIQUE].status == "pass"
    assert second[RECORDINGS_UNIQUE].status == "pass"
    assert "2 recorded response ids" in second[RECORDINGS_UNIQUE].summary


@pytest.mark.django_db
def test_a_hand_in_whose_recordings_carry_no_ids_skips_with_the_reason() -> None:
    repo = {"cassettes/k.json": '{"key": "k", "request": {}, "response": {"text": "hi"}}'}
    _, checks = ingest_inline(repo, _values(), candidate="Ada")
    result = checks[RECORDINGS_UNIQUE]
    assert result.status == "skip"
    assert "no recording of this hand-in carries a response id" in result.summary


@pytest.mark.django_db
def test_an_assignment_without_recording_globs_skips() -> None:
    _, checks = ingest_inline({"README.md": "hi"}, _values(recordings=[]), candidate="Ada")
    assert checks[RECORDINGS_UNIQUE].status == "skip"
    assert "no recordings to compare" in checks[RECORDINGS_UNIQUE].summary


@pytest.mark.django_db
def test_the_same_candidates_earlier_upload_is_not_another_candidate() -> None:
    ingest_inline({"cassettes/chat.har": CHAT_HAR}, _values(), candidate="Ada")
    again = {"cassettes/chat.har": CHAT_HAR, "README.md": "second try"}
    _, checks = ingest_inline(again, _values(), candidate="Ada")
    assert checks[RECORDINGS_UNIQUE].status == "pass"


@pytest.mark.django_db
def test_another_assignment_and_a_superseded_upload_are_not_the_cohort() -> None:
    ingest_inline({"cassettes/chat.har": CHAT_HAR}, _values(slug="other-team"), candidate="Cy")
    ingest_inline({"cassettes/chat.har": CHAT_HAR}, _values(), candidate="Ada")
    _, checks = ingest_inline({"cassettes/b.har": CHAT_HAR}, _values(), candidate="Bo")
    assert checks[RECORDINGS_UNIQUE].status == "fail"
    # Ada uploads again without the copied recording: her latest hand-in is the one
    # compared, and Bo's outcome, which named her first upload, is judged again.
    _, checks = ingest_inline({"cassettes/a.yaml": ANTHROPIC_YAML}, _values(), candidate="Ada")
    assert checks[RECORDINGS_UNIQUE].status == "pass"
    bo = Submission.objects.get(candidate__name="Bo")
    assert bo.checks.get(check_id=RECORDINGS_UNIQUE).status == "pass"
