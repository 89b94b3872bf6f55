"""The lead's similarity page: pairs ranked from the cohort checks, and one pair's why."""

from __future__ import annotations

from unittest import mock

import pytest
from django.urls import reverse

from submissions.assignments import assignment_values
from tests.conftest import ingest_inline
from tests.paths import ROOT
from tests.submissions.test_code_similarity import ADA, BO_COPY, BO_OWN

WILD = ROOT / "tests" / "fixtures" / "wild"
CHAT_HAR = (WILD / "polly" / "ragged-openai-chat-tool-calling.har").read_text()

pytestmark = pytest.mark.django_db


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


@pytest.fixture
def cohort():
    """Ada wrote the store; Bo re-typed it; Cy copied Ada's recording; Di wrote her own."""
    values = _values()
    ada, _ = ingest_inline(
        {"store.py": ADA, "cassettes/chat.har": CHAT_HAR}, values, candidate="Ada"
    )
    bo, _ = ingest_inline({"src/fixtures.py": BO_COPY}, values, candidate="<b>Bo</b>")
    cy, _ = ingest_inline(
        {"cassettes/renamed.har": CHAT_HAR, "x.py": "pass\n"}, values, candidate="Cy"
    )
    di, _ = ingest_inline({"recorder.py": BO_OWN}, values, candidate="<b>Di</b>")
    return {"ada": ada, "bo": bo, "cy": cy, "di": di}


def _page(client, lead, **query):
    client.force_login(lead)
    return client.get(reverse("similarity", args=["cohort"]), query)


def test_pairs_are_ranked_shared_ids_first_then_code(client, lead, cohort) -> None:
    response = _page(client, lead)
    assert response.status_code == 200
    pairs = [
        (p.left.candidate.name, p.right.candidate.name, p.kind) for p in response.context["pairs"]
    ]
    assert pairs == [("Ada", "Cy", "ids"), ("Ada", "<b>Bo</b>", "code")]
    html = response.content.decode()
    assert "&lt;b&gt;Bo&lt;/b&gt;" in html and "<b>Bo</b>" not in html  # escaped
    assert "&lt;b&gt;Di&lt;/b&gt;" not in html  # Di shares nothing: not listed
    code = response.context["pairs"][1]
    assert code.share > 0.5
    assert code.file_pairs()[0].path == "store.py"
    assert code.file_pairs()[0].other_path == "src/fixtures.py"


def test_filters_narrow_the_pairs(client, lead, cohort) -> None:
    kinds = [p.kind for p in _page(client, lead, kind="code").context["pairs"]]
    assert kinds == ["code"]
    assert _page(client, lead, min="100", kind="code").context["pairs"] == []
    bo = cohort["bo"].pk
    names = [
        {p.left.candidate.name, p.right.candidate.name}
        for p in _page(client, lead, candidate=str(bo)).context["pairs"]
    ]
    assert names == [{"Ada", "<b>Bo</b>"}]
    assert _page(client, lead, min="bogus").status_code == 200


def test_a_pairs_why_shows_the_matching_spans_on_both_sides(client, lead, cohort) -> None:
    ada, bo = cohort["ada"], cohort["bo"]
    response = _page(client, lead, pair=f"{ada.pk}-{bo.pk}")
    opened = response.context["opened"]
    [file] = opened["files"]
    assert file["spans"], "the re-typed functions match somewhere"
    ada_lines, bo_lines = len(ADA.splitlines()), len(BO_COPY.splitlines())
    for span in file["spans"]:
        assert 1 <= span.left[0] <= span.left[1] <= ada_lines
        assert 1 <= span.right[0] <= span.right[1] <= bo_lines
    html = response.content.decode()
    first = file["spans"][0]
    viewer = reverse("submission_file", args=[bo.pk])
    assert f"{viewer}?path=src/fixtures.py&amp;line={first.right[0]}#L{first.right[0]}" in html


def test_a_pairs_why_names_the_shared_ids_and_both_paths(client, lead, cohort) -> None:
    ada, cy = cohort["ada"], cohort["cy"]
    opened = _page(client, lead, pair=f"{ada.pk}-{cy.pk}").context["opened"]
    paths = {(left, right) for _, left, right in opened["ids"]}
    assert paths == {("cassettes/chat.har", "cassettes/renamed.har")}
    assert any(value.startswith("chatcmpl-") for value, _, _ in opened["ids"])


def test_starter_code_listed_later_drops_the_code_pair(client, lead, cohort) -> None:
    from submissions.assignments import assignment_apply

    assignment_apply(values=_values(starter_files=[{"name": "store.py", "text": ADA}]))
    kinds = [p.kind for p in _page(client, lead).context["pairs"]]
    assert kinds == ["ids"]


def test_only_hiring_leads_see_it(client, reviewer, cohort) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("similarity", args=["cohort"])).status_code == 404
    client.logout()
    assert client.get(reverse("similarity", args=["cohort"])).status_code == 302


def test_an_empty_cohort_says_so(client, lead, assignment) -> None:
    client.force_login(lead)
    response = client.get(reverse("similarity", args=[assignment.slug]))
    assert b"No two hand-ins of this assignment share" in response.content


def test_the_comparison_links_each_flagged_candidate_to_its_pairs(client, lead, cohort) -> None:
    client.force_login(lead)
    html = client.get(reverse("comparison", args=["cohort"])).content.decode()
    base = reverse("similarity", args=["cohort"])
    for name in ("ada", "bo", "cy"):
        assert f'{base}?candidate={cohort[name].pk}"' in html
    assert f'{base}?candidate={cohort["di"].pk}"' not in html  # Di shares nothing


def test_a_copied_recording_shows_the_shared_opening_prompt(client, lead, cohort) -> None:
    ada, cy, bo = cohort["ada"], cohort["cy"], cohort["bo"]
    opened = _page(client, lead, pair=f"{ada.pk}-{cy.pk}").context["opened"]
    assert opened["prompt"]
    assert opened["prompt"] == " ".join(opened["prompt"].split())  # whitespace-normalised
    # Bo has no conversation: nothing shared to show beside the code.
    opened = _page(client, lead, pair=f"{ada.pk}-{bo.pk}").context["opened"]
    assert opened["prompt"] == "" and opened["tools"] == []


@pytest.mark.django_db
def test_tool_call_sequences_count_from_three_calls_in_the_same_order(cohort) -> None:
    from reviewer.cohort import similarity

    ada, cy = cohort["ada"], cohort["cy"]
    calls = ["search", "lookup", "create_order"]
    with mock.patch.object(similarity, "_tool_sequence", side_effect=[calls, calls]):
        assert similarity.shared_tool_sequence(ada, cy) == calls
    with mock.patch.object(similarity, "_tool_sequence", side_effect=[calls, calls[::-1]]):
        assert similarity.shared_tool_sequence(ada, cy) == []
    with mock.patch.object(similarity, "_tool_sequence", side_effect=[calls[:2], calls[:2]]):
        assert similarity.shared_tool_sequence(ada, cy) == []
    assert similarity._tool_sequence(ada) == similarity._tool_sequence(cy)  # the same file


def test_the_top_file_pairs_passages_show_both_sides_text(client, lead, cohort) -> None:
    ada, bo = cohort["ada"], cohort["bo"]
    response = _page(client, lead, pair=f"{ada.pk}-{bo.pk}")
    [file] = response.context["opened"]["files"]
    span = file["spans"][0]
    ada_lines, bo_lines = ADA.splitlines(), BO_COPY.splitlines()
    assert span.left_text[0] == (span.left[0], ada_lines[span.left[0] - 1])
    assert span.right_text[0] == (span.right[0], bo_lines[span.right[0] - 1])
    html = response.content.decode()
    assert 'class="span-pair"' in html
