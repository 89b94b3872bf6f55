"""A recording against its re-recorded version: pairing, turns, the job and the pages."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from unittest import mock

import pytest
from django.urls import reverse

from cassettes_app.formats import parse_file
from cassettes_app.keys import recompute_key
from cassettes_app.pairing import MAX_TURNS, Pairing, file_turns, pair_files
from submissions.assignments import assignment_values
from submissions.jobs import queue
from submissions.jobs.inline import jobs_run_inline
from submissions.models import Job, Rerecord
from tests.archive_factories import zip_bytes
from tests.conftest import ingest_inline, make_zip

VOLATILE = ("user", "request_id", "id", "created")
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3


def cassette(question: str, answer: str, *, i: int = 0) -> str:
    """A cassette-task file (OpenAI chat) whose key is right."""
    req = {
        "model": "gpt-4o-mini-2024-07-18",
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "request_id": f"r-{i}",
    }
    resp = {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
    }
    return json.dumps(
        {
            "key": recompute_key(req, VOLATILE),
            "request": req,
            "response": resp,
            "recorded_at": "2026-11-20T09:00:00Z",
            "model": "gpt-4o-mini-2024-07-18",
        }
    )


def key_of(text: str) -> str:
    return json.loads(text)["key"]


# --------------------------------------------------------------------------- pairing


def test_pairs_by_key_even_when_the_file_was_renamed() -> None:
    pairs = pair_files([("cassettes/a.json", "k1")], [("recorded/other-name.json", "k1")])
    assert pairs == [Pairing("k1", "cassettes/a.json", "recorded/other-name.json", "key")]


def test_pairs_by_path_when_a_format_has_no_key() -> None:
    pairs = pair_files([("cassettes/t.yaml", "")], [("cassettes/t.yaml", "")])
    assert pairs == [Pairing("", "cassettes/t.yaml", "cassettes/t.yaml", "path")]


def test_unpaired_files_stay_one_sided_on_either_side() -> None:
    pairs = pair_files([("a.json", "k1"), ("b.json", "k2")], [("a.json", "k1"), ("c.json", "k3")])
    assert Pairing("k2", "b.json", None, "") in pairs
    assert Pairing("k3", None, "c.json", "") in pairs
    assert sum(1 for p in pairs if p.matched_by) == 1


def test_a_duplicate_key_pairs_once_and_the_copy_falls_back_to_its_path() -> None:
    pairs = pair_files([("a.json", "k"), ("dup.json", "k")], [("x.json", "k")])
    assert pairs[0] == Pairing("k", "a.json", "x.json", "key")
    assert pairs[1] == Pairing("k", "dup.json", None, "")


# --------------------------------------------------------------------------- turns


VCR = """\
interactions:
- request:
    body: '{"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is order 7?"}]}'
    headers: {Content-Type: [application/json]}
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: '{"model": "gpt-4o", "choices": [{"message": {"role": "assistant", "content":
        "Let me look."}}]}'}
    headers: {Content-Type: [application/json]}
    status: {code: 200, message: OK}
- request:
    body: '{"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is order 7?"},
      {"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "Thanks"}]}'
    headers: {Content-Type: [application/json]}
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: '{"model": "gpt-4o", "choices": [{"message": {"role": "assistant", "content":
        "It ships today."}}]}'}
    headers: {Content-Type: [application/json]}
    status: {code: 200, message: OK}
version: 1
"""


def test_a_multi_turn_cassette_shows_only_what_each_request_added() -> None:
    turns, total = file_turns([parse_file("cassettes/chat.yaml", VCR.encode())])
    assert total == 2
    assert [m["text"] for m in turns[0]["new_messages"]] == ["Where is order 7?"]
    assert [m["text"] for m in turns[1]["new_messages"]] == ["Thanks"]
    assert turns[1]["response"]["text"] == "It ships today."
    assert turns[1]["model"] == "gpt-4o"


def test_turn_texts_never_carry_a_secret_in_full() -> None:
    data = cassette(f"my key is {SECRET}", f"noted: {SECRET}").encode()
    turns, _ = file_turns([parse_file("cassettes/x.json", data)])
    shown = json.dumps(turns)
    assert SECRET not in shown
    assert "68 chars" in shown  # the redacted form (prefix, length, hash) is what is shown


def test_an_unknown_provider_is_shown_raw_not_dropped() -> None:
    data = json.dumps({"text": "The answer is 42."}).encode()
    turns, total = file_turns([parse_file("fixtures/q1.json", data)])
    assert total == len(turns) >= 1
    assert "The answer is 42." in json.dumps(turns)


def test_turns_are_capped_per_side_but_counted() -> None:
    interaction = VCR.split("- request:")[1]
    many = "interactions:\n" + ("- request:" + interaction) * (MAX_TURNS + 5) + "version: 1\n"
    many = many.replace("version: 1\n- request:", "- request:")
    turns, total = file_turns([parse_file("cassettes/long.yaml", many.encode())])
    assert len(turns) == MAX_TURNS
    assert total > MAX_TURNS


# --------------------------------------------------------------------------- job and pages

ORIGINAL = {
    "Makefile": "record:\n\ttrue\ntest:\n\ttrue\ndemo:\n\ttrue\n",
    "cassettes/same.json": cassette("Is order 1 late?", "No, it is on time.", i=1),
    "cassettes/drift.json": cassette("Summarise ticket 2", "The customer wants a refund.", i=2),
    "cassettes/gone.json": cassette("Ticket 3?", "Closed.", i=3),
}
DRIFTED = cassette(
    "Summarise ticket 2", "The customer wants a <script>alert(1)</script> refund now.", i=2
)
RERECORDED = {
    "Makefile": ORIGINAL["Makefile"],
    "cassettes/same.json": ORIGINAL["cassettes/same.json"],
    # Renamed in the re-record: pairs by key, not by path.
    f"cassettes/{key_of(DRIFTED)}.json": DRIFTED,
    "cassettes/new.json": cassette("Ticket 4?", "Opened.", i=4),
}


@pytest.fixture
def submission(db: None, reviewer):
    values = assignment_values({"slug": "rr", "title": "Re-record", "replay_command": ""})
    sub, _ = ingest_inline(ORIGINAL, values)
    sub.reviewers.add(reviewer)
    return sub


def _upload(client, submission, data: bytes, name: str = "rerecord.zip"):
    upload = io.BytesIO(data)
    upload.name = name
    url = reverse("rerecord_upload", args=[submission.pk])
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        response = client.post(url, {"archive": upload})
        jobs_run_inline(submission=submission)
    return response


def test_a_reviewer_uploads_a_rerecord_and_sees_what_drifted(client, reviewer, submission) -> None:
    client.force_login(reviewer)
    response = _upload(client, submission, make_zip(RERECORDED))
    rerecord = Rerecord.objects.get(submission=submission)
    assert response.status_code == 302 and response.url == rerecord.get_absolute_url()
    rerecord.refresh_from_db()
    assert rerecord.status == "ready"
    assert (rerecord.pair_count, rerecord.changed_count) == (2, 1)
    assert (rerecord.only_original, rerecord.only_rerecorded) == (1, 1)

    page = client.get(rerecord.get_absolute_url()).content.decode()
    assert "2 recordings paired" in page and "1 differ" in page
    assert "cassettes/drift.json" in page
    assert "cassettes/same.json" not in page  # only pairs that differ, unless asked
    assert "cassettes/same.json" in client.get(rerecord.get_absolute_url() + "?show=all").text

    drift = rerecord.pairs.get(original_path="cassettes/drift.json")
    assert drift.matched_by == "key" and drift.first_turn == 0
    page = client.get(f"{rerecord.get_absolute_url()}?pair={drift.pk}").content.decode()
    assert "first divergence" in page
    assert "<ins>" in page and "now." in page
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)" in page


def test_the_same_rerecord_twice_is_one(client, reviewer, submission) -> None:
    client.force_login(reviewer)
    data = make_zip(RERECORDED)
    _upload(client, submission, data)
    second = _upload(client, submission, data)
    assert second.status_code == 302
    assert Rerecord.objects.filter(submission=submission).count() == 1
    assert submission.jobs.filter(kind=Job.Kind.RERECORD).count() == 1


def test_a_hostile_rerecord_archive_is_refused_and_nothing_is_stored(
    client, reviewer, submission, settings
) -> None:
    client.force_login(reviewer)
    response = _upload(client, submission, zip_bytes([("../escape.json", b"{}")]))
    assert response.status_code == 400
    assert "rejected" in response.content.decode()
    assert not Rerecord.objects.exists()
    scratch = [p for p in Path(settings.WORK_DIR).iterdir() if p.name.startswith("rerecord-")]
    assert scratch == []  # the spooled upload and its trial unpack are gone


def test_an_empty_rerecord_upload_gets_a_form_error(client, reviewer, submission) -> None:
    client.force_login(reviewer)
    response = _upload(client, submission, b"")
    assert response.status_code == 400
    assert "empty" in response.content.decode()


def test_another_reviewer_cannot_see_or_upload(client, reviewer2, submission) -> None:
    client.force_login(reviewer2)
    assert _upload(client, submission, make_zip(RERECORDED)).status_code == 404
    assert not Rerecord.objects.exists()


def test_a_failed_comparison_says_why_on_the_page(client, reviewer, submission) -> None:
    client.force_login(reviewer)
    with mock.patch(
        "submissions.runs.rerecord.pair_files", side_effect=RuntimeError("disk on fire")
    ):
        _upload(client, submission, make_zip(RERECORDED))
    rerecord = Rerecord.objects.get()
    assert rerecord.status == "error" and "disk on fire" in rerecord.status_reason
    assert "disk on fire" in client.get(rerecord.get_absolute_url()).content.decode()
    # The submission's own data is untouched by a failed comparison.
    assert submission.recordings.count() == 3


def test_stored_conversation_turns_never_carry_a_secret_in_full(client, reviewer, db) -> None:
    """A key pasted into a prompt or a tool result is redacted in the Turn rows and the page."""
    repo = dict(ORIGINAL)
    repo["cassettes/leaky.json"] = cassette(f"use {SECRET} for the shop", f"ok, {SECRET}", i=9)
    values = assignment_values({"slug": "leak", "title": "Leak", "replay_command": ""})
    sub, _ = ingest_inline(repo, values)
    sub.reviewers.add(reviewer)
    stored = json.dumps([[t.new_messages, t.response] for t in sub.turns.all()])
    assert "for the shop" in stored  # the turn is there,
    assert SECRET not in stored  # but never the key in full
    client.force_login(reviewer)
    assert SECRET not in client.get(sub.get_absolute_url()).content.decode()


def test_the_cli_compares_and_lists_what_differs(submission, tmp_path) -> None:
    from django.core.management import call_command

    archive = tmp_path / "rerecord.zip"
    archive.write_bytes(make_zip(RERECORDED))
    out = io.StringIO()
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        call_command("rerecord", str(submission.pk), str(archive), "--inline", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == str(Rerecord.objects.get().pk)
    assert "2 paired, 1 differ" in lines[0]
    assert "differs: cassettes/drift.json (turn 0)" in lines


def test_the_cli_refuses_a_hostile_archive_with_the_reason(submission, tmp_path) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    archive = tmp_path / "evil.zip"
    archive.write_bytes(zip_bytes([("../escape.json", b"{}")]))
    with pytest.raises(CommandError, match="rejected"):
        call_command("rerecord", str(submission.pk), str(archive), "--inline")
    assert not Rerecord.objects.exists()


def test_a_rerecord_over_the_upload_limit_or_not_an_archive_is_refused(
    client, reviewer, submission, settings
) -> None:
    client.force_login(reviewer)
    settings.INTAKE_MAX_UPLOAD_BYTES = 1000
    big = _upload(client, submission, make_zip({"blob.bin": os.urandom(4000)}))
    assert big.status_code == 400 and "the limit is 1000 bytes" in big.content.decode()
    settings.INTAKE_MAX_UPLOAD_BYTES = 10**8
    junk = _upload(client, submission, b"this is not a zip or a tar" * 10)
    assert junk.status_code == 400 and "rejected" in junk.content.decode()
    assert not Rerecord.objects.exists()


def test_a_broken_rerecorded_file_pairs_by_path_and_shows_as_changed(
    client, reviewer, submission
) -> None:
    client.force_login(reviewer)
    broken = {**ORIGINAL, "cassettes/drift.json": '{"key": "x", "request": {'}
    _upload(client, submission, make_zip(broken))
    rerecord = Rerecord.objects.get()
    assert rerecord.status == "ready"
    pair = rerecord.pairs.get(original_path="cassettes/drift.json")
    assert pair.rerecorded_path == "cassettes/drift.json" and pair.changed
    assert (pair.original_turn_count, pair.rerecorded_turn_count) == (1, 0)
    page = client.get(f"{rerecord.get_absolute_url()}?pair={pair.pk}").content.decode()
    assert "1 turn recorded, 0 re-recorded" in page


@pytest.mark.parametrize("pairs", [3, 60])
def test_the_rerecord_page_query_count_does_not_grow_with_pairs(
    client, reviewer, submission, pairs, django_assert_max_num_queries
) -> None:
    from submissions.models import RerecordPair

    rerecord = Rerecord.objects.create(
        submission=submission, archive="a.zip", archive_sha256="f" * 64, status="ready"
    )
    RerecordPair.objects.bulk_create(
        [
            RerecordPair(
                rerecord=rerecord,
                original_path=f"cassettes/{i:03d}.json",
                rerecorded_path=f"cassettes/{i:03d}.json",
                matched_by="path",
                changed=True,
                first_turn=0,
                original_turns=[{"new_messages": [], "response": {"text": "a" * 2000}}],
                rerecorded_turns=[{"new_messages": [], "response": {"text": "b" * 2000}}],
            )
            for i in range(pairs)
        ]
    )
    client.force_login(reviewer)
    first = rerecord.pairs.order_by("pk").first()
    with django_assert_max_num_queries(12):
        page = client.get(rerecord.get_absolute_url(), {"pair": first.pk}).content.decode()
    assert "first divergence" in page
    assert page.count("<td><code>cassettes/") == 2 * min(pairs, 50)  # one page of pairs


def test_a_wait_that_runs_out_still_ends_on_the_rerecord_id(submission, tmp_path) -> None:
    """The last line of stdout is the re-record's id, as the command's help promises, even
    when --wait gives up; it used to print the submission's."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    archive = tmp_path / "rerecord.zip"
    archive.write_bytes(make_zip(RERECORDED))
    out = io.StringIO()
    with (
        mock.patch.object(queue, "job_enqueue", return_value=True),
        pytest.raises(CommandError, match="is a worker running"),
    ):
        call_command(
            "rerecord", str(submission.pk), str(archive), "--wait", "--timeout", "0.3", stdout=out
        )
    assert out.getvalue().strip().splitlines()[-1] == str(Rerecord.objects.get().pk)
