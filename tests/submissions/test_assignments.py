from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from submissions.assignments import AssignmentError, assignment_values
from submissions.models import Assignment

FULL = """\
slug: cassette-triage
title: Cassette take-home, ticket triage
shape: cassette
replay_command: make test && make demo
graded_outputs: [out/answers.json]
recordings: ["cassettes/**/*.json"]
traces: ["replay.jsonl"]
ledgers: ["ledger.jsonl"]
volatile_fields: [user, request_id, id, created]
stale_after_days: 42
expected_model: gpt-4o-mini-2024-07-18
id_pattern: "ord_[0-9a-f]+"
stub_start_command: python shop_stub.py
service_start_command: python app.py
service_port: 8000
service_request: {method: POST, path: /extract, field: line}
ticket_schema: schemas/ticket.json
rubric: cassette
"""


@pytest.fixture
def assignment_file(tmp_path: Path) -> Path:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "ticket.json").write_text(
        json.dumps({"type": "object", "required": ["severity"]})
    )
    path = tmp_path / "a.yaml"
    path.write_text(FULL)
    return path


def test_apply_creates_an_assignment_with_every_key(db: None, assignment_file: Path) -> None:
    call_command("assignment_apply", str(assignment_file))
    a = Assignment.objects.get(slug="cassette-triage")
    assert a.recording_globs == ["cassettes/**/*.json"]
    assert a.trace_globs == ["replay.jsonl"]
    assert a.volatile_fields == ["user", "request_id", "id", "created"]
    assert a.service_request == {"method": "POST", "path": "/extract", "field": "line"}
    assert a.ticket_schema == {"type": "object", "required": ["severity"]}
    assert a.expected_model == "gpt-4o-mini-2024-07-18"


def test_applying_the_same_file_twice_changes_nothing(
    db: None, assignment_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("assignment_apply", str(assignment_file))
    before = Assignment.objects.get(slug="cassette-triage").updated
    call_command("assignment_apply", str(assignment_file))
    assert "cassette-triage: unchanged" in capsys.readouterr().out
    assert Assignment.objects.get().updated == before
    assert Assignment.objects.count() == 1


def test_apply_updates_changed_keys(db: None, assignment_file: Path) -> None:
    call_command("assignment_apply", str(assignment_file))
    assignment_file.write_text(FULL.replace("stale_after_days: 42", "stale_after_days: 7"))
    call_command("assignment_apply", str(assignment_file))
    assert Assignment.objects.get().stale_after_days == 7


def test_shape_preset_fills_defaults() -> None:
    values = assignment_values({"slug": "rt", "title": "Run twice", "shape": "run-twice"})
    assert values["replay_command"] == "./run.sh replay"
    assert values["rubric"] == "run-twice"
    assert values["graded_outputs"] == ["out/answers.json"]


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"colour": "red"}, "colour"),
        ({"shape": "essay"}, "shape"),
        ({"stale_after_days": "soon"}, "stale_after_days"),
        ({"stale_after_days": 0}, "stale_after_days"),
        ({"service_port": 70000}, "service_port"),
        ({"graded_outputs": "out/a.json"}, None),
        ({"graded_outputs": [1, 2]}, "graded_outputs"),
        ({"id_pattern": "ord_[0-9"}, "id_pattern"),
        ({"service_request": {"verb": "GET"}}, "service_request"),
        ({"slug": "has space"}, "slug"),
        ({"title": ""}, "title"),
        ({"replay_command": ["make", "test"]}, "replay_command"),
    ],
)
def test_bad_values_are_refused_naming_the_key(patch: dict, key: str | None) -> None:
    data = {"slug": "x", "title": "X", **patch}
    if key is None:  # a single string is accepted as a one-item list
        assert assignment_values(data)["graded_outputs"] == ["out/a.json"]
        return
    with pytest.raises(AssignmentError, match=rf"^{key}:"):
        assignment_values(data)


def test_command_names_the_key_and_stores_nothing(db: None, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("slug: x\ntitle: X\nstale_after_days: -3\n")
    with pytest.raises(CommandError, match="stale_after_days"):
        call_command("assignment_apply", str(path))
    assert not Assignment.objects.exists()


def test_command_refuses_unknown_rubric(db: None, tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("slug: x\ntitle: X\nrubric: vibes\n")
    with pytest.raises(CommandError, match="rubric: no rubric 'vibes'"):
        call_command("assignment_apply", str(path))


def test_command_refuses_unsafe_yaml(db: None, tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    marker = tmp_path / "pwned"
    path.write_text(f'slug: !!python/object/apply:os.system ["touch {marker}"]\ntitle: X\n')
    with pytest.raises(CommandError, match="not valid YAML"):
        call_command("assignment_apply", str(path))
    assert not marker.exists()


def test_missing_schema_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("slug: x\ntitle: X\nticket_schema: nope.json\n")
    from submissions.assignments import load_assignment_file

    with pytest.raises(AssignmentError, match="ticket_schema: file not found"):
        load_assignment_file(path)


def test_builtin_rubrics_exist_after_migrate(db: None) -> None:
    from reviewer.models import RubricTemplate

    slugs = set(RubricTemplate.objects.values_list("slug", flat=True))
    assert {"cassette", "run-twice", "trace", "ticket-service"} <= slugs
    run_twice = RubricTemplate.objects.get(slug="run-twice")
    assert [r.weight for r in run_twice.rows.all()] == [30, 20, 20, 20, 10]
    for template in RubricTemplate.objects.all():
        assert template.total_weight == 100


def test_the_slug_new_is_reserved_for_the_new_assignment_page() -> None:
    from submissions.assignments import AssignmentError, assignment_values

    with pytest.raises(AssignmentError) as info:
        assignment_values({"slug": "new", "title": "New", "shape": "cassette"})
    assert "slug" in str(info.value) and "reserved" in str(info.value)


def test_assignment_urls_do_not_depend_on_their_order() -> None:
    from django.urls import resolve

    assert resolve("/assignments/new/").url_name == "assignment_new"
    assert resolve("/assignments/newer/").url_name == "assignment"
    assert resolve("/assignments/new-cohort/compare/").url_name == "comparison"


def test_checks_overrides_are_validated_and_stored(db) -> None:
    from submissions.assignments import assignment_apply

    values = assignment_values(
        {
            "slug": "rt",
            "title": "Run twice",
            "shape": "run-twice",
            "checks": {"cassettes.fresh": {"applies": False, "reason": "fixtures are hand-made"}},
        }
    )
    assignment, _ = assignment_apply(values=values)
    assert assignment.check_rules == {
        "cassettes.fresh": {"applies": False, "reason": "fixtures are hand-made"}
    }
    with pytest.raises(AssignmentError) as info:
        assignment_values({"slug": "x", "title": "X", "checks": {"nope.nope": {"applies": 1}}})
    assert "checks.nope.nope" in str(info.value)


def test_a_check_that_does_not_apply_is_stored_as_skip_with_the_reason(db) -> None:
    from cassettes_app.checks import CheckOutcome
    from submissions.assignments import assignment_apply
    from submissions.checks.store import checks_store
    from submissions.models import Candidate, Submission

    assignment, _ = assignment_apply(
        values=assignment_values({"slug": "rt2", "title": "RT", "shape": "run-twice"})
    )
    submission = Submission.objects.create(
        candidate=Candidate.objects.create(name="A"), assignment=assignment, archive_sha256="1" * 64
    )
    checks_store(
        submission,
        None,
        [
            CheckOutcome("cassettes.per_turn", "fail", "3 conversations stored as one blob"),
            CheckOutcome("cassettes.fresh", "pass", "all fresh"),
        ],
    )
    stored = {c.check_id: c for c in submission.checks.all()}
    assert stored["cassettes.per_turn"].status == "skip"
    assert stored["cassettes.per_turn"].summary == (
        "does not apply to the run-twice task: run-twice fixtures hold one response text each"
    )
    assert stored["cassettes.fresh"].status == "pass"
