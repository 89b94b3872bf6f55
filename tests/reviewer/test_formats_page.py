"""The formats page and the README's table: every family the readers know, in step."""

from __future__ import annotations

from django.urls import reverse

from cassettes_app.formats import FORMATS
from cassettes_app.formats.families import FAMILIES, markdown_table
from tests.paths import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild"
# Wild folders that show a stream family inside VCR cassettes (the page's streams table).
STREAM_FOLDERS = {
    "bedrock-eventstream", "cohere-stream", "gemini-stream", "mistral-stream", "ollama-ndjson",
}  # fmt: skip


def test_every_reader_has_a_family_and_every_family_a_reader() -> None:
    readers = {module.NAME for module in FORMATS}
    assert {family.reader for family in FAMILIES} == readers


def test_every_family_with_wild_files_has_them_and_every_wild_folder_a_family() -> None:
    folders = {p.name for p in WILD.iterdir() if p.is_dir()}
    claimed = {folder for family in FAMILIES for folder in family.folders}
    assert claimed <= folders
    assert all(any((WILD / f).iterdir()) for f in claimed)
    assert folders == claimed | STREAM_FOLDERS


def test_the_readme_table_is_the_catalogs() -> None:
    assert markdown_table() in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_formats_page_lists_every_family_without_login(client, db) -> None:
    response = client.get(reverse("formats"))
    assert response.status_code == 200
    page = response.content.decode()
    for family in FAMILIES:
        assert f"<code>{family.reader}</code>" in page
    assert "&quot;resourceSpans&quot;" in page  # examples are escaped, not markup
    assert "AWS event stream" in page


def test_the_formats_page_never_writes(client, db, django_assert_num_queries) -> None:
    with django_assert_num_queries(0):
        assert client.get(reverse("formats")).status_code == 200
    assert client.post(reverse("formats")).status_code == 405


def test_the_upload_form_links_to_the_formats(client, reviewer, assignment) -> None:
    client.force_login(reviewer)
    page = client.get(assignment.get_absolute_url()).content.decode()
    assert f'href="{reverse("formats")}"' in page
