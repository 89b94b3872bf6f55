"""The `cassettes.*` checks on hand-ins recorded as candidates record them (#25, #33).

Each hand-in under tests/fixtures/handins/rec-*/ is a small repository whose recordings
were written by the library itself (vcrpy, nock) or by the candidate's own fixture layer;
its README says how. The analysis runs on the tree as handed in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

from cassettes_app.analysis import AnalysisConfig, Analyzer
from cassettes_app.checks import CheckOutcome
from tests.paths import ROOT

HANDINS = ROOT / "tests" / "fixtures" / "handins"
RECORDED = dt.datetime(2026, 12, 4, 9, 30, tzinfo=dt.UTC)  # when the rec-* hand-ins were made
MODEL = "gpt-4o-mini-2024-07-18"


def checks(root: Path, **config: object) -> dict[str, CheckOutcome]:
    settings = {"now": RECORDED + dt.timedelta(days=5), "expected_model": MODEL, **config}
    analyzer = Analyzer(root, AnalysisConfig(**settings))  # type: ignore[arg-type]
    for _ in analyzer.files():
        pass
    return {outcome.id: outcome for outcome in analyzer.checks()}


def messages(outcome: CheckOutcome) -> list[str]:
    return [str(e.get("message")) for e in outcome.evidence]


# --------------------------------------------------------------------------- A: times


def test_vcrpy_cassettes_are_dated_by_their_response_date_header() -> None:
    found = checks(
        HANDINS / "rec-vcrpy-openai",
        shape="cassette",
        recording_globs=("tests/cassettes/**/*.yaml",),
    )
    metadata, fresh = found["cassettes.model_metadata"], found["cassettes.fresh"]
    assert metadata.status == "pass", metadata.summary
    assert "recorded_at from the response Date header (2 recordings)" in messages(metadata)
    assert "model from the response's `model` (2 recordings)" in messages(metadata)
    assert fresh.status == "pass", fresh.summary
    assert "oldest 5 days" in fresh.summary
    assert "recorded_at from the response Date header (2 recordings)" in messages(fresh)


def test_nock_fixtures_are_dated_by_their_raw_headers_date() -> None:
    found = checks(
        HANDINS / "rec-nock-openai",
        shape="cassette",
        recording_globs=("test/fixtures/*.json",),
    )
    metadata, fresh = found["cassettes.model_metadata"], found["cassettes.fresh"]
    assert metadata.status == "pass", metadata.summary
    assert "recorded_at from the response Date header (2 recordings)" in messages(metadata)
    assert fresh.status == "pass", fresh.summary
    assert "recorded_at from the response Date header (2 recordings)" in messages(fresh)


def test_a_stale_vcrpy_cassette_is_stale_by_its_date_header() -> None:
    found = checks(
        HANDINS / "rec-vcrpy-openai",
        shape="cassette",
        recording_globs=("tests/cassettes/**/*.yaml",),
        now=RECORDED + dt.timedelta(days=60),
    )
    fresh = found["cassettes.fresh"]
    assert fresh.status == "fail"
    assert "2 older than 42 days" in fresh.summary


# --------------------------------------------------------------------------- B: models


def test_fixtures_name_their_model_inside_the_recorded_exchange() -> None:
    """{request: {body: {model}}, response: {body: {model}}}: the served model is read."""
    found = checks(
        HANDINS / "rec-fixtures-nested-model",
        shape="ticket-service",
        recording_globs=("fixtures/*.json",),
    )
    metadata = found["cassettes.model_metadata"]
    assert metadata.status == "pass", metadata.summary
    assert "model from the response's `body.model` (4 recordings)" in messages(metadata)
    assert found["cassettes.fresh"].status == "pass"


def test_fixtures_with_the_payloads_at_the_top_name_their_model(tmp_path: Path) -> None:
    """{request: {model…}, response: {model…}}: the same exchange, one level up."""
    source = HANDINS / "rec-fixtures-nested-model" / "fixtures"
    (tmp_path / "fixtures").mkdir()
    for path in sorted(source.glob("*.json")):
        doc = json.loads(path.read_text())
        doc["request"], doc["response"] = doc["request"]["body"], doc["response"]["body"]
        (tmp_path / "fixtures" / path.name).write_text(json.dumps(doc, indent=2))
    analyzer = Analyzer(
        tmp_path,
        AnalysisConfig(shape="ticket-service", recording_globs=("fixtures/*.json",), now=RECORDED),
    )
    for _ in analyzer.files():
        pass
    metadata = {o.id: o for o in analyzer.checks()}["cassettes.model_metadata"]
    assert metadata.status == "pass", metadata.summary
    assert "model from the response's `model` (4 recordings)" in messages(metadata)
    assert not [f for f in analyzer.findings if "lacks" in f.message and "model" in f.message]


# --------------------------------------------------------------------------- C, D: keys

RUN_TWICE = {"shape": "run-twice", "recording_globs": ("fixtures/recordings/*.json",)}


def test_run_twice_fixtures_keyed_by_the_briefs_key_for_recompute() -> None:
    keys = checks(HANDINS / "rec-run-twice-key-for", **RUN_TWICE)["cassettes.keys_match"]
    assert keys.status == "pass", keys.summary
    assert keys.summary == "all 5 stored keys match"
    assert "run-twice brief's key_for" in keys.evidence[0]["message"]


def test_run_twice_fixtures_keyed_by_their_own_scheme_recompute() -> None:
    keys = checks(HANDINS / "rec-run-twice-own-key", **RUN_TWICE)["cassettes.keys_match"]
    assert keys.status == "pass", keys.summary
    assert keys.evidence[0]["scheme"] == (
        "the recorded request as json.dumps(sort_keys=True) (default separators)"
    )
    assert "the hand-in's own scheme" in keys.evidence[0]["message"]


def _copy(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(HANDINS / name, root)
    return root


def test_a_hand_edited_key_fails_under_the_hand_ins_own_scheme(tmp_path: Path) -> None:
    root = _copy("rec-run-twice-own-key", tmp_path)
    edited = sorted((root / "fixtures" / "recordings").glob("*.json"))[2]
    doc = json.loads(edited.read_text())
    doc["request"]["body"]["temperature"] = 0.7  # the request changed, the key kept
    edited.write_text(json.dumps(doc, indent=2) + "\n")
    keys = checks(root, **RUN_TWICE)["cassettes.keys_match"]
    assert keys.status == "fail"
    assert keys.summary.startswith("1 of 5 stored keys do not match the hand-in's own scheme")
    assert [e["path"] for e in keys.evidence] == [f"fixtures/recordings/{edited.name}"]


def test_a_hand_edited_key_fails_under_the_briefs_key_for(tmp_path: Path) -> None:
    root = _copy("rec-run-twice-key-for", tmp_path)
    edited = sorted((root / "fixtures" / "recordings").glob("*.json"))[0]
    doc = json.loads(edited.read_text())
    doc["prompt"] += " (edited)"
    edited.write_text(json.dumps(doc, indent=2) + "\n")
    keys = checks(root, **RUN_TWICE)["cassettes.keys_match"]
    assert keys.status == "fail"
    assert "1 of 5" in keys.summary


def test_keys_no_scheme_reproduces_warn_with_what_was_tried(tmp_path: Path) -> None:
    root = _copy("rec-run-twice-own-key", tmp_path)
    for path in (root / "fixtures" / "recordings").glob("*.json"):
        doc = json.loads(path.read_text())
        doc["key"] = hashlib.md5(path.name.encode()).hexdigest()
        path.write_text(json.dumps(doc))
    keys = checks(root, **RUN_TWICE)["cassettes.keys_match"]
    assert keys.status == "warn"
    assert "no key scheme reproduces most of the 5 stored keys" in keys.summary
    assert any(m.startswith("tried: the brief's canonical request") for m in messages(keys))


def test_fixtures_of_a_shape_no_reader_knows_are_still_the_submissions_recordings(
    tmp_path: Path,
) -> None:
    """A ticket service's own fixtures ({line, model, content, recorded_at}) said 'no
    recordings' to the recording checks while the replay counted them read; its cache files
    ({cache_key, ticket}) may be matched too. Every file the globs match is a recording,
    with what could be read of it; a model not found in a shape no reader knows is at most a
    warning, and a cache file is never asked for a cassette key."""
    root = tmp_path / "handin"
    shutil.copytree(HANDINS / "rec-ticket-own-fixtures", root)
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    found = checks(root, shape="ticket-service", recording_globs=("fixtures/*.json",), now=now)
    assert found["cassettes.model_metadata"].status == "pass"
    assert found["cassettes.model_metadata"].summary.startswith("all 3 recordings name")
    assert found["cassettes.fresh"].status == "pass"
    both = checks(
        root,
        shape="ticket-service",
        recording_globs=("fixtures/*.json", "cache/*.json"),
        now=now,
    )
    metadata = both["cassettes.model_metadata"]
    assert metadata.status == "warn"  # the cache files: no model where it looked
    assert "3 of 6 recordings, of a shape this tool does not read" in metadata.summary
    assert not any("lacks key" in m for m in messages(metadata))


def test_a_cache_entry_keyed_its_own_way_is_not_asked_for_a_cassette_key() -> None:
    from cassettes_app.formats import parse_file

    entry = {
        "cache_key": "7d0b681ad347ae81",
        "request": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]},
        "response": {"model": MODEL, "choices": [{"message": {"content": "bug"}}]},
        "recorded_at": "2026-12-04T09:39:38+00:00",
    }
    result = parse_file("cache/7d0b681ad347ae81.json", json.dumps(entry).encode())
    assert not [f.message for f in result.findings if "lacks" in f.message]
