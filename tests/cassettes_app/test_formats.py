"""Recording parsers, driven by the sample files in tests/fixtures/recordings/."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pytest

from cassettes_app.formats import (
    FORMATS,
    detect,
    parse_file,
    parse_path,
    vcr,
)
from cassettes_app.limits import ParseLimits
from cassettes_app.parsed import ParseResult
from tests.paths import FIXTURES, ROOT

CASSETTE_KEY = "ed9c62e0ac547b69"


def load(name: str) -> ParseResult:
    return parse_file(name, (FIXTURES / name).read_bytes())


def header(pairs: list[tuple[str, str]], name: str) -> str | None:
    return next((value for key, value in pairs if key.lower() == name.lower()), None)


SAMPLES = [
    # (file, format, recordings, interactions in the first recording)
    (f"cassettes/{CASSETTE_KEY}.json", "cassette_json", 1, 1),
    ("run_twice_inputs.json", "fixture_json", 1, 3),
    ("run_twice_single.json", "fixture_json", 1, 1),
    ("vcr_anthropic_messages.json", "vcr", 1, 1),
    ("vcr_gemini_gzip_body.yaml", "vcr", 1, 1),
    ("vcr_httpx_legacy.yaml", "vcr", 1, 1),
    ("vcr_split_layout.yaml", "vcr", 1, 2),
    ("vcr_embeddings.yaml.gz", "vcr", 1, 1),
    ("vcr_openai_stream.yaml", "vcr", 1, 1),
    ("vcr_anthropic_stream.yaml", "vcr", 1, 1),
    ("vcr_openai_responses_stream.yaml", "vcr", 1, 1),
    ("vcr_base64_body.json", "vcr", 1, 1),
    ("vcr_brotli_body.yaml", "vcr", 1, 1),
    ("vcr_binary_png.yaml", "vcr", 1, 1),
    ("vcr_legacy_python_tags.yaml", "vcr", 1, 2),
    ("betamax_cassette.json", "vcr", 1, 1),
    ("firefox_with_bom.har", "har", 1, 1),
    ("polly_recording.har", "har", 1, 2),
    ("agent_pairs_gemini.jsonl", "agent_log", 1, 2),
    ("replay.jsonl", "trace", 0, 0),
    ("ledger.jsonl", "ledger", 0, 0),
    ("agent_anthropic.jsonl", "agent_log", 1, 2),
]


@pytest.mark.parametrize(("name", "fmt", "recordings", "interactions"), SAMPLES)
def test_each_sample_is_detected_and_parsed_without_findings(
    name: str, fmt: str, recordings: int, interactions: int
) -> None:
    result = load(name)
    assert result.format == fmt
    assert result.findings == []
    assert len(result.recordings) == recordings
    if recordings:
        assert result.recordings[0].format == fmt
        assert result.recordings[0].path == name
        assert len(result.recordings[0].interactions) == interactions


def test_every_sample_file_is_covered() -> None:
    covered = {name for name, *_ in SAMPLES} | {"agent_openai.jsonl", "not_a_recording.yml"}
    on_disk = {
        str(path.relative_to(FIXTURES))
        for path in FIXTURES.rglob("*")
        if path.is_file() and path.suffix != ".py"
    }
    assert on_disk == covered


def test_registry_lists_each_format_once_with_the_shared_interface() -> None:
    names = [module.NAME for module in FORMATS]
    assert len(names) == len(set(names))
    # Every module of the package with a sniff is a reader, and every reader is listed.
    modules = [
        importlib.import_module(f"cassettes_app.formats.{p.stem}")
        for p in (ROOT / "cassettes_app" / "formats").glob("*.py")
    ]
    assert {m for m in modules if hasattr(m, "sniff")} == set(FORMATS)
    for module in FORMATS:
        assert callable(module.sniff) and callable(module.parse)


def test_detect_picks_the_module_from_the_head_only() -> None:
    head = (FIXTURES / "vcr_embeddings.yaml.gz").read_bytes()
    assert detect("cassettes/x.yaml.gz", head) is vcr
    assert detect("anything.bin", b"\x89PNG\r\n\x1a\n\x00\x00") is None


def test_cassette_task_file() -> None:
    recording = load(f"cassettes/{CASSETTE_KEY}.json").recordings[0]
    assert recording.key == CASSETTE_KEY
    assert recording.model == "gpt-4o-mini-2024-07-18"
    assert recording.recorded_at == "2025-02-03T11:35:12Z"
    interaction = recording.interactions[0]
    assert (interaction.method, interaction.url, interaction.status) == ("POST", None, None)
    request = interaction.request_body.json
    assert request["messages"][1]["content"].startswith("Checkout returns HTTP 502")
    call = interaction.response_body.json["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "create_ticket"
    assert json.loads(call["function"]["arguments"])["severity"] == "critical"
    # The sample is realistic: its key is the canonical-request hash the task defines.
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert hashlib.sha256(canonical.encode()).hexdigest()[:16] == CASSETTE_KEY


def test_run_twice_fixtures() -> None:
    listed = load("run_twice_inputs.json").recordings[0]
    assert [i.request_body.text for i in listed.interactions][2] == "Please add dark mode."
    assert listed.interactions[0].extra == {"id": "t1"}
    assert listed.model is None and listed.recorded_at is None
    single = load("run_twice_single.json").recordings[0]
    assert single.model == "claude-3-5-haiku-20241022"
    assert single.recorded_at == "2025-01-28T08:02:44Z"
    assert single.interactions[0].response_body.json["component"] == "email"


def test_vcr_json_cassette_with_anthropic_tool_use() -> None:
    recording = load("vcr_anthropic_messages.json").recordings[0]
    assert recording.model == "claude-3-5-sonnet-20241022"
    # VCR.py writes no timestamp; the response's Date header is the recording's time.
    assert recording.recorded_at == "2025-02-06T16:20:05Z"
    assert recording.meta["time_source"] == "the response Date header"
    assert recording.meta["serialization"] == "json"
    interaction = recording.interactions[0]
    assert interaction.url == "https://api.anthropic.com/v1/messages"
    assert interaction.status == 200
    assert header(interaction.request_headers, "anthropic-version") == "2023-06-01"
    tool_use = interaction.response_body.json["content"][1]
    assert tool_use["input"] == {"sku": "SKU-123", "qty": 2}


def test_vcr_yaml_gzip_body_stored_as_binary_is_decompressed() -> None:
    recording = load("vcr_gemini_gzip_body.yaml").recordings[0]
    assert recording.model == "gemini-2.0-flash"
    body = recording.interactions[0].response_body
    assert "gzip" in body.encoding_note
    assert not body.is_binary and not body.truncated
    part = body.json["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(part) == {"severity": "high", "component": "checkout"}
    assert body.content_type == "application/json; charset=UTF-8"


def test_old_httpx_layout_with_content_and_status_code() -> None:
    interaction = load("vcr_httpx_legacy.yaml").recordings[0].interactions[0]
    assert interaction.status == 200
    assert interaction.extra["response_http_version"] == "HTTP/1.1"
    body = interaction.response_body
    # httpx stored decoded text while the header still says gzip.
    assert "not compressed" in body.encoding_note
    assert body.json["choices"][0]["message"]["content"].startswith("Customer waiting")


def test_split_requests_responses_layout() -> None:
    recording = load("vcr_split_layout.yaml").recordings[0]
    assert recording.meta["layout"] == "split"
    first, second = recording.interactions
    assert (first.method, first.status, first.request_body.data) == ("GET", 200, b"")
    assert first.url.endswith("/issues?state=open&per_page=2")
    assert (second.method, second.status) == ("POST", 201)
    assert second.extra["status_message"] == "Created"
    assert second.response_body.json["number"] == 42


def test_gzipped_cassette_file() -> None:
    recording = load("vcr_embeddings.yaml.gz").recordings[0]
    assert recording.meta["compressed"] == "gzip"
    assert recording.model == "text-embedding-3-small"
    data = (FIXTURES / "vcr_embeddings.yaml.gz").read_bytes()
    assert vcr.parse("x.yaml.gz", data, ParseLimits()).recordings[0].meta["compressed"] == "gzip"


def test_openai_sse_stream_is_reassembled_with_tool_calls() -> None:
    recording = load("vcr_openai_stream.yaml").recordings[0]
    assert recording.model == "gpt-4o-mini-2024-07-18"
    assert recording.meta["models"] == ["gpt-4o-mini-2024-07-18", "gpt-4o-mini"]
    body = recording.interactions[0].response_body
    assert body.encoding_note == "sse: 17 events"
    assert body.text.startswith("data: ")
    completion = body.json
    assert completion["object"] == "chat.completion"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_Qm1", "call_Qm2"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"sku": "SKU-123", "qty": 2},
        {"sku": "SKU-77", "qty": 1},
    ]
    assert completion["usage"]["total_tokens"] == 125


def test_anthropic_sse_stream_without_final_newline_is_reassembled() -> None:
    body = load("vcr_anthropic_stream.yaml").recordings[0].interactions[0].response_body
    assert body.encoding_note == "sse: 13 events"
    message = body.json
    assert message["type"] == "message"
    assert message["content"] == [
        {"type": "text", "text": "Placing the order now."},
        {
            "type": "tool_use",
            "id": "toolu_01T1x",
            "name": "create_order",
            "input": {"sku": "SKU-123", "qty": 2},
        },
    ]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {"input_tokens": 472, "output_tokens": 89}


def test_openai_responses_stream_is_reassembled() -> None:
    body = load("vcr_openai_responses_stream.yaml").recordings[0].interactions[0].response_body
    response = body.json
    assert response["status"] == "completed"
    message, call = response["output"]
    assert message["content"][0]["text"] == "Ordering SKU-123."
    assert (call["name"], json.loads(call["arguments"])) == (
        "create_order",
        {"sku": "SKU-123", "qty": 2},
    )


def test_base64_and_brotli_bodies() -> None:
    b64 = load("vcr_base64_body.json").recordings[0].interactions[0].response_body
    assert b64.encoding_note == "base64; json"
    assert b64.json["data"][0]["embedding"] == [0.0123, -0.0456, 0.0789]
    br = load("vcr_brotli_body.yaml").recordings[0].interactions[0].response_body
    assert br.encoding_note == "br; json"
    assert br.json["model"] == "text-embedding-3-small"


def test_binary_body_is_kept_as_bytes() -> None:
    interaction = load("vcr_binary_png.yaml").recordings[0].interactions[0]
    body = interaction.response_body
    assert body.is_binary
    assert body.data.startswith(b"\x89PNG\r\n\x1a\n")
    assert (body.text, body.json, body.content_type) == (None, None, "image/png")
    assert interaction.request_body.data == b""


def test_legacy_vcrpy_python_tags_load_through_explicit_constructors() -> None:
    first, second = load("vcr_legacy_python_tags.yaml").recordings[0].interactions
    assert first.method == "POST"
    assert first.request_headers == [("Content-Type", "application/json")]
    assert first.request_body.json["messages"][0]["content"] == "ping"  # from BytesIO
    assert first.response_body.json["choices"][0]["message"]["content"] == "pong"
    assert second.request_body.json == {"q": "refund"}  # from builtins.iter


def test_vcr_yaml_anchors_aliases_and_merge_keys_load() -> None:
    # PyYAML's dumper writes an object met twice as &id001 ... *id001.
    data = b"""interactions:
- request:
    body: null
    headers: &id001
      Accept: [application/json]
    method: GET
    uri: https://api.example.test/v1/a
  response: &base
    body: {string: '{"ok": true}'}
    headers: {Content-Type: [application/json]}
    status: {code: 200, message: OK}
- request:
    body: null
    headers: *id001
    method: GET
    uri: https://api.example.test/v1/b
  response:
    <<: *base
    status: {code: 404, message: Not Found}
version: 1
"""
    result = parse_file("cassettes/shared.yaml", data)
    assert result.findings == []
    first, second = result.recordings[0].interactions
    assert first.request_headers == second.request_headers == [("Accept", "application/json")]
    assert (first.status, second.status) == (200, 404)
    assert second.response_body.json == {"ok": True}


def test_betamax_cassette_keeps_its_recorded_at() -> None:
    recording = load("betamax_cassette.json").recordings[0]
    assert recording.recorded_at == "2024-11-02T09:14:55"
    assert recording.interactions[0].recorded_at == "2024-11-02T09:14:55"
    assert recording.meta["recorded_with"] == "betamax/0.9.0"
    assert recording.interactions[0].response_body.json["content"][0]["text"] == "critical"


def test_har_with_bom() -> None:
    recording = load("firefox_with_bom.har").recordings[0]
    interaction = recording.interactions[0]
    assert (interaction.method, interaction.status) == ("POST", 200)
    assert interaction.recorded_at == "2025-01-15T14:27:14.118+01:00"
    assert interaction.duration_ms == 812.4
    # HAR text is already decoded even though the header says br.
    assert interaction.response_body.json["choices"][0]["finish_reason"] == "stop"
    assert interaction.request_body.json["model"] == "gpt-4o-mini"
    assert recording.model == "gpt-4o-mini-2024-07-18"


def test_polly_har_keeps_polly_fields() -> None:
    recording = load("polly_recording.har").recordings[0]
    assert recording.meta["recording_name"] == "shop agent/creates one order"
    assert recording.meta["creator"]["name"] == "Polly.JS"
    model_call, order = recording.interactions
    assert model_call.extra["_id"] == "8d3f9a0c2b7e4f1d6a5c3b2e1f0a9d8c"
    assert model_call.extra["_order"] == 0
    assert model_call.response_body.json["content"][0]["name"] == "create_order"
    assert order.status == 201
    assert header(order.request_headers, "Idempotency-Key") == "idem-0b6f2c"
    assert order.response_body.encoding_note == "base64; json"
    assert order.response_body.json["id"] == "ord_9b1d3e"


def test_trace_hops() -> None:
    hops = load("replay.jsonl").hops
    assert [h.line for h in hops] == [1, 2, 3, 4]
    assert [h.status for h in hops] == [200, 201, 200, 200]
    assert {h.trace_id for h in hops} == {"tr_8f2c1a"}
    key = "idem-7d1e4a90-5b2c-4f83-9a61-0c3e8b2d4f17"
    # Lower-case and canonical header spellings are both found.
    assert [h.idempotency_key for h in hops] == [None, key, key, None]
    assert hops[1].req == {"sku": "SKU-123", "qty": 2}
    assert hops[1].resp["id"] == "ord_5f3a9c"
    assert (hops[3].method, hops[3].req) == ("GET", None)
    assert ("Content-Type", "application/json") in hops[1].request_headers


def test_ledger_entries() -> None:
    entries = load("ledger.jsonl").ledger
    assert [e.event for e in entries] == [
        "model_call",
        "cache_hit",
        "model_call",
        "model_call",
        "fallback",
    ]
    assert entries[4].line == 5
    assert entries[4].data["needs_human"] is True


def test_openai_agent_log_flags_invalid_tool_arguments() -> None:
    result = load("agent_openai.jsonl")
    assert result.format == "agent_log"
    messages = result.messages
    assert [m.role for m in messages][:4] == ["system", "user", "assistant", "tool"]
    first = messages[2].tool_calls[0]
    assert (first.id, first.name, first.arguments, first.arguments_valid) == (
        "call_a1",
        "create_order",
        {"sku": "SKU-123", "qty": 2},
        True,
    )
    assert messages[3].tool_call_id == "call_a1"
    broken = messages[4].tool_calls[0]
    assert not broken.arguments_valid
    assert broken.arguments == '{"sku": "SKU-9", "qty": '
    assert [(f.kind, f.line) for f in result.findings] == [("invalid_tool_arguments", 5)]
    as_object = messages[6].tool_calls[0]
    assert (as_object.arguments, as_object.arguments_raw) == ({"sku": "SKU-9", "qty": 1}, None)


def test_anthropic_agent_log() -> None:
    messages = load("agent_anthropic.jsonl").messages
    assert len(messages) == 4
    call = messages[1].tool_calls[0]
    assert (call.id, call.name, call.arguments) == (
        "toolu_01A",
        "create_order",
        {"sku": "SKU-123", "qty": 2},
    )
    assert messages[2].tool_call_id == "toolu_01A"
    assert messages[3].role == "assistant"  # unwrapped from {"type", "message"}
    assert messages[3].content[0]["text"].startswith("Done")


def test_a_transcript_is_read_as_its_model_calls() -> None:
    from cassettes_app.analysis.turns import body_payload
    from cassettes_app.providers import normalise

    first, second = load("agent_anthropic.jsonl").recordings[0].interactions
    exchanges = [
        normalise(body_payload(i.request_body), body_payload(i.response_body), i.url)
        for i in (first, second)
    ]
    assert [e.provider for e in exchanges] == ["anthropic", "anthropic"]
    assert [c.name for c in exchanges[0].response.tool_calls] == ["create_order"]
    # The second call's request is the first one's, its reply and the tool's result.
    assert len(second.request_body.json["messages"]) == 3
    assert second.request_body.json["messages"][:2] == [
        *first.request_body.json["messages"],
        {"role": "assistant", "content": first.response_body.json["content"]},
    ]
    assert exchanges[1].response.text.startswith("Done")


def test_agent_log_request_response_pairs_become_interactions() -> None:
    recording = load("agent_pairs_gemini.jsonl").recordings[0]
    assert recording.model == "gemini-1.5-flash-002"
    assert recording.recorded_at == "2025-02-11T09:30:00Z"
    first = recording.interactions[0]
    assert (first.method, first.status) == ("POST", 200)
    part = first.response_body.json["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["args"] == {"sku": "SKU-123", "qty": 2}


def test_unrecognised_yaml_is_a_finding() -> None:
    result = load("not_a_recording.yml")
    assert [(f.kind, f.severity) for f in result.findings] == [("unknown_format", "warn")]


def test_parse_path_reads_regular_files_only(tmp_path: Path) -> None:
    result = parse_path(str(FIXTURES / "ledger.jsonl"), "ledger.jsonl")
    assert len(result.ledger) == 5
    link = tmp_path / "link.jsonl"
    link.symlink_to(FIXTURES / "ledger.jsonl")
    assert parse_path(str(link)).findings[0].kind == "parse_error"  # links are not followed


@pytest.mark.parametrize(
    ("first_line", "fmt"),
    [
        ({"url": "http://stub/orders", "method": "POST", "status": 201, "req": {}}, "trace"),
        ({"event": "cache_hit", "key": "k"}, "ledger"),
        ({"type": "fallback", "reason": "timeout"}, "ledger"),
        ({"role": "user", "content": "hi"}, "agent_log"),
        ({"request": {}, "response": {}, "url": "http://x", "method": "POST"}, "agent_log"),
        ({"type": "user", "message": {"role": "user", "content": "hi"}}, "agent_log"),
    ],
)
def test_jsonl_kinds_are_told_apart_by_first_line_keys(first_line: dict, fmt: str) -> None:
    data = (json.dumps(first_line) + "\n" + json.dumps(first_line) + "\n").encode()
    assert parse_file("logs/run.jsonl", data).format == fmt


def test_ledger_name_wins_over_keys() -> None:
    data = b'{"event": "model_call", "request": {}, "response": {}}\n'
    assert parse_file("out/ledger.jsonl", data).format == "ledger"
    assert parse_file("out/calls.jsonl", data).format == "agent_log"


def test_format_hint_skips_sniffing() -> None:
    data = b'{"event": "model_call", "url": "http://x", "method": "POST"}\n'
    assert parse_file("x.jsonl", data).format == "trace"
    assert parse_file("x.jsonl", data, format_hint="ledger").format == "ledger"
