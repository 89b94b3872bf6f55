"""cohort.recordings_unique on the pages: blind to a hand-in the viewer may not see."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from reviewer.cohort.committee_report import submission_report_html
from submissions.assignments import assignment_values
from tests.conftest import ingest_inline
from tests.paths import ROOT

CHAT_HAR = (ROOT / "tests/fixtures/wild/polly/ragged-openai-chat-tool-calling.har").read_text()
THEIR_PATH = "cassettes/ada/chat.har"


def _values() -> dict:
    return assignment_values(
        {
            "slug": "cohort",
            "title": "Cohort",
            "replay_command": "",
            "recordings": ["cassettes/**/*"],
        }
    )


@pytest.fixture
def copied(db):
    """Ada's hand-in and Bo's copy of its recording (renamed, re-indented)."""
    ada, _ = ingest_inline({THEIR_PATH: CHAT_HAR}, _values(), candidate="Ada Lovelace")
    copy = json.dumps(json.loads(CHAT_HAR), indent=1)
    bo, _ = ingest_inline({"cassettes/bo.json": copy}, _values(), candidate="Bo Copier")
    return ada, bo


def test_a_lead_sees_the_other_hand_in_named_and_linked(client, lead, copied) -> None:
    ada, bo = copied
    client.force_login(lead)
    page = client.get(reverse("submission", args=[bo.pk])).content.decode()
    assert "cohort.recordings_unique" in page
    assert "chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g" in page
    assert "Ada Lovelace" in page
    assert THEIR_PATH in page
    assert reverse("submission", args=[ada.pk]) in page


def test_a_reviewer_who_may_not_see_the_other_hand_in_reads_no_name_nor_path(
    client, lead, reviewer, copied
) -> None:
    _, bo = copied
    bo.reviewers.add(reviewer)
    # The lead's page first: its cached evidence must not be served to the reviewer.
    client.force_login(lead)
    assert "Ada Lovelace" in client.get(reverse("submission", args=[bo.pk])).content.decode()
    client.force_login(reviewer)
    page = client.get(reverse("submission", args=[bo.pk])).content.decode()
    assert "chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g" in page
    assert "another candidate" in page
    assert "Ada Lovelace" not in page
    assert THEIR_PATH not in page


def test_a_reviewer_of_both_hand_ins_sees_both(client, reviewer, copied) -> None:
    ada, bo = copied
    ada.reviewers.add(reviewer)
    bo.reviewers.add(reviewer)
    client.force_login(reviewer)
    page = client.get(reverse("submission", args=[bo.pk])).content.decode()
    assert "Ada Lovelace" in page
    assert THEIR_PATH in page


def test_the_page_shows_the_outcome_another_hand_in_rewrote(client, lead) -> None:
    ada, _ = ingest_inline({THEIR_PATH: CHAT_HAR}, _values(), candidate="Ada Lovelace")
    client.force_login(lead)
    url = reverse("submission", args=[ada.pk])
    assert "Bo Copier" not in client.get(url).content.decode()  # cached, all jobs ended
    ingest_inline({"cassettes/bo.har": CHAT_HAR}, _values(), candidate="Bo Copier")
    page = client.get(url).content.decode()
    assert "Bo Copier" in page
    assert "cassettes/bo.har" in page


def test_a_shared_report_never_names_the_other_side(copied) -> None:
    ada, bo = copied
    html = submission_report_html(bo)
    assert "chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g" in html
    assert "Ada Lovelace" not in html
    assert THEIR_PATH not in html
    theirs = submission_report_html(ada)
    assert "Bo Copier" not in theirs
    assert "cassettes/bo.json" not in theirs
