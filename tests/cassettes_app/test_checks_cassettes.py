"""Tests for the canonical key (cassettes_app.keys) and the cassettes.* check functions."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest

from cassettes_app.analysis import AnalysisConfig
from cassettes_app.checks.cassettes import (
    RecordingFacts,
    cassettes_fresh,
    cassettes_keys_match,
    cassettes_model_metadata,
    cassettes_no_secrets,
    cassettes_per_turn,
    cassettes_pruned,
    key_report,
    parse_time,
)
from cassettes_app.keys import (
    NO_VARIANT,
    canonical_request,
    explain_mismatch,
    mismatch_variants,
    recompute_key,
)
from cassettes_app.secrets import scan_headers

VOLATILE = ("user", "request_id", "id", "created")
NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
CONFIG = AnalysisConfig(
    recording_globs=("cassettes/**/*.json",),
    expected_model="gpt-4o-mini-2024-07-18",
    stale_after_days=42,
    now=NOW,
)
# A made-up, high-entropy OpenAI-shaped key: never a real credential.
FAKE_KEY = "sk-proj-FAKEq8Zr2LmT5vXc9NwB4hJ7kP3sD6fG1aQ0eRyUiOpZxCvBnM2FAKEtest"


def sha(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def request(**extra: object) -> dict:
    payload: dict = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Ticket T-1: login fails"}],
        "temperature": 0,
        "user": "triage-bot",
        "request_id": "8d1c",
    }
    payload.update(extra)
    return payload


def facts(path: str = "cassettes/a.json", **values: object) -> RecordingFacts:
    base: dict = {
        "model": "gpt-4o-mini-2024-07-18",
        "recorded_at": "2026-11-20T10:00:00Z",
        "oldest": dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC),
        "newest": dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC),
        "size": 100,
        "sha256": hashlib.sha256(path.encode()).hexdigest(),
        "interactions": 1,
    }
    base.update(values)
    return RecordingFacts(path=path, **base)


# --------------------------------------------------------------------------- keys


def test_canonical_request_drops_volatile_keys_at_the_top_level_only() -> None:
    payload = request(
        messages=[{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function"}]}]
    )
    text = canonical_request(payload, VOLATILE)
    assert '"user"' not in text and '"request_id"' not in text
    assert '"id":"call_1"' in text  # nested ids are part of the key
    assert text == json.dumps(
        {k: v for k, v in payload.items() if k not in VOLATILE},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def test_recompute_key_is_a_sha256_prefix_of_the_stored_length() -> None:
    payload = request()
    text = canonical_request(payload, VOLATILE)
    assert recompute_key(payload, VOLATILE) == sha(text)
    assert recompute_key(payload, VOLATILE, 8) == sha(text, 8)
    assert recompute_key(payload, VOLATILE, 64) == sha(text, 64)
    assert len(recompute_key(payload, VOLATILE, 200)) == 64


def _dumps(value: object, **options: object) -> str:
    settings: dict = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False}
    settings.update(options)
    return json.dumps(value, **settings)


def _stable(payload: dict, drop: tuple[str, ...] = VOLATILE) -> dict:
    return {k: v for k, v in payload.items() if k not in drop}


def test_explain_names_a_volatile_field_that_was_kept() -> None:
    payload = request(created=1794245987)
    stored = sha(_dumps(_stable(payload, ("user", "request_id", "id"))))
    assert explain_mismatch(payload, stored, VOLATILE) == ["matches if `created` is kept"]


def test_explain_names_all_volatile_fields_kept() -> None:
    payload = request()
    labels = explain_mismatch(payload, sha(_dumps(payload)), VOLATILE)
    assert labels == ["matches if all volatile fields are kept (`user`, `request_id`)"]


def test_explain_names_a_trailing_newline() -> None:
    payload = request()
    labels = explain_mismatch(payload, sha(_dumps(_stable(payload)) + "\n"), VOLATILE)
    assert labels == ["matches with a trailing newline after the JSON"]


def test_explain_names_default_separators() -> None:
    payload = request()
    stored = sha(_dumps(_stable(payload), separators=(", ", ": ")))
    assert explain_mismatch(payload, stored, VOLATILE) == [
        'matches with json.dumps default separators (", ", ": ")'
    ]


def test_explain_names_ensure_ascii() -> None:
    payload = request(messages=[{"role": "user", "content": "Zażółć gęślą jaźń"}])
    stored = sha(_dumps(_stable(payload), ensure_ascii=True))
    assert explain_mismatch(payload, stored, VOLATILE) == ["matches with ensure_ascii=True"]


def test_explain_names_unsorted_keys() -> None:
    payload = {"temperature": 0, "model": "m", "messages": [], "user": "u"}
    stored = sha(_dumps(_stable(payload), sort_keys=False))
    assert explain_mismatch(payload, stored, VOLATILE) == [
        "matches without sort_keys (keys in file order)"
    ]


def test_explain_names_ids_dropped_at_every_depth() -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    payload = request(messages=[{"role": "assistant", "tool_calls": [call]}])
    deep = request(messages=[{"role": "assistant", "tool_calls": [{**call}]}])
    del deep["messages"][0]["tool_calls"][0]["id"]
    stored = sha(_dumps(_stable(deep)))
    assert explain_mismatch(payload, stored, VOLATILE) == [
        "matches if volatile keys are dropped at every depth (nested ids too)"
    ]


def test_explain_names_the_whole_file_hashed() -> None:
    payload = request()
    document = {"key": "x", "request": payload, "response": {"ok": True}, "model": "m"}
    stored = sha(_dumps({k: v for k, v in document.items() if k != "key"}))
    labels = explain_mismatch(payload, stored, VOLATILE, document=document)
    assert labels == ["matches if the whole file (less `key`) is hashed, not the request only"]
    assert explain_mismatch(payload, stored, VOLATILE) == []  # needs the file to say so


def test_explain_names_an_extra_field_the_candidate_drops() -> None:
    payload = request()
    stored = sha(_dumps(_stable(payload, (*VOLATILE, "temperature"))))
    variants = mismatch_variants(payload, stored, VOLATILE)
    assert [(v.label, v.kind, v.fields) for v in variants] == [
        ("matches if `temperature` is also dropped", "dropped", ("temperature",))
    ]


def test_explain_names_the_tail_of_the_digest_and_upper_case() -> None:
    payload = request()
    full = hashlib.sha256(canonical_request(payload, VOLATILE).encode()).hexdigest()
    assert explain_mismatch(payload, full[-16:], VOLATILE) == [
        "matches the last 16 hex of the sha256, not the first"
    ]
    assert explain_mismatch(payload, full[:16].upper(), VOLATILE) == [
        "matches ignoring letter case (stored key has upper-case hex)"
    ]


def test_explain_finds_nothing_for_a_hand_edited_key() -> None:
    payload = request(temperature=0.2)
    stored = recompute_key(request(temperature=0), VOLATILE)
    assert explain_mismatch(payload, stored, VOLATILE) == []
    assert explain_mismatch(payload, "not-a-key", VOLATILE) == []


# --------------------------------------------------------------------------- keys_match


def test_keys_match_passes_when_every_stored_key_is_recomputed() -> None:
    rows = [
        facts(
            "cassettes/a.json", key="aa" * 8, recomputed_key="aa" * 8, volatile_present=("user",)
        ),
        facts("cassettes/b.json", key="bb" * 8, recomputed_key="bb" * 8),
    ]
    outcome = cassettes_keys_match(rows, CONFIG)
    assert outcome.status == "pass"
    assert outcome.summary == "all 2 stored keys match"


def test_keys_match_fails_listing_each_mismatch_and_its_explanation() -> None:
    rows = [
        facts("cassettes/ok.json", key="aa" * 8, recomputed_key="aa" * 8),
        facts(
            "cassettes/old.json",
            key="1234567890abcdef",
            recomputed_key="fedcba0987654321",
            key_labels=("matches if `created` is kept",),
            kept_fields=("created",),
        ),
        facts("cassettes/edit.json", key="0000111122223333", recomputed_key="4444555566667777"),
    ]
    outcome = cassettes_keys_match(rows, CONFIG)
    assert outcome.status == "fail"
    assert outcome.summary.startswith("2 of 3 stored keys")
    by_path = {e["path"]: e for e in outcome.evidence}
    old = by_path["cassettes/old.json"]
    assert old["stored_key"] == "1234567890abcdef"
    assert old["recomputed_key"] == "fedcba0987654321"
    assert old["explanations"] == ["matches if `created` is kept"]
    assert NO_VARIANT in by_path["cassettes/edit.json"]["message"]


def test_keys_match_skips_when_no_recording_carries_a_key() -> None:
    outcome = cassettes_keys_match([facts("cassettes/vcr.yaml", format="vcr")], CONFIG)
    assert outcome.status == "skip"
    assert "no recording carries a stored key" in outcome.summary


def test_key_report_says_which_volatile_fields_the_data_drops_or_keeps() -> None:
    report = key_report(
        [
            facts("a", key="aa" * 8, recomputed_key="aa" * 8, volatile_present=("user", "id")),
            facts("b", key="bb" * 8, recomputed_key="cc" * 8, kept_fields=("created",)),
            facts("c", key="dd" * 8, recomputed_key="ee" * 8, also_dropped=("temperature",)),
            facts("d"),  # no key: not part of the report
        ]
    )
    assert [e.path for e in report.matched] == ["a"]
    assert [e.path for e in report.mismatched] == ["b", "c"]
    assert report.dropped == ["user", "id"]
    assert report.kept == ["created"]
    assert report.also_dropped == ["temperature"]
    assert json.dumps(report.as_dict())


# --------------------------------------------------------------------------- no_secrets


def test_no_secrets_fails_on_a_leak_showing_only_the_redacted_form() -> None:
    hits = scan_headers(
        [("Authorization", f"Bearer {FAKE_KEY}")], "cassettes/leak.json", where="request"
    )
    outcome = cassettes_no_secrets(hits)
    assert outcome.status == "fail"
    (item,) = outcome.evidence
    assert item["path"] == "cassettes/leak.json"
    assert item["rule"] == "openai-api-key"
    assert item["context"] == "request header Authorization"
    assert {"line", "redacted"} <= set(item)
    assert FAKE_KEY not in repr(outcome)
    assert FAKE_KEY[8:24] not in repr(outcome)


def test_no_secrets_passes_with_a_note_for_redacted_placeholders() -> None:
    hits = scan_headers([("Authorization", "Bearer ***")], "cassettes/a.json", where="request")
    assert hits
    outcome = cassettes_no_secrets(hits)
    assert outcome.status == "pass"
    assert "1 redacted placeholder" in outcome.summary
    assert cassettes_no_secrets([]).summary == "no credentials found"


# --------------------------------------------------------------------------- model_metadata


def test_model_metadata_passes_when_model_and_time_are_named() -> None:
    assert cassettes_model_metadata([facts()]).status == "pass"


def test_model_metadata_fails_when_a_model_is_missing() -> None:
    outcome = cassettes_model_metadata([facts(), facts("cassettes/b.json", model=None)])
    assert outcome.status == "fail"
    assert outcome.evidence[0] == {"message": "names no model", "path": "cassettes/b.json"}


def test_model_metadata_warns_that_vcr_cassettes_carry_no_time() -> None:
    vcr = facts("cassettes/a.yaml", format="vcr", recorded_at=None, oldest=None, newest=None)
    outcome = cassettes_model_metadata([vcr])
    assert outcome.status == "warn"
    assert "VCR.py cassettes carry no recording time" in outcome.summary
    unreadable = facts(recorded_at="last tuesday", oldest=None, newest=None)
    assert cassettes_model_metadata([unreadable]).status == "warn"


# --------------------------------------------------------------------------- fresh


def test_fresh_passes_for_young_recordings_of_the_expected_model() -> None:
    outcome = cassettes_fresh([facts(), facts("b", model="gpt-4o-mini")], CONFIG)
    assert outcome.status == "pass"
    assert "oldest 8 days" in outcome.summary


def test_fresh_fails_for_a_stale_recording_with_its_age() -> None:
    old = dt.datetime(2026, 9, 23, 17, 40, 12, tzinfo=dt.UTC)
    outcome = cassettes_fresh([facts("cassettes/old.json", oldest=old, newest=old)], CONFIG)
    assert outcome.status == "fail"
    assert outcome.evidence[0]["age_days"] == 66
    assert "66 days" in outcome.evidence[0]["message"]


def test_fresh_fails_for_a_recording_dated_after_the_upload() -> None:
    later = NOW + dt.timedelta(days=3)
    outcome = cassettes_fresh([facts("cassettes/f.json", oldest=later, newest=later)], CONFIG)
    assert outcome.status == "fail"
    assert "after the upload" in outcome.evidence[0]["message"]
    skew = NOW + dt.timedelta(minutes=2)  # a candidate's clock a little ahead is not forgery
    assert cassettes_fresh([facts(oldest=skew, newest=skew)], CONFIG).status == "pass"


def test_fresh_warns_for_another_model_and_for_unknown_age() -> None:
    other = cassettes_fresh(
        [facts("cassettes/m.json", served_models=("gpt-4o-2024-05-13",))], CONFIG
    )
    assert other.status == "warn"
    assert other.evidence[0]["models"] == ["gpt-4o-2024-05-13"]
    vcr = facts("cassettes/v.yaml", format="vcr", recorded_at=None, oldest=None, newest=None)
    unknown = cassettes_fresh([vcr], CONFIG)
    assert unknown.status == "warn"
    assert "age unknown" in unknown.summary
    assert "VCR.py cassettes carry no recording time" in unknown.evidence[0]["message"]


@pytest.mark.parametrize(
    ("served", "expected", "same"),
    [
        # An alias and the snapshot it served, either way round.
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", True),
        ("gpt-4o-mini", "gpt-4o-mini-2024-07-18", True),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku-latest", True),
        ("claude-sonnet-4-20250514", "claude-sonnet-4-0", True),
        ("gpt-4-0613", "gpt-4", True),
        # Another model, or another snapshot of it.
        ("gpt-4o-mini-2024-07-18", "gpt-4o", False),
        ("gpt-4o-2024-05-13", "gpt-4o-2024-08-06", False),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-20250514", False),
        ("claude-sonnet-4-5", "claude-sonnet-4-0", False),
    ],
)
def test_fresh_takes_an_alias_and_its_snapshot_for_one_model(
    served: str, expected: str, same: bool
) -> None:
    config = AnalysisConfig(now=NOW, stale_after_days=42, expected_model=expected)
    outcome = cassettes_fresh([facts(model=served, served_models=(served,))], config)
    assert outcome.status == ("pass" if same else "warn"), outcome.summary


def test_fresh_does_not_warn_for_run_twice_fixtures_that_hold_only_the_text() -> None:
    """The run-twice brief: fixtures are {"text": ...}; timings live in out/run.log."""
    run_twice = AnalysisConfig(
        shape="run-twice", now=NOW, stale_after_days=42, expected_model=CONFIG.expected_model
    )
    bare = [
        facts(
            f"fixtures/{n}.json",
            format="fixture",
            model=None,
            recorded_at=None,
            oldest=None,
            newest=None,
        )
        for n in "ab"
    ]
    outcome = cassettes_fresh(bare, run_twice)
    assert outcome.status == "skip"
    assert "carries a recording time" in outcome.summary
    mixed = cassettes_fresh([*bare, facts()], run_twice)
    assert mixed.status == "pass"
    assert "2 run-twice fixtures carry no recording time" in mixed.summary
    old = dt.datetime(2026, 9, 23, tzinfo=dt.UTC)
    assert cassettes_fresh([*bare, facts(oldest=old, newest=old)], run_twice).status == "fail"
    # any other shape still wants to know how old a recording is
    assert cassettes_fresh(bare, CONFIG).status == "warn"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-07T10:49:04Z", dt.datetime(2026, 11, 7, 10, 49, 4, tzinfo=dt.UTC)),
        ("2026-11-07T10:49:04.123456Z", dt.datetime(2026, 11, 7, 10, 49, 4, 123456, dt.UTC)),
        ("2026-11-07T12:49:04+02:00", dt.datetime(2026, 11, 7, 10, 49, 4, tzinfo=dt.UTC)),
        ("2026-11-07 10:49:04", dt.datetime(2026, 11, 7, 10, 49, 4, tzinfo=dt.UTC)),
        ("1794245987", dt.datetime.fromtimestamp(1794245987, dt.UTC)),
        # A response's Date header copied as it was.
        ("Sat, 07 Nov 2026 10:49:04 GMT", dt.datetime(2026, 11, 7, 10, 49, 4, tzinfo=dt.UTC)),
        ("7 Nov 2026 12:49:04 +0200", dt.datetime(2026, 11, 7, 10, 49, 4, tzinfo=dt.UTC)),
        ("Sat, 32 Nov 2026 10:49:04 GMT", None),
        ("Sat, 07 Nov 2026 10:49 GMT", None),
        ("last tuesday at 10:49:04 GMT", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_time_reads_iso_and_epoch_and_never_guesses(
    raw: str | None, expected: object
) -> None:
    assert parse_time(raw) == expected


# --------------------------------------------------------------------------- pruned


def test_pruned_passes_without_duplicates_and_lists_the_largest_files() -> None:
    rows = [facts(f"cassettes/{i}.json", key=f"{i:016x}", size=100 * i) for i in range(1, 8)]
    outcome = cassettes_pruned(rows, CONFIG)
    assert outcome.status == "pass"
    sizes = [e["size"] for e in outcome.evidence]
    assert sizes == [700, 600, 500, 400, 300]


def test_pruned_fails_for_the_same_content_twice_and_counts_the_bytes() -> None:
    same = "ab" * 32
    rows = [
        facts("cassettes/archive/k.json", key="k" * 16, sha256=same, size=2882),
        facts("cassettes/k.json", key="k" * 16, sha256=same, size=2882),
        facts("cassettes/other.json", key="o" * 16, size=50),
    ]
    outcome = cassettes_pruned(rows, CONFIG)
    assert outcome.status == "fail"
    dup = outcome.evidence[0]
    assert dup["paths"] == ["cassettes/k.json", "cassettes/archive/k.json"]
    assert dup["bytes_saved"] == 2882
    assert "identical content" in dup["message"]


def test_pruned_fails_for_the_same_key_with_different_content() -> None:
    rows = [
        facts("cassettes/a.json", key="k" * 16, size=10),
        facts("cassettes/b.json", key="k" * 16, size=20),
    ]
    outcome = cassettes_pruned(rows, CONFIG)
    assert outcome.status == "fail"
    assert "same key" in outcome.evidence[0]["message"]
    assert outcome.evidence[0]["bytes_saved"] == 20


def test_equal_responses_under_different_keys_are_not_duplicates() -> None:
    same = "cd" * 32
    rows = [
        facts("cassettes/a.json", key="a" * 16, sha256=same, size=40),
        facts("cassettes/b.json", key="b" * 16, sha256=same, size=40),
    ]
    outcome = cassettes_pruned(rows, CONFIG)
    assert outcome.status == "pass"
    note = next(e for e in outcome.evidence if e.get("info"))
    assert note["paths"] == ["cassettes/a.json", "cassettes/b.json"]
    assert "not duplicates" in note["message"]


def test_run_twice_fixtures_with_the_same_text_and_no_key_are_not_duplicates() -> None:
    """A good run-twice hand-in: two prompts whose recorded answer text is the same."""
    same = "ef" * 32
    rows = [
        facts("fixtures/a.json", format="fixture_json", sha256=same, size=20),
        facts("fixtures/b.json", format="fixture_json", sha256=same, size=20),
    ]
    assert cassettes_pruned(rows, CONFIG).status == "pass"


def test_the_same_request_twice_without_a_stored_key_is_a_duplicate() -> None:
    rows = [
        facts("cassettes/x.yaml", format="vcr_yaml", recomputed_key="r" * 16, size=30),
        facts("cassettes/old/x.yaml", format="vcr_yaml", recomputed_key="r" * 16, size=30),
    ]
    assert cassettes_pruned(rows, CONFIG).status == "fail"


def test_pruned_fails_when_recordings_are_over_the_size_limit() -> None:
    config = AnalysisConfig(max_recordings_bytes=1000, now=NOW)
    rows = [facts(f"cassettes/{i}.json", size=400) for i in range(3)]
    outcome = cassettes_pruned(rows, config)
    assert outcome.status == "fail"
    assert "1200 bytes in recordings, over 1000" in outcome.summary


# --------------------------------------------------------------------------- per_turn


def test_per_turn_passes_for_one_turn_per_recording() -> None:
    assert cassettes_per_turn([], [facts(), facts("b")]).status == "pass"


def test_per_turn_fails_for_a_blob_request_and_for_an_embedded_turns_list() -> None:
    outcome = cassettes_per_turn([("cassettes/blob.json", 0)], [facts("cassettes/blob.json")])
    assert outcome.status == "fail"
    assert outcome.evidence[0]["path"] == "cassettes/blob.json"
    embedded = cassettes_per_turn([], [facts("cassettes/t.json", embedded_turns=2)])
    assert embedded.status == "fail"
    assert "3 model turns" in embedded.evidence[0]["message"]
    assert "cassettes/t.json" in embedded.summary


def test_every_check_skips_without_recordings() -> None:
    assert cassettes_model_metadata([]).status == "skip"
    assert cassettes_fresh([], CONFIG).status == "skip"
    assert cassettes_pruned([], CONFIG).status == "skip"
    assert cassettes_per_turn([], []).status == "skip"


def test_a_key_that_differs_links_its_line_and_shows_the_canonical_request(tmp_path) -> None:
    """The evidence opened the cassette at line 1; it now points at the stored key's line
    and carries the canonical request the key was recomputed from."""
    import json

    from cassettes_app.analysis import AnalysisConfig, Analyzer
    from cassettes_app.checks.catalog import KEYS_MATCH
    from cassettes_app.keys import canonical_request, recompute_key

    request = {"model": "m", "messages": [{"role": "user", "content": "refund order 7"}]}
    good = recompute_key(request, ["user", "request_id", "id", "created"])
    edited = {**request, "messages": [{"role": "user", "content": "refund order 8"}]}
    body = {"request": edited, "response": {"choices": []}, "key": good, "model": "m"}
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "cassettes" / f"{good}.json").write_text(json.dumps(body, indent=2))
    config = AnalysisConfig(shape="cassette", recording_globs=("cassettes/*.json",))
    analyzer = Analyzer(tmp_path, config)
    for _ in analyzer.files():
        pass
    outcome = next(o for o in analyzer.checks() if o.id == KEYS_MATCH)
    assert outcome.status == "fail"
    item = next(e for e in outcome.evidence if e.get("stored_key") == good)
    lines = (tmp_path / "cassettes" / f"{good}.json").read_text().splitlines()
    assert lines[item["line"] - 1].strip().startswith('"key":')
    assert item["canonical"] == canonical_request(edited, ["user", "request_id", "id", "created"])
    assert "refund order 8" in item["canonical"]
