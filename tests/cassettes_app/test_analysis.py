"""Tests for cassettes_app.analysis: the Analyzer over the demo cohort and hostile trees."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest

from cassettes_app.analysis import TEXT_CAP, AnalysisConfig, Analyzer, glob_match
from cassettes_app.checks import CheckOutcome
from cassettes_app.keys import recompute_key
from tests.paths import DEMO_REPOS, FIXTURES

REPOS = DEMO_REPOS
NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
VOLATILE = ("user", "request_id", "id", "created")
CASSETTE = AnalysisConfig(
    shape="cassette",
    recording_globs=("cassettes/**/*.json",),
    volatile_fields=VOLATILE,
    stale_after_days=42,
    expected_model="gpt-4o-mini-2024-07-18",
    now=NOW,
)


def run(root: Path, config: AnalysisConfig = CASSETTE) -> tuple[Analyzer, dict[str, CheckOutcome]]:
    analyzer = Analyzer(root, config)
    for _ in analyzer.files():
        pass
    list(analyzer.secret_hits())
    # The cassettes.* outcomes: the trace, ledger and docs ones have their own tests.
    checks = {outcome.id: outcome for outcome in analyzer.checks()}
    return analyzer, {cid: o for cid, o in checks.items() if cid.startswith("cassettes.")}


def cassette(text: str, *, i: int = 0, recorded_at: str = "2026-11-20T09:00:00Z") -> dict:
    """A cassette-task file whose key is right."""
    req = {
        "model": "gpt-4o-mini-2024-07-18",
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        "user": "triage-bot",
        "request_id": f"r-{i}",
    }
    resp = {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"ok {i}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    return {
        "key": recompute_key(req, VOLATILE),
        "request": req,
        "response": resp,
        "recorded_at": recorded_at,
        "model": "gpt-4o-mini-2024-07-18",
    }


def write_cassette(root: Path, doc: dict, name: str | None = None) -> Path:
    path = root / "cassettes" / (name or f"{doc['key']}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


# --------------------------------------------------------------------------- demo cohort


def test_cassette_good_passes_every_cassettes_check() -> None:
    analyzer, checks = run(REPOS / "cassette-good")
    assert {cid: o.status for cid, o in checks.items()} == {
        "cassettes.keys_match": "pass",
        "cassettes.no_secrets": "pass",
        "cassettes.model_metadata": "pass",
        "cassettes.fresh": "pass",
        "cassettes.pruned": "pass",
        "cassettes.per_turn": "pass",
        "cassettes.provenance": "skip",  # a folder has no history to read
    }
    threads = analyzer.threads()
    assert max(len(t.turns) for t in threads) > 1
    assert sum(len(t.turns) for t in threads) == 8
    turn = threads[0].turns[1]
    assert turn.path.startswith("cassettes/") and turn.interaction_index == 0
    assert turn.model == "gpt-4o-mini-2024-07-18"
    assert turn.usage["total_tokens"] > 0
    assert {"role", "text", "tool_calls", "tool_results"} <= set(turn.new_messages[0])
    json.dumps([t.new_messages for t in threads[0].turns])  # plain JSON-able data
    report = analyzer.key_report
    assert len(report.matched) == 8 and not report.mismatched
    assert set(report.dropped) == {"user", "request_id"}


def test_cassette_flawed_fails_where_the_flaws_were_planted() -> None:
    root = REPOS / "cassette-flawed"
    analyzer, checks = run(root)

    keys = checks["cassettes.keys_match"]
    assert keys.status == "fail"
    by_key = {e["stored_key"]: e for e in keys.evidence}
    assert set(by_key) == {"1610a6524d6320f3", "ae90e05be7e8bf07"}
    assert by_key["1610a6524d6320f3"]["explanations"] == []
    assert "hand-edited or another normalisation" in by_key["1610a6524d6320f3"]["message"]
    assert by_key["ae90e05be7e8bf07"]["explanations"] == ["matches if `created` is kept"]
    assert analyzer.key_report.kept == ["created"]
    assert {f["path"] for f in analyzer.key_findings if not f["matched"]} == {
        "cassettes/1610a6524d6320f3.json",
        "cassettes/ae90e05be7e8bf07.json",
    }

    secrets = checks["cassettes.no_secrets"]
    assert secrets.status == "fail"
    assert [e["path"] for e in secrets.evidence] == ["cassettes/56080d208eca0622.json"]
    assert secrets.evidence[0]["line"] is not None
    leaked = json.loads((root / "cassettes/56080d208eca0622.json").read_text())
    token = leaked["request_headers"]["Authorization"].removeprefix("Bearer ")
    assert token.startswith("sk-proj-")
    assert token not in repr(secrets)
    assert token not in repr(list(analyzer.secret_hits()))

    fresh = checks["cassettes.fresh"]
    assert fresh.status == "fail"
    stale = [e for e in fresh.evidence if "937d98b62e3667c3" in e["path"]]
    assert stale and stale[0]["age_days"] == 66
    model = [e for e in fresh.evidence if "1759a874027dbf97" in e["path"]]
    assert model and "gpt-4o-2024-05-13" in model[0]["message"]

    pruned = checks["cassettes.pruned"]
    assert pruned.status == "fail"
    assert pruned.evidence[0]["paths"] == [
        "cassettes/bd856bf6e2fab33c.json",
        "cassettes/archive/bd856bf6e2fab33c.json",
    ]

    per_turn = checks["cassettes.per_turn"]
    assert per_turn.status == "fail"
    assert "f0968d1c7a4576fe" in per_turn.summary
    assert checks["cassettes.model_metadata"].status == "pass"


def test_shop_trace_exposes_hops_and_a_trace_path() -> None:
    config = AnalysisConfig(
        recording_globs=("recordings/*.json",), trace_globs=("replay.jsonl",), now=NOW
    )
    analyzer, checks = run(REPOS / "shop-trace-good", config)
    assert analyzer.trace_path == "replay.jsonl"
    assert analyzer.hops and analyzer.hops[0].url
    assert checks["cassettes.keys_match"].status == "pass"
    assert analyzer.exchanges and all(
        ref[0].startswith("recordings/") for ref, _ in analyzer.exchanges
    )


def test_a_vcr_cassette_has_no_key_and_is_dated_by_its_created(tmp_path: Path) -> None:
    (tmp_path / "cassettes").mkdir()
    shutil.copy(FIXTURES / "vcr_openai_stream.yaml", tmp_path / "cassettes" / "order.yaml")
    config = AnalysisConfig(recording_globs=("cassettes/*.yaml",), now=NOW)
    _, checks = run(tmp_path, config)
    assert checks["cassettes.keys_match"].status == "skip"
    # No Date header in this cassette: the stream's `created` (2025-02-11) dates it.
    assert checks["cassettes.fresh"].status == "fail"
    assert "recorded 2025-02-11" in checks["cassettes.fresh"].evidence[0]["message"]
    metadata = checks["cassettes.model_metadata"]
    assert metadata.status == "pass"
    assert "recorded_at from the response body's `created` (1 recording)" in [
        e["message"] for e in metadata.evidence
    ]


def test_a_vcr_cassette_without_date_or_created_has_an_unknown_age(tmp_path: Path) -> None:
    (tmp_path / "cassettes").mkdir()
    text = (FIXTURES / "vcr_openai_stream.yaml").read_text()
    (tmp_path / "cassettes" / "order.yaml").write_text(text.replace('"created":', '"made":'))
    config = AnalysisConfig(recording_globs=("cassettes/*.yaml",), now=NOW)
    _, checks = run(tmp_path, config)
    assert checks["cassettes.fresh"].status == "warn"
    assert "age unknown" in checks["cassettes.fresh"].summary
    assert checks["cassettes.model_metadata"].status == "warn"
    assert "VCR.py cassettes carry no recording time" in checks["cassettes.model_metadata"].summary


# --------------------------------------------------------------------------- discovery


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("cassettes/**/*.json", "cassettes/a.json", True),
        ("cassettes/**/*.json", "cassettes/archive/old/a.json", True),
        ("cassettes/**/*.json", "other/a.json", False),
        ("cassettes/*.json", "cassettes/archive/a.json", False),
        ("**/*.jsonl", "replay.jsonl", True),
        ("./replay.jsonl", "replay.jsonl", True),
        ("cassettes/**", "cassettes/x/y.yaml", True),
        ("fixtures/[0-9a-f]*.json", "fixtures/8edb.json", True),
        ("fixtures/[!0-9]*.json", "fixtures/8edb.json", False),
        ("../secrets/*.json", "secrets/a.json", False),
    ],
)
def test_globs_follow_pathlib_rules(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def test_a_file_matched_by_several_roles_is_parsed_once_with_the_first_role(tmp_path: Path) -> None:
    (tmp_path / "ledger.jsonl").write_text('{"event": "model_call", "key": "abc"}\n')
    config = AnalysisConfig(
        recording_globs=("*.jsonl",),
        ledger_globs=("ledger.jsonl",),
        trace_globs=("*.txt",),
        now=NOW,
    )
    analyzer = Analyzer(tmp_path, config)
    reports = list(analyzer.files())
    assert [(r.path, r.role, r.result.format) for r in reports] == [
        ("ledger.jsonl", "ledger", "ledger")
    ]
    assert reports[0].size == len('{"event": "model_call", "key": "abc"}\n')
    assert len(reports[0].sha256) == 64
    assert analyzer.ledger_path == "ledger.jsonl" and len(analyzer.ledger) == 1
    assert any(f.kind == "glob_no_match" and f.severity == "info" for f in analyzer.findings)


def test_a_symlink_to_etc_passwd_is_skipped_with_a_finding(tmp_path: Path) -> None:
    write_cassette(tmp_path, cassette("hello"))
    (tmp_path / "cassettes" / "passwd.json").symlink_to("/etc/passwd")
    (tmp_path / "cassettes" / "outside").symlink_to("/etc", target_is_directory=True)
    analyzer, checks = run(tmp_path)
    assert [f.path for f in analyzer.facts] == [f"cassettes/{cassette('hello')['key']}.json"]
    skipped = {f.path for f in analyzer.findings if f.kind == "symlink_skipped"}
    assert skipped == {"cassettes/passwd.json", "cassettes/outside"}
    assert not any("passwd" in h.path for h in analyzer.secret_hits())
    assert checks["cassettes.keys_match"].status == "pass"


def test_a_fifo_matched_by_a_glob_is_not_read(tmp_path: Path) -> None:
    write_cassette(tmp_path, cassette("hello"))
    os.mkfifo(tmp_path / "cassettes" / "pipe.json")
    analyzer, _ = run(tmp_path)
    assert len(analyzer.facts) == 1
    assert any(f.kind == "not_regular_file" for f in analyzer.findings)


def test_a_broken_recording_is_a_finding_and_the_rest_is_analysed(tmp_path: Path) -> None:
    good = cassette("hello")
    write_cassette(tmp_path, good)
    (tmp_path / "cassettes" / "broken.json").write_text('{"key": "00ff", "request": {"model": ')
    analyzer, checks = run(tmp_path)
    assert [f.path for f in analyzer.facts] == [f"cassettes/{good['key']}.json"]
    broken = [f for f in analyzer.findings if f.path == "cassettes/broken.json"]
    assert broken and broken[0].severity == "error"
    assert checks["cassettes.keys_match"].status == "pass"


def test_an_oversized_file_is_a_finding_not_parsed(tmp_path: Path) -> None:
    from cassettes_app.limits import ParseLimits

    write_cassette(tmp_path, cassette("x" * 5000))
    config = AnalysisConfig(
        recording_globs=("cassettes/*.json",), limits=ParseLimits(max_file_bytes=1000), now=NOW
    )
    analyzer = Analyzer(tmp_path, config)
    (report,) = list(analyzer.files())
    assert report.size > 5000 and len(report.sha256) == 64
    assert [f.kind for f in analyzer.findings] == ["file_too_large"]


# --------------------------------------------------------------------------- secrets and threads


def test_secrets_are_found_in_every_text_file_but_not_in_binaries(tmp_path: Path) -> None:
    key = "sk-proj-FAKEq8Zr2LmT5vXc9NwB4hJ7kP3sD6fG1aQ0eRyUiOpZxCvBnM2FAKEtest"
    write_cassette(tmp_path, cassette("hello"))
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={key}\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" + key.encode())
    (tmp_path / "big.txt").write_text(f"{key}\n" + "x" * 2000)
    config = AnalysisConfig(
        recording_globs=("cassettes/*.json",), max_scan_file_bytes=1000, now=NOW
    )
    analyzer, checks = run(tmp_path, config)
    hits = list(analyzer.secret_hits())
    assert [(h.path, h.line) for h in hits] == [(".env", 1)]
    assert checks["cassettes.no_secrets"].status == "fail"
    assert key not in repr(checks["cassettes.no_secrets"])
    assert any(f.kind == "not_scanned" and f.path == "big.txt" for f in analyzer.findings)


def test_long_message_texts_are_capped_and_flagged(tmp_path: Path) -> None:
    write_cassette(tmp_path, cassette("y" * (TEXT_CAP + 500)))
    analyzer, _ = run(tmp_path)
    (thread,) = analyzer.threads()
    message = thread.turns[0].new_messages[0]
    assert message["truncated"] is True
    assert message["text"] == "y" * TEXT_CAP
    assert thread.turns[0].response == {
        "role": "assistant",
        "text": "ok 0",
        "tool_calls": [],
        "tool_results": [],
    }


# --------------------------------------------------------------------------- scale


@pytest.mark.scale
def test_two_thousand_small_recordings_analyse_in_a_few_seconds(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    for i in range(2000):
        doc = cassette(f"Ticket T-{i}: cannot log in", i=i)
        (folder / f"{doc['key']}.json").write_text(json.dumps(doc))
    start = time.perf_counter()
    analyzer, checks = run(tmp_path)
    threads = analyzer.threads()
    elapsed = time.perf_counter() - start
    assert len(analyzer.facts) == 2000 and len(threads) == 2000
    assert checks.pop("cassettes.provenance").status == "skip"  # a folder: no history
    assert {o.status for o in checks.values()} == {"pass"}
    assert elapsed < 6, f"took {elapsed:.1f}s"


@pytest.mark.scale
def test_memory_stays_flat_when_the_caller_drops_file_reports(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    # 2 MB of text per request, as content parts of one message (16 KB each).
    part = "lorem ipsum dolor sit amet " * 600
    total = 0
    for i in range(50):
        parts = [
            {"type": "text", "text": f"{i}.{j} {part}"} for j in range(2 * 2**20 // len(part) + 1)
        ]
        doc = cassette("", i=i)
        doc["request"]["messages"][0]["content"] = parts
        doc["key"] = recompute_key(doc["request"], VOLATILE)
        data = json.dumps(doc).encode()
        total += len(data)
        (folder / f"{doc['key']}.json").write_bytes(data)
    assert total >= 100 * 2**20
    gc.collect()
    tracemalloc.start()
    try:
        analyzer = Analyzer(tmp_path, CASSETTE)
        count = 0
        for report in analyzer.files():
            count += len(report.result.recordings)
            del report
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 50
    assert peak < 40 * 2**20, f"peak {peak / 2**20:.1f} MB"
    assert len(analyzer.exchanges) == 50


def test_a_request_carrying_earlier_unrecorded_turns_fails_per_turn(tmp_path: Path) -> None:
    doc = cassette("first question")
    history = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "third question"},
    ]
    doc["request"]["messages"] = history
    doc["key"] = recompute_key(doc["request"], VOLATILE)
    path = write_cassette(tmp_path, doc)
    analyzer, checks = run(tmp_path)
    assert analyzer.blobs == [(f"cassettes/{path.name}", 0)]
    assert checks["cassettes.per_turn"].status == "fail"
    assert path.name in checks["cassettes.per_turn"].summary


def test_an_anthropic_prefill_history_passes_per_turn(tmp_path: Path) -> None:
    """Every call recorded, each request ending with an assistant "{" that the model
    continues; the history holds prefill and reply as one turn."""
    history: list[dict] = []
    for n, question in enumerate(["checkout 500s", "only EU users", "fixed now"]):
        rest = f'"priority": "P{n + 1}"}}'
        request = {"model": "claude-3-5-haiku-20241022", "max_tokens": 64, "system": "JSON.",
                   "messages": [*history, {"role": "user", "content": question},
                                {"role": "assistant", "content": "{"}]}  # fmt: skip
        response = {"id": f"msg_{n}", "type": "message", "role": "assistant",
                    "model": "claude-3-5-haiku-20241022", "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": rest}],
                    "usage": {"input_tokens": 9, "output_tokens": 9}}  # fmt: skip
        doc = {"key": recompute_key(request, VOLATILE), "request": request,
               "response": response, "recorded_at": "2026-11-20T09:00:00Z"}  # fmt: skip
        write_cassette(tmp_path, doc, f"{n}.json")
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "{" + rest},
        ]
    analyzer, checks = run(tmp_path)
    assert analyzer.blobs == []
    assert checks["cassettes.per_turn"].status == "pass"


def test_a_naive_upload_time_is_read_as_utc() -> None:
    config = AnalysisConfig(now=dt.datetime(2026, 11, 29))
    assert config.now == NOW
