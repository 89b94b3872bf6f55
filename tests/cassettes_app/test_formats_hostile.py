"""Hostile recordings (security-and-reliability.md §2.3, P-01..P-13): a finding, fast, never a crash."""

from __future__ import annotations

import base64
import gzip
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import brotli
import pytest

from cassettes_app import formats, safeload
from cassettes_app.bodies import decode_body
from cassettes_app.formats import parse_file
from cassettes_app.limits import ParseLimits
from cassettes_app.parsed import ParsedFinding, ParseResult
from tests.paths import FIXTURES


@contextmanager
def in_bounded_time() -> Iterator[None]:
    """Hostile input is dealt with in bounded time: these run in ~0.5 s alone, and a linear
    pass must not turn quadratic. The bound leaves room for a machine busy with other work
    (the suite runs on two workers); speed itself is measured under bench/."""
    start = time.perf_counter()
    yield
    assert time.perf_counter() - start < 3.0


def parse(path: str, data: bytes, limits: ParseLimits | None = None) -> ParseResult:
    with in_bounded_time():
        return parse_file(path, data, limits or ParseLimits())


def only(result: ParseResult, kind: str | None = None) -> ParsedFinding:
    assert len(result.findings) == 1, result.findings
    finding = result.findings[0]
    if kind:
        assert finding.kind == kind
    return finding


def vcr_yaml(response_body: str, headers: str = "") -> bytes:
    return (
        "interactions:\n"
        "- request:\n"
        "    body: null\n"
        "    headers: {}\n"
        "    method: GET\n"
        "    uri: https://api.example.test/v1/x\n"
        "  response:\n"
        f"    body:\n      string: {response_body}\n"
        f"    headers:\n{headers or '      {}'}\n"
        "    status: {code: 200, message: OK}\n"
        "version: 1\n"
    ).encode()


def cassette(request: str = "{}", response: str = "{}") -> bytes:
    return f'{{"key": "0123456789abcdef", "request": {request}, "response": {response}}}'.encode()


# --- P-01 .. P-04: YAML ------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system",
        "!!python/object/new:os.system",
        "!!python/object/apply:subprocess.check_output",
    ],
)
def test_it_refuses_python_tags_and_runs_nothing(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    data = f"interactions:\n- request: {tag} ['touch {marker}']\n".encode()
    finding = only(parse("cassettes/evil.yaml", data), "parse_error")
    assert finding.message == f"unsafe YAML tag {tag}"
    assert finding.line == 2
    assert not marker.exists()


@pytest.mark.parametrize("tag", ["!!python/name:os.system", "!!python/module:os"])
def test_it_refuses_python_name_and_module_tags(tag: str) -> None:
    data = f"interactions:\n- request: {tag} ''\n".encode()
    assert only(parse("c.yaml", data)).message.startswith("unsafe YAML tag !!python/")


def test_it_stops_billion_laughs_before_expanding() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    data = ("interactions:\n" + "\n".join(lines) + "\n").encode()
    finding = only(parse("laughs.yaml", data), "parse_error")
    assert "max_yaml_nodes" in finding.message


def test_it_caps_the_alias_count() -> None:
    data = ("interactions: &x []\nrefs: [" + ", ".join(["*x"] * 101) + "]\n").encode()
    assert "max_yaml_aliases" in only(parse("aliases.yaml", data)).message


def test_it_refuses_recursive_aliases() -> None:
    assert "recursive" in only(parse("r.yaml", b"interactions: &x [*x]\n")).message


@pytest.mark.parametrize("depth", [300, 10_000])
def test_it_refuses_deep_yaml(depth: int) -> None:
    data = ("interactions: " + "[" * depth + "]" * depth + "\n").encode()
    assert "nest" in only(parse("deep.yaml", data), "parse_error").message


def test_yaml_1_1_header_scalars_are_coerced_with_a_finding() -> None:
    headers = "      X-Flag: on\n      X-No: NO\n      X-Mode: 0777\n      X-Time: 12:30:00"
    result = parse("quirks.yaml", vcr_yaml("ok", headers))
    interaction = result.recordings[0].interactions[0]
    assert interaction.response_headers == [
        ("X-Flag", "true"),
        ("X-No", "false"),
        ("X-Mode", "511"),
        ("X-Time", "45000"),
    ]
    assert [f.kind for f in result.findings] == ["yaml_coerced"] * 4
    assert "X-Time" in result.findings[3].message


# --- P-05 .. P-08, P-10: JSON ------------------------------------------------


@pytest.mark.parametrize("depth", [300, 10_000, 100_000])
def test_it_refuses_deep_json(depth: int) -> None:
    data = cassette(request="[" * depth + "]" * depth)
    assert "too deeply nested" in only(parse("cassettes/deep.json", data), "parse_error").message


def test_it_refuses_a_million_digit_integer() -> None:
    data = cassette(request='{"n": ' + "7" * 1_000_000 + "}")
    assert "max_int_digits" in only(parse("cassettes/big.json", data)).message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_it_refuses_non_finite_numbers(constant: str) -> None:
    finding = only(parse("cassettes/nan.json", cassette(response=f'{{"score": {constant}}}')))
    assert finding.kind == "parse_error"


def test_it_reports_duplicate_keys_in_the_file() -> None:
    data = cassette(response='{"status": 200, "status": 500}')
    assert only(parse("cassettes/dup.json", data)).message == "duplicate key 'status'"


def test_it_reports_duplicate_keys_inside_a_body_and_keeps_the_rest() -> None:
    body = '\'{"status": 200, "status": 500}\''
    result = parse("dup.yaml", vcr_yaml(body, "      Content-Type: [application/json]"))
    finding = only(result, "body_problem")
    assert "duplicate key 'status'" in finding.message
    assert result.recordings[0].interactions[0].response_body.json is None


def test_it_reports_invalid_utf8_with_its_line() -> None:
    data = b'{"key": "k",\n "request": {"a": "\xff\xfe"},\n "response": {}}'
    finding = only(parse("cassettes/bad.json", data), "parse_error")
    assert (finding.message, finding.line) == ("invalid UTF-8 at byte 32", 2)


def test_it_reports_invalid_utf8_in_a_yaml_cassette_with_its_line() -> None:
    data = vcr_yaml("'ok'").replace(b"method: GET", b"method: G\xffT")
    at = data.index(b"\xff")
    finding = only(parse("cassettes/bad.yaml", data), "parse_error")
    assert (finding.message, finding.line) == (f"invalid UTF-8 at byte {at}", 5)


def test_bad_stream_events_are_worded_as_bad_bodies_are() -> None:
    bad = ['{"a": 1, "a": 2}', '{"n": ' + "7" * 5000 + "}", '{"x": NaN}', "{nope}", '{"a": 1} 2']
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "hi"}}],
    }
    text = "".join(f"data: {event}\n\n" for event in [json.dumps(chunk), *bad, " {} "])
    body = decode_body(text, {"Content-Type": "text/event-stream"})
    expected = []
    for number, event in enumerate(bad, start=2):
        with pytest.raises(safeload.LoadError) as caught:
            safeload.load_json(event)
        expected.append(f"sse event {number}: {caught.value.message}")
    assert body.problems == tuple(expected)
    assert body.json["choices"][0]["message"]["content"] == "hi"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-32"])
def test_it_refuses_utf16_and_utf32(codec: str) -> None:
    data = cassette().decode().encode(codec)
    assert "encoded; expected UTF-8" in only(parse("cassettes/wide.json", data)).message


def test_loaders_raise_load_error_with_line() -> None:
    with pytest.raises(safeload.LoadError) as caught:
        safeload.load_json('{\n"a": 1,\n"b": }')
    assert caught.value.line == 3
    with pytest.raises(safeload.LoadError) as caught:
        safeload.load_yaml("a: 1\nb: [unclosed\n")
    assert caught.value.line is not None


def test_readers_of_a_loaded_document_take_only_the_expected_type() -> None:
    doc = {"usage": {"tokens": 3}, "meta": "text", "list": [1], "index": 2, "flag": "2"}
    assert safeload.object_at(doc, "usage") == {"tokens": 3}
    assert safeload.object_at(doc, "usage") is doc["usage"]  # the same object, not a copy
    assert [safeload.object_at(doc, k) for k in ("meta", "list", "missing")] == [{}, {}, {}]
    assert safeload.int_at(doc, "index", 0) == 2
    assert [safeload.int_at(doc, k, 7) for k in ("flag", "list", "missing")] == [7, 7, 7]


# --- P-09: JSON Lines ---------------------------------------------------------


def test_a_50_mb_line_is_skipped_and_the_rest_parsed() -> None:
    huge = b'{"url": "http://stub/orders", "method": "POST", "req": "' + b"a" * (50 << 20) + b'"}'
    good = b'{"url": "http://stub/orders/ord_1", "method": "GET", "status": 200}'
    result = parse("replay.jsonl", huge + b"\n" + good + b"\n")
    assert result.format == "trace"
    finding = only(result, "bad_line")
    assert finding.line == 1 and "max_line_bytes" in finding.message
    assert [(hop.line, hop.status) for hop in result.hops] == [(2, 200)]


def test_bad_trace_lines_are_findings_with_their_numbers() -> None:
    lines = [
        '{"url": "http://stub/orders", "method": "POST", "status": 201, "req": {}}',
        "not json at all",
        "[1, 2]",
        '{"url": "http://stub/orders", "method": "POST", "status": "teapot"}',
        '{"url": "http://stub/orders", "method": "post", "status": 200, "x": NaN}',
        "",
        '{"url": "http://stub/orders/1", "method": "GET", "status": 200}',
    ]
    result = parse("replay.jsonl", "\n".join(lines).encode())
    assert [(f.kind, f.line) for f in result.findings] == [
        ("bad_line", 2),
        ("bad_line", 3),
        ("bad_line", 4),
        ("bad_line", 5),
    ]
    assert [(h.line, h.status) for h in result.hops] == [(1, 201), (4, None), (7, 200)]


def test_too_many_lines_stop_at_max_events() -> None:
    data = b'{"event": "cache_hit"}\n' * 5000
    result = parse("ledger.jsonl", data, ParseLimits(max_events=1000))
    assert len(result.ledger) == 1000
    assert "max_events" in only(result, "bad_line").message


# --- P-11, P-12: bodies -------------------------------------------------------


def gzip_bomb(gigabytes: int = 1) -> bytes:
    """About 1 GB of zeros as concatenated gzip members: ~1 MB on disk, built in milliseconds."""
    member = gzip.compress(b"\0" * (1 << 20), mtime=0)
    return member * (1024 * gigabytes)


def test_a_1_gb_gzip_bomb_body_is_capped() -> None:
    encoded = base64.b64encode(gzip_bomb()).decode()
    data = json.dumps(
        {
            "interactions": [
                {
                    "request": {"method": "GET", "uri": "https://x.test/", "body": None},
                    "response": {
                        "status": {"code": 200, "message": "OK"},
                        "headers": {"Content-Encoding": ["gzip"]},
                        "body": {"base64_string": encoded},
                    },
                }
            ],
            "version": 1,
        }
    ).encode()
    result = parse("bomb.json", data)
    body = result.recordings[0].interactions[0].response_body
    assert body.truncated and len(body.data) == ParseLimits().max_body_bytes
    assert "max_body_bytes" in only(result, "body_problem").message


def test_a_single_member_gzip_bomb_in_yaml_binary_is_capped() -> None:
    bomb = gzip.compress(b"\0" * (8 << 20), mtime=0)
    b64 = base64.encodebytes(bomb).decode().replace("\n", "\n        ")
    data = vcr_yaml(f"!!binary |\n        {b64}", "      Content-Encoding: [gzip]")
    result = parse("bomb.yaml", data, ParseLimits(max_body_bytes=1 << 20))
    body = result.recordings[0].interactions[0].response_body
    assert body.truncated and len(body.data) == 1 << 20
    assert "max_body_bytes" in only(result).message


def test_a_brotli_bomb_is_capped() -> None:
    bomb = brotli.compress(b"\0" * (64 << 20), quality=1)
    data = vcr_yaml("!!binary " + base64.b64encode(bomb).decode(), "      Content-Encoding: [br]")
    result = parse("br.yaml", data, ParseLimits(max_body_bytes=1 << 20))
    assert result.recordings[0].interactions[0].response_body.truncated
    assert "max_body_bytes" in only(result).message


def test_a_truncated_gzip_body_is_kept_partially_with_a_finding() -> None:
    cut = gzip.compress(b'{"ok": true}' * 100, mtime=0)[:-12]
    data = vcr_yaml("!!binary " + base64.b64encode(cut).decode(), "      Content-Encoding: [gzip]")
    result = parse("cut.yaml", data)
    assert "truncated" in only(result, "body_problem").message
    assert result.recordings[0].interactions[0].response_body.data.startswith(b'{"ok": true}')


@pytest.mark.scale
def test_an_event_stream_of_a_million_events_is_capped() -> None:
    stream = 'data: {"seq": 1}\n\n' * 1_000_000
    with in_bounded_time():
        body = decode_body(stream, {"Content-Type": "text/event-stream"}, ParseLimits())
    assert body.truncated
    assert body.encoding_note == "sse: 100000 events (unrecognised stream)"
    assert any("max_events" in problem for problem in body.problems)


@pytest.mark.scale
def test_a_provider_stream_of_a_million_chunks_is_reassembled_up_to_the_cap() -> None:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "x"}}],
    }
    stream = f"data: {json.dumps(chunk)}\n\n" * 1_000_000
    with in_bounded_time():
        body = decode_body(
            stream, {"Content-Type": "text/event-stream"}, ParseLimits(max_events=10_000)
        )
    assert body.truncated
    assert body.json["choices"][0]["message"]["content"] == "x" * 10_000


# --- P-13 and file-level faults ----------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [{"log": {"version": "1.2"}}, {"log": {"entries": {"0": {}}}}, {"log": {"entries": None}}],
)
def test_har_without_an_entries_list_is_a_finding(doc: dict) -> None:
    finding = only(parse("rec.har", json.dumps(doc).encode()), "invalid_har")
    assert finding.message == "invalid HAR: entries must be a list"


def test_har_entry_without_a_request_is_skipped_with_a_finding() -> None:
    doc = {
        "log": {"entries": [{"response": {}}, {"request": {"method": "GET", "url": "http://x"}}]}
    }
    result = parse("rec.har", json.dumps(doc).encode())
    assert only(result, "invalid_har").message.startswith("entry 0")
    assert len(result.recordings[0].interactions) == 1


def test_a_truncated_yaml_gz_is_a_finding() -> None:
    data = (FIXTURES / "vcr_embeddings.yaml.gz").read_bytes()
    finding = only(parse("cassettes/cut.yaml.gz", data[: len(data) // 2]), "parse_error")
    assert "truncated" in finding.message


@pytest.mark.parametrize("data", [b"", b"  \n\t\n"])
def test_an_empty_file_is_a_finding(data: bytes) -> None:
    assert only(parse("cassettes/empty.json", data)).kind == "empty_file"


def test_a_binary_file_matched_by_a_glob_is_a_finding() -> None:
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    finding = only(parse("cassettes/screenshot.json", data), "unknown_format")
    assert "binary" in finding.message


def test_a_file_over_max_file_bytes_is_not_parsed() -> None:
    finding = only(
        parse("cassettes/big.json", cassette() + b" " * 2000, ParseLimits(max_file_bytes=1000))
    )
    assert finding.kind == "file_too_large"


def test_a_broken_interaction_does_not_hide_the_others() -> None:
    doc = {
        "interactions": [
            {"request": "not a mapping"},
            {
                "request": {"method": "GET", "uri": "http://x"},
                "response": {"status": {"code": 204}},
            },
        ]
    }
    result = parse("c.json", json.dumps(doc).encode())
    assert only(result, "invalid_structure").message.startswith("interaction 0")
    assert [i.status for i in result.recordings[0].interactions] == [204]


def test_the_registry_turns_any_parser_crash_into_a_finding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(path: str, data: bytes, limits: ParseLimits) -> ParseResult:
        raise RuntimeError("boom")

    monkeypatch.setattr(formats.vcr, "parse", explode)
    finding = only(parse("c.yaml", (FIXTURES / "vcr_split_layout.yaml").read_bytes()))
    assert (finding.kind, finding.severity) == ("parse_error", "error")
    assert "RuntimeError: boom" in finding.message


def test_a_sniffer_that_trips_does_not_stop_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    broken: Callable[[str, bytes], bool] = lambda path, head: 1 / 0  # noqa: E731
    monkeypatch.setattr(formats.cassette_json, "sniff", broken)
    assert parse("ledger.jsonl", b'{"event": "x"}\n').format == "ledger"
