"""The analysis job's shortcuts give the results the long way gives.

Secret profiles (a rule whose literal a file lacks is skipped for the file and its bodies),
the text scan of recordings done while parsing, turn texts spooled to disk, turn counts
written with their recordings, and bounded INSERT statement shapes.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cassettes_app import secrets
from cassettes_app.analysis import AnalysisConfig, Analyzer
from cassettes_app.bodies import ascii_json, decode_body
from cassettes_app.keys import canonical_request, recompute_key
from cassettes_app.secrets import profiles
from submissions.assignments import assignment_values
from submissions.blobs import blob_read
from submissions.models import Blob, Interaction, Recording, Turn
from tests.conftest import ingest_inline

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
VOLATILE = ("user", "request_id", "id", "created")
KEY = "sk-proj-" + "Zx8Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc3Vb5Nm7Qa9Ws2Ed4Rf6Tg8Yh"
GH = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
SAMPLES = [
    "",
    "plain words only, nothing to see",
    f"my key is {KEY} please",
    f"token: {GH}\nnext line",
    "Authorization: Bearer abcdefghijklmnopqrstuvwx12345",
    'api_key = "Qm9vbGVhbjEyMzQ1Njc4OTA"',
    "password: hunter22 and pwd=s3cr3tV4lu3",
    "cookie: sid=abcdefgh12345678; theme=dark",
    "see https://user:pa55word@example.com/x?key=AbCdEf123456&sig=zz",
    "hooks.slack.com/services/T0000000/B0000000/abcdefghijklmnopqrstuvwx",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + "x1Y2z3" * 20 + "\n-----END RSA",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLE AKIAQWERTYUIOPASDFGH",
    "xoxb-123456789012-abcdefghijklmnop hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "\u212aey: T\u212aoken=zzzzzzzzzzzzzzzzzzzzzzzz İstanbul",  # Kelvin sign lowers to k
    "secret_token=ab" * 30,
    '{"max_tokens": 64, "usage": {"prompt_tokens": 9, "total_tokens": 12}}',
    "TOKENS: Zq8s7Hk2Lm4Np6Rt9Vw3Xy5 tokens-left=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5 max tokens.",
    '{"prompt_tokens": 9, "access_tokens_key": "Zq8s7Hk2Lm4Np6Rt9Vw3Xy5"}',
    '{"prompt_tokens": 9} my_tokens\ttoken=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5',
]


@pytest.mark.parametrize("text", SAMPLES)
def test_a_profiled_scan_finds_what_the_plain_scan_finds(text: str) -> None:
    hits, profile = secrets.scan_and_profile(text, "f.txt")
    assert hits == secrets.scan_text(text, "f.txt")
    assert secrets.scan_text(text, "f.txt", profile=profile) == hits
    assert secrets.redact_text(text, profile=profile) == secrets.redact_text(text)
    if profile.empty:
        assert not hits and secrets.redact_text(text) == text


def _file_and_bodies(value: object, *, indent: int | None = None) -> tuple[str, list[str]]:
    """A cassette file's text and its bodies as the parser re-serialises them."""
    doc = {"key": "k", "request": value, "response": {"choices": [value]}}
    text = json.dumps(doc, indent=indent)
    return text, [json.dumps(doc["request"], ensure_ascii=False), json.dumps(doc["response"])]


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("text", SAMPLES)
def test_a_body_redacted_with_its_files_profile_is_redacted_in_full(
    text: str, indent: int | None
) -> None:
    file_text, bodies = _file_and_bodies({"messages": [{"content": text}], "token": text[:30]})
    profile = secrets.text_profile(file_text)
    for body in bodies:
        assert secrets.redact_text(body, profile=profile) == secrets.redact_text(body)


def test_a_pretty_printed_credential_the_file_scan_misses_is_still_redacted() -> None:
    # `"token":` then a newline: the file's text has no `token: value` on one line, the
    # re-serialised body does. The profile only says `token` occurs, which it does.
    file_text = json.dumps({"request": {"token": "Zq8s7Hk2Lm4Np6Rt9Vw3"}}, indent=4)
    file_text = file_text.replace('"token": ', '"token":\n            ')
    body = json.dumps(json.loads(file_text)["request"])
    assert secrets.scan_text(file_text, "f.json") == []
    redacted = secrets.redact_text(body, profile=secrets.text_profile(file_text))
    assert "Zq8s7Hk2Lm4Np6Rt9Vw3" not in redacted
    assert redacted == secrets.redact_text(body)


def test_usage_counts_alone_leave_the_token_rule_out() -> None:
    usage = '{"usage": {"prompt_tokens": 9, "completion_tokens": 3}, "max_tokens": 64}'
    assert secrets.text_profile(usage).empty
    assert not secrets.text_profile(usage.replace("max_tokens", "max_tokens_x")).empty
    assert not secrets.text_profile("\u212aey tokens: 1").empty  # not ASCII: kept


def test_a_string_ending_in_tokens_keeps_the_token_rule_for_the_text_it_joins() -> None:
    # A stream's deltas are joined into one turn text: "my_tokens" + "_key=..." is a name
    # the rule does not skip, though the file only shows `tokens"`.
    deltas = ["my_tokens", "_key=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5"]
    file_text = json.dumps({"usage": {"prompt_tokens": 9}, "deltas": deltas})
    joined = "".join(deltas)
    profile = secrets.text_profile(file_text)
    assert secrets.redact_text(joined, profile=profile) == secrets.redact_text(joined)
    assert "Zq8s7Hk2Lm4Np6Rt9Vw3Xy5" not in secrets.redact_text(joined)


def test_an_empty_profile_means_no_rule_can_fire() -> None:
    profile = secrets.text_profile("w1 w2 w3 plain words")
    assert profile.empty
    assert secrets.redact_text(f"{KEY}", profile=profile) == KEY  # trusted: caller's promise
    assert not secrets.text_profile(KEY).empty


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": "plain", "b": [1, 2.5, true, null]}',
        b'{"a": "tab\\there \\"quoted\\" back\\\\slash \\/ slash"}',
    ],
)
def test_ascii_sources_serialise_the_same_on_the_fast_path(raw: bytes) -> None:
    value = json.loads(raw)
    assert ascii_json(raw)
    fast = decode_body(value, None, ascii_values=True)
    assert fast == decode_body(value, None)


@pytest.mark.parametrize(
    "raw", ['{"a": "caf\u00e9"}'.encode(), b'{"a": "\\u00e9"}', b'{"a": "del\x7f"}']
)
def test_sources_that_may_hold_other_characters_are_not_ascii(raw: bytes) -> None:
    assert not ascii_json(raw)


@pytest.mark.parametrize(
    "payload",
    [
        {"model": "m", "messages": [{"role": "user", "content": "plain"}], "id": 3},
        {"content": "caf\u00e9 \u4e2d"},  # not ASCII: made again with the other encoder
        {"content": "del\x7f bell\x07 nl\n"},
        {"content": "lone \ud800 surrogate"},
        {"content": "a backslash-u: \\u0041", "n": [1.5, True, None]},
    ],
)
def test_a_canonical_request_is_the_same_text_on_the_ascii_path(payload: dict) -> None:
    for volatile in ((), VOLATILE):
        plain = canonical_request(payload, volatile)
        assert canonical_request(payload, volatile, ascii_likely=True) == plain
        assert recompute_key(payload, volatile, ascii_likely=True) == recompute_key(
            payload, volatile
        )


def _brief_key_text(value: object) -> bytes:
    """The brief's canonical request, as its sample harness writes it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def _random_json(rng: random.Random, depth: int = 0) -> object:
    """A value json.loads (or a YAML reader) could give: every kind, odd characters, floats
    of every size, integers past 64 bits, keys that sort by code point."""
    pick = rng.randrange(12 if depth < 4 else 7)
    if pick == 0:
        return rng.choice([None, True, False])
    if pick == 1:
        return rng.choice([0, -1, 7, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**70)])
    if pick == 2:
        magnitude = 10 ** rng.uniform(-9, 22)
        return rng.choice([1, -1]) * rng.choice([magnitude, round(magnitude, 2), 0.0, -0.0])
    if pick == 3:
        return rng.choice([float("nan"), float("inf"), 1e16, 1e-5, 0.0001, 123456789.125])
    if pick in (4, 5, 6):
        alphabet = [chr(c) for c in range(0, 0x80)] + ["\u00e9", "\u2028", "\ud800", "\U0001f600"]
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    if pick in (7, 8):
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if pick == 9:
        return (1, "tuple")  # not from JSON: json writes a list, and so must the key
    keys = ["a", "B", "b", "\u00e9", "e", "", "\x7f", "\U0001f600", "\uffff"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(0, 6))}


def test_the_canonical_request_is_the_briefs_text_whichever_encoder_writes_it() -> None:
    """Keys must hash exactly what the brief's harness hashes: on thousands of random
    requests (floats with and without an exponent, NaN, huge integers, lone surrogates,
    non-ASCII keys, deep nesting) the canonical text and key are the brief's."""
    rng = random.Random(32)
    deep: object = "bottom"
    for _ in range(100):
        deep = {"k": [deep]}
    payloads = [{"messages": [_random_json(rng) for _ in range(3)], "x": _random_json(rng)}]
    payloads += [_random_json(rng) for _ in range(3000)] + [deep]
    for payload in payloads:
        for volatile in ((), VOLATILE):
            value = (
                {k: v for k, v in payload.items() if k not in volatile}
                if isinstance(payload, dict)
                else payload
            )
            want = _brief_key_text(value)
            assert canonical_request(payload, volatile).encode("utf-8", "surrogatepass") == want
            assert recompute_key(payload, volatile, 64) == hashlib.sha256(want).hexdigest()


def test_a_json_value_body_is_jsons_text_whichever_encoder_writes_it() -> None:
    """A body recorded as a JSON value is stored as json.dumps writes it (its digest names
    the blob): on thousands of random values (quotes, backslashes, commas and colons inside
    strings and keys, escaped quotes after backslash runs, floats, NaN, huge integers, lone
    surrogates) the stored bytes and text are json's."""
    rng = random.Random(7)
    tricky = ["\\", '"', ",", ":", '\\"', '\\\\"', '", "', '": "', "\u00e9", "\ud800"]
    seen = 0
    for _ in range(6000):
        value = _random_json(rng)
        if isinstance(value, dict):
            value[rng.choice(tricky)] = rng.choice(tricky) * rng.randrange(1, 4)
        if not isinstance(value, dict | list):
            continue
        want = json.dumps(value, ensure_ascii=False)
        body = decode_body(value, None)
        assert body.data == want.encode("utf-8", "surrogatepass")
        assert body.text == want and body.json is value
        raw = json.dumps(value).encode()
        if ascii_json(raw):
            assert decode_body(value, None, ascii_values=True) == body
        seen += 1
    assert seen > 1000


# --------------------------------------------------------------------------- the analyser


def _turn_texts(text: str) -> list[dict[str, Any]]:
    """Messages of a turn carrying `text` wherever one can: text, tool arguments (a JSON
    string, a key, a nested value) and a tool result."""
    from cassettes_app.analysis.turns import message_dict
    from cassettes_app.providers import Message, ToolCall, ToolResult

    calls = [
        ToolCall("c1", "lookup", {text: {"deep": [text]}}, json.dumps({"q": text}), True),
        ToolCall("c2", "raw", text, text, False),
    ]
    return [
        message_dict(Message(role="user", text=text, tool_calls=[], tool_results=[], raw=None)),
        message_dict(
            Message(
                role="assistant",
                text="",
                tool_calls=calls,
                tool_results=[ToolResult("c1", text, False, "lookup")],
                raw=None,
            )
        ),
    ]


# A file's URL and headers alone put rules in its profile that its messages may not need.
_ENVELOPE = "POST https://api.openai.com/v1/chat/completions?x=1 Authorization: [redacted]"


# The Kelvin sign lowers to k: json's ASCII text writes it as an escape, out of sight.
HIDDEN = ["to\u212aen=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5", "plain \\u006ben=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5"]


@pytest.mark.parametrize("dump", ["orjson", "json-ascii", "json"])
@pytest.mark.parametrize("text", [*SAMPLES, *HIDDEN])
def test_a_turn_redacted_with_its_own_texts_profile_is_redacted_in_full(
    text: str, dump: str
) -> None:
    """Narrowing a file's profile to the literals of a turn's JSON text never changes what
    redaction leaves: whichever encoder wrote the JSON (orjson's literal UTF-8, or json's
    ASCII with `\\u` escapes, which hide letters and so narrow nothing)."""
    import orjson

    messages = _turn_texts(text)
    for message in messages:
        if dump == "orjson":
            data = orjson.dumps(message).decode()
        else:
            data = json.dumps(message, ensure_ascii=dump == "json-ascii")
        # The file's profile is trusted only where the file holds the strings literally
        # (`_turn_profile`), as its literal text here does.
        file_text = f"{_ENVELOPE}\n{json.dumps(message, ensure_ascii=False)}"
        for within in (secrets.text_profile(file_text), None):
            narrowed = secrets.json_text_profile(data, within)
            want = secrets.redact_message(message)
            assert secrets.redact_message(json.loads(data), profile=narrowed) == want


def test_a_turn_profile_keeps_only_the_rules_its_text_can_fire() -> None:
    plain = json.dumps({"role": "user", "text": "w1 w2 plain words"})
    envelope = secrets.text_profile(_ENVELOPE)
    assert not envelope.empty  # `api`, `://`, `=`, `authorization`
    assert secrets.json_text_profile(plain, envelope) == profiles.TextProfile(
        frozenset(), frozenset()
    )
    assert secrets.json_text_profile(plain, None) == secrets.text_profile(plain)
    keyed = json.dumps({"role": "user", "text": f"here: {KEY}"})
    narrowed = secrets.json_text_profile(keyed, envelope._replace(providers=frozenset({0})))
    assert narrowed is not None and narrowed.providers == frozenset({0})
    # An escape that can stand for a letter (or a slash) narrows nothing.
    hidden = '{"text": "to\\u006ben=Zq8s7Hk2Lm4Np6Rt9Vw3Xy5 https:\\/\\/x"}'
    assert secrets.json_text_profile(hidden, envelope) is envelope
    assert secrets.json_text_profile(hidden, None) is None


def _cassette(text: str, i: int = 0, **extra: object) -> dict:
    req = {"model": "gpt-4o-mini-2024-07-18", "messages": [{"role": "user", "content": text}]}
    resp = {
        "id": f"c{i}",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": f"ok {i}"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    doc = {"key": recompute_key(req, VOLATILE), "request": req, "response": resp}
    doc.update(extra)
    return doc


def _analyzer(root: Path) -> Analyzer:
    return Analyzer(root, AnalysisConfig(recording_globs=("cassettes/*",), now=NOW))


def test_file_reports_carry_a_profile_only_when_bodies_are_literal(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    (folder / "clean.json").write_text(json.dumps(_cassette("hello", 1)))
    (folder / "keyed.json").write_text(json.dumps(_cassette(f"use {KEY}", 2)))
    escaped = json.dumps(_cassette("x", 3)).replace('"ok 3"', '"\\u006fk 3"')
    (folder / "escaped.json").write_text(escaped)
    (folder / "slash.json").write_text(json.dumps(_cassette("a/b", 4)).replace("/", "\\/"))
    # Escapes that stand for no literal's character keep the profile.
    (folder / "plain-escapes.json").write_text(json.dumps(_cassette('a\nb\t"q" \\ c', 6)))
    (folder / "zipped.json.gz").write_bytes(gzip.compress(json.dumps(_cassette("z", 5)).encode()))
    reports = {r.path.split("/")[-1]: r for r in _analyzer(tmp_path).files()}
    assert reports["clean.json"].profile is not None
    assert reports["keyed.json"].profile is not None
    assert not reports["keyed.json"].secret_free
    assert 0 in reports["keyed.json"].profile.providers  # sk-
    assert reports["escaped.json"].profile is None
    assert reports["slash.json"].profile is None
    assert reports["plain-escapes.json"].profile is not None
    assert reports["zipped.json.gz"].profile is None
    assert all(r.turns == 1 for r in reports.values())


def test_a_secret_in_structure_and_text_keeps_its_context_and_gains_a_line(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    doc = _cassette("hi", request_headers={"Authorization": f"Bearer {KEY}"})
    (folder / "a.json").write_text(json.dumps(doc, indent=2))
    analyzer = _analyzer(tmp_path)
    for _ in analyzer.files():
        pass
    (hit,) = [h for h in analyzer.secret_hits() if h.rule == "openai-api-key"]
    assert hit.context == "request header Authorization"
    assert hit.line is not None and hit.line > 1


def test_turn_views_stream_what_threads_return(tmp_path: Path) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    history = [{"role": "user", "content": "first"}]
    for i in range(4):
        doc = _cassette("", i)
        doc["request"]["messages"] = list(history)
        doc["key"] = recompute_key(doc["request"], VOLATILE)
        (folder / f"{i}.json").write_text(json.dumps(doc))
        history += [
            {"role": "assistant", "content": f"ok {i}"},
            {"role": "user", "content": "y" * 40},
        ]
    analyzer = _analyzer(tmp_path)
    for _ in analyzer.files():
        pass
    threads = analyzer.threads()
    streamed = list(analyzer.turn_views())
    assert [t for _, t in streamed] == [turn for thread in threads for turn in thread.turns]
    assert [len(t.turns) for t in threads] == [4]
    assert [m["role"] for m in threads[0].turns[1].new_messages] == ["user"]
    # Only digests and short texts stay in memory for chaining.
    for _, exchange in analyzer.exchanges:
        for key in (*exchange.request_keys, exchange.reply_key):
            assert not any(isinstance(part, str) and len(part) > 32 for part in key[:2])
    analyzer.close()
    with pytest.raises(RuntimeError):
        list(analyzer.turn_views())


# --------------------------------------------------------------------------- the job


def _ingest(files: dict[str, str]):
    values = assignment_values({"slug": "fast-paths", "title": "Fast paths", "replay_command": ""})
    return ingest_inline(files, values)


def test_the_job_redacts_bodies_and_counts_turns_as_before(db: None) -> None:
    pretty = json.dumps(_cassette("tell me", 1, extra={"token": "Zq8s7Hk2Lm4Np6Rt9Vw3"}), indent=4)
    pretty = pretty.replace('"token": ', '"token":\n        ')
    doc = _cassette("hi", 2)
    doc["request"]["token"] = "Zq8s7Hk2Lm4Np6Rt9Vw3"
    files = {
        "README.md": "# x\n",
        "cassettes/a.json": json.dumps(_cassette(f"use {KEY} now", 0)),
        "cassettes/b.json": json.dumps(doc, indent=4).replace(
            '"token": ', '"token":\n            '
        ),
        "cassettes/c.json": pretty,
    }
    submission, _ = _ingest(files)
    recordings = Recording.objects.filter(submission=submission)
    assert recordings.count() == 3
    for recording in recordings:
        assert recording.turn_count == Turn.objects.filter(recording=recording).count() == 1
    stored = b"".join(
        blob_read(Blob.objects.get(pk=sha))
        for inter in Interaction.objects.filter(recording__submission=submission)
        for sha in (inter.request_blob_id, inter.response_blob_id)
        if sha
    )
    assert KEY.encode() not in stored
    assert b"Zq8s7Hk2Lm4Np6Rt9Vw3" not in stored
    # The turns too: the secret-free file's JSON is stored as the spool keeps it, the
    # others' messages are redacted first.
    turns = json.dumps(list(Turn.objects.values_list("new_messages", "response")))
    assert KEY not in turns
    assert "tell me" in turns


def test_turn_texts_of_a_secret_free_file_are_stored_as_recorded(db: None) -> None:
    """A file no rule can fire on has its turns' JSON stored without a parse and dump:
    every character, escapes and a reply included, reads back as it was recorded."""
    text = r"caf\u00e9 \u2713 \"quoted\" \\ back\nslash \ud83d\ude00 \u00ff end"
    doc = _cassette("placeholder", 0)
    doc["request"]["messages"] = [{"role": "system", "content": "be brief"},
                                  {"role": "user", "content": "PLACE"}]  # fmt: skip
    raw = json.dumps(doc).replace('"PLACE"', f'"{text}"')
    submission, _ = _ingest({"README.md": "# x\n", "cassettes/a.json": raw})
    (turn,) = Turn.objects.filter(submission=submission)
    assert [m["text"] for m in turn.new_messages] == ["be brief", json.loads(f'"{text}"')]
    assert turn.response is not None and turn.response["role"] == "assistant"


def test_only_turns_whose_texts_can_hold_a_secret_are_redacted(db: None, monkeypatch) -> None:
    """Every cassette names its endpoint (`api`, `://` in the file's profile); a turn whose
    own JSON holds neither is stored as the spool keeps it, one that holds a key is
    redacted, and what is stored is what redacting every turn would store."""
    import submissions.recordings as recordings

    redacted: list[str] = []
    real = recordings.redact_message

    def spy(message: dict[str, Any], *, profile: Any = None) -> dict[str, Any]:
        redacted.append(message.get("text") or "")
        return real(message, profile=profile)

    monkeypatch.setattr(recordings, "redact_message", spy)
    url = "https://api.openai.com/v1/chat/completions"
    files = {
        "README.md": "# x\n",
        "cassettes/a.json": json.dumps(_cassette("plain words, nothing to see", 0, url=url)),
        "cassettes/b.json": json.dumps(_cassette(f"use {KEY} now", 1, url=url)),
    }
    submission, _ = _ingest(files)
    assert redacted == [f"use {KEY} now", "ok 1"]
    stored = {
        t.recording.path: (t.new_messages, t.response)
        for t in Turn.objects.filter(submission=submission).select_related("recording")
    }
    assert stored["cassettes/a.json"][0][0]["text"] == "plain words, nothing to see"
    assert KEY not in json.dumps(stored["cassettes/b.json"])
    for new_messages, response in stored.values():
        assert [real(m) for m in new_messages] == new_messages
        assert real(response) == response


def test_the_job_keeps_no_debug_query_log_unless_asked(db: None, settings) -> None:
    settings.DEBUG = True
    body = "x" * 5000
    connection.queries_log.clear()
    submission, _ = _ingest({"README.md": "# x\n", "cassettes/a.json": json.dumps(_cassette(body))})
    assert Turn.objects.filter(submission=submission).count() == 1
    assert connection.queries_log  # the rest of the work is still logged
    assert not any(body in q["sql"] for q in connection.queries_log)
    other = {"README.md": "# y\n", "cassettes/b.json": json.dumps(_cassette("y" * 5000))}
    with CaptureQueriesContext(connection) as captured:  # asked for: every query is kept
        _ingest(other)
    assert any("submissions_blob" in q["sql"] for q in captured.captured_queries)


# --------------------------------------------------------------------------- safe JSON


@pytest.mark.parametrize("depth", [199, 200, 201])
def test_the_depth_limit_holds_through_mixed_nesting(depth: int) -> None:
    from cassettes_app.safeload import LoadError, load_json

    half = depth // 2
    doc = '{"a": ' * half + "[" * (depth - half) + "1" + "]" * (depth - half) + "}" * half
    wide = "[" + ", ".join(["{}"] * 300 + [doc]) + "]"  # over the bracket count: walked
    long = '{"pad": "' + "x" * 200_000 + '", "doc": ' + doc + "}"  # long: always walked
    for text in (doc, wide, long):
        levels = depth + (text is not doc)
        if levels <= 200:
            assert load_json(text) is not None
        else:
            with pytest.raises(LoadError, match="too deeply nested"):
                load_json(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        "[" + ", ".join(['{"role": "user", "n": 1}'] * 500) + ', {"x": {"k": 1, "k": 1}}]',
    ],
)
def test_duplicate_keys_are_still_refused(text: str) -> None:
    from cassettes_app.safeload import LoadError, load_json

    with pytest.raises(LoadError, match="duplicate key"):
        load_json(text)


@pytest.mark.parametrize("enabled", [True, False])
def test_load_json_leaves_the_garbage_collector_as_it_found_it(enabled: bool) -> None:
    import gc

    from cassettes_app.safeload import LoadError, load_json

    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert load_json('{"a": [1, 2]}') == {"a": [1, 2]}
        assert gc.isenabled() is enabled
        with pytest.raises(LoadError):
            load_json('{"a": NaN}')
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_grouped_provider_needles_find_what_each_needle_finds() -> None:
    import random

    frags = [
        *("sk-", "xoxb-", "xoxz-", "-----BEGIN ", "----BEGIN ", "ghp_", "ghx_", "github_pat_"),
        *("hf_", "k_live_", "sk_live_", "AIza", "AKIA", "ASIA", "ACCA", "AXIA", "eyJ", "ey"),
        *("hooks.slack.com/", "hooks.slack.co/", "-", "_", "A", "J", "/", "x", "s", "k", " "),
    ]
    rng = random.Random(7)
    texts = ["xoxb-----BEGIN ", "sk-----BEGIN ", "github_pat_hf_"]
    texts += ["".join(rng.choice(frags) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    for text in texts:
        expected = {i for i, rx in enumerate(profiles._PROVIDER_NEEDLES) if rx.search(text)}
        assert profiles._providers_present(text) == expected, text


def test_the_head_tokenizer_finds_what_the_token_pattern_finds() -> None:
    import random

    from cassettes_app.formats import jsonhead

    alphabet = ['"', "\\", "{", "}", "[", "]", ":", " ", "\n", "a", "\u00a0", '\\"', '"k":']
    rng = random.Random(3)
    texts = ['{"a": "x\\', '{"a": "x\\\n"}', '{"k" \u00a0: 1, "s": "\\"{["}']
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20000)
    ]
    for text in texts:
        expected = [
            (m.start(), m.end(), m.end() - len(m.group(1) or "") if m.group(0)[0] == '"' else -1)
            for m in jsonhead._TOKEN.finditer(text)
        ]
        assert list(jsonhead._tokens(text)) == expected, text


def test_a_head_cut_inside_escaped_quotes_is_sniffed_at_once() -> None:
    import time

    from cassettes_app.formats import jsonhead

    head = '{"key": "k", "request": "' + '\\"x' * 80_000  # re's tokenizer took ~100 s
    started = time.perf_counter()
    assert jsonhead.json_top_keys(head) == ("object", {"key", "request"})
    assert time.perf_counter() - started < 1.0


def test_bodies_two_submissions_share_are_stored_once(db: None) -> None:
    """Content-addressed: a second submission with the same bodies adds no blob row."""
    from submissions.models import Interaction

    files = {f"cassettes/{i}.json": json.dumps(_cassette(f"question {i}", i)) for i in range(5)}
    first, _ = _ingest({"README.md": "# one\n", **files})
    stored = Blob.objects.count()
    second, _ = ingest_inline(
        {"README.md": "# two\n", **files},
        assignment_values({"slug": "fast-paths", "title": "Fast paths", "replay_command": ""}),
        candidate="Someone Else",
    )
    assert second.pk != first.pk
    assert Blob.objects.count() == stored  # the README is not a body; every body was known
    bodies = {
        s.pk: set(
            Interaction.objects.filter(recording__submission=s).values_list(
                "request_blob_id", "response_blob_id"
            )
        )
        for s in (first, second)
    }
    assert bodies[first.pk] == bodies[second.pk] and len(bodies[first.pk]) == 5


def test_bulk_insert_skips_stored_and_repeated_keys(db: None) -> None:
    """Blobs already stored, and a key repeated in one batch, are skipped, never an error."""
    from submissions.blobs import bulk_insert

    def blob(sha: str, data: bytes) -> Blob:
        return Blob(sha256=sha, size=len(data), data=data)

    bulk_insert(Blob, [blob("a" * 64, b"first")], ignore_conflicts=True)
    batch = [blob("a" * 64, b"again"), blob("b" * 64, b"new"), blob("b" * 64, b"new")]
    bulk_insert(Blob, batch, ignore_conflicts=True)  # the repeat forces the slow path
    bulk_insert(Blob, [blob("c" * 64, b"fast")], ignore_conflicts=True)
    stored = dict(Blob.objects.values_list("sha256", "data"))
    assert {k: bytes(v) for k, v in stored.items()} == {
        "a" * 64: b"first",
        "b" * 64: b"new",
        "c" * 64: b"fast",
    }


def test_bulk_insert_stores_raw_json_as_the_json_it_holds(db: None) -> None:
    """A RawJson value is the column's JSON, read back as the value json.dumps wrote it
    from; a plain str is still a JSON string."""
    from submissions.blobs import RawJson, bulk_insert, row_maker

    submission, _ = _ingest({"README.md": "# x\n"})
    messages = [{"role": "user", "text": "caf\u00e9 \U0001f600", "tool_calls": [], "n": 1.5}]
    make = row_maker(Turn)
    common = {"submission_id": submission.pk, "recording_id": None, "interaction_index": 0,
              "model": "", "usage": {}}  # fmt: skip
    bulk_insert(Turn, [
        make(thread=0, index=0, new_messages=RawJson(json.dumps(messages)),
             response=RawJson(json.dumps(messages[0])), **common),
        make(thread=1, index=0, new_messages=messages, response="plain", **common),
    ])  # fmt: skip
    rows = Turn.objects.filter(submission=submission).order_by("thread")
    assert [(t.new_messages, t.response) for t in rows] == [
        (messages, messages[0]),
        (messages, "plain"),
    ]


def test_bulk_insert_stores_text_columns_as_bulk_create_does(db: None) -> None:
    """Its shortcut for text columns keeps what the ORM stores: a str subclass, a lazy
    text and an empty text all read back the same."""
    from django.utils.functional import lazy

    from submissions.blobs import bulk_insert

    class Text(str):
        pass

    values = ["application/json", Text("text/plain"), lazy(lambda: "text/html", str)(), ""]

    def blobs(prefix: str) -> list[Blob]:
        return [
            Blob(sha256=f"{prefix}{i}".ljust(64, "0"), size=i, content_type=value, data=b"x")
            for i, value in enumerate(values)
        ]

    bulk_insert(Blob, blobs("a"))
    Blob.objects.bulk_create(blobs("b"))
    rows = Blob.objects.order_by("sha256").values_list("sha256", "content_type", "storage_name")
    ours = [row[1:] for row in rows if row[0].startswith("a")]
    orm = [row[1:] for row in rows if row[0].startswith("b")]
    assert ours == orm == [(str(v), "") for v in values]


def test_bulk_insert_prepares_numbers_and_json_as_the_orm_does(db: None) -> None:
    """Its shortcuts for integer, foreign key and JSON columns give every value the ORM's
    own preparation gives: ints, None, a numeric string, dicts, lists and JSON scalars."""
    from submissions.blobs import _preparer

    turns = [
        Turn(
            submission_id=1,
            thread=3,
            index=0,
            recording_id=None,
            interaction_index="7",  # a str: the ORM makes it an int, so must we
            new_messages=[{"role": "user", "text": "é\x00"}],
            response=None,
            usage={"tokens": 1.5, "nested": [True, None]},
        ),
        Turn(submission_id=2, thread=0, index=1, recording_id=9, new_messages="a str", usage=[]),
    ]
    fields = [f for f in Turn._meta.concrete_fields if f is not Turn._meta.auto_field]
    for turn in turns:
        for field in fields:
            orm = field.get_db_prep_save(field.pre_save(turn, True), connection)
            ours = _preparer(field, connection)(turn)
            assert _as_sent(ours) == _as_sent(orm), field.name


def test_bulk_insert_prepares_flags_floats_bytes_and_blob_keys_as_the_orm_does(
    db: None,
) -> None:
    """Its shortcuts for boolean, float, binary and blob-key columns give every value the
    ORM's own preparation gives: the plain types, None, and the ones the ORM converts."""
    from submissions.blobs import _preparer

    rows: list[Any] = [
        Blob(sha256="a" * 64, is_binary=True, truncated=False, data=b"\x00bytes"),
        Blob(sha256="b" * 64, is_binary=1, truncated=None, data=bytearray(b"ba")),
        Blob(sha256="c" * 64, is_binary="f", truncated=0, data=memoryview(b"mv")),
        Blob(sha256="d" * 64, data=None),
        Interaction(request_blob_id="a" * 64, response_blob_id=None, duration_ms=12.5),
        Interaction(request_blob_id="", response_blob_id="b" * 64, duration_ms=3),
        Interaction(request_blob_id=None, duration_ms="2.25"),
        Interaction(duration_ms=None),
    ]
    checked = set()
    for row in rows:
        meta = type(row)._meta
        for field in meta.concrete_fields:
            if field is meta.auto_field or getattr(field, "auto_now_add", False):
                continue
            orm = field.get_db_prep_save(field.pre_save(row, True), connection)
            ours = _preparer(field, connection)(row)
            assert _as_sent(ours) == _as_sent(orm), (field.name, getattr(row, field.attname))
            checked.add(field.name)
    assert {"is_binary", "truncated", "data", "request_blob", "duration_ms"} <= checked


def _as_sent(value: object) -> tuple[type, object]:
    """A prepared value as the driver sends it: psycopg's JSON wrappers (PostgreSQL) have no
    equality of their own, so they compare by the text they dump."""
    if isinstance(value, memoryview):  # SQLite's Binary
        return memoryview, value.tobytes()
    if type(value).__name__ == "Binary":  # psycopg's, equal by what it wraps
        return type(value), bytes(value.obj)  # type: ignore[attr-defined]
    dumps = getattr(value, "dumps", None)
    if dumps is not None and hasattr(value, "obj"):
        return type(value), dumps(value.obj)  # type: ignore[attr-defined]
    return type(value), value


def test_the_stored_recordings_get_the_ids_their_rows_point_to(db: None) -> None:
    """Recordings are written without RETURNING: each interaction and turn still points to
    the recording of its own file."""
    names = ["d", "a", "c", "b", "e"]
    files = {"README.md": "# x\n"}
    files |= {
        f"cassettes/{n}.json": json.dumps(_cassette(f"file {n}", i)) for i, n in enumerate(names)
    }
    submission, _ = _ingest(files)
    recordings = Recording.objects.filter(submission=submission)
    assert sorted(r.path for r in recordings) == [f"cassettes/{n}.json" for n in sorted(names)]
    for recording in recordings:
        name = recording.path.split("/")[-1].removesuffix(".json")
        (inter,) = Interaction.objects.filter(recording=recording)
        assert f"file {name}".encode() in blob_read(Blob.objects.get(pk=inter.request_blob_id))
        (turn,) = Turn.objects.filter(recording=recording)
        assert f"file {name}" in json.dumps(turn.new_messages)


def test_rows_made_without_model_instances_store_what_instances_store(db: None) -> None:
    """A row_maker row and a model instance with the same values store the same row; a row
    missing a column, or naming one the table lacks, is refused with its name."""
    from submissions.blobs import bulk_insert, row_maker

    make = row_maker(Blob)
    values = {"size": 3, "content_type": "text/plain", "is_binary": False, "truncated": True}
    bulk_insert(Blob, [make(sha256="a" * 64, data=b"abc", storage_name="", **values)])
    bulk_insert(Blob, [Blob(sha256="b" * 64, data=b"abc", **values)])
    rows = Blob.objects.order_by("sha256").values_list(
        "size", "content_type", "is_binary", "truncated", "data", "storage_name"
    )
    ours, orm = ((*r[:4], bytes(r[4]), r[5]) for r in rows)
    assert ours == orm == (3, "text/plain", False, True, b"abc", "")
    assert Blob.objects.filter(created__isnull=True).count() == 0  # stamped, as by the ORM
    with pytest.raises(TypeError, match=r"missing \['sha256', 'storage_name'\], unknown \['sha'\]"):
        make(sha="c" * 64, data=b"", **values)


def test_a_turn_message_reads_back_as_json_would_have_written_it() -> None:
    """A message's spooled JSON (orjson's where it can) reads back as the value json's text
    of it reads back as: YAML dates and bytes as their str(), long and odd texts, tool
    arguments of every kind; a lone surrogate or an integer past 64 bits falls back to json."""
    from cassettes_app.analysis.turns import message_dict, message_json
    from cassettes_app.providers import Message, ToolCall, ToolResult

    when = dt.datetime(2026, 11, 29, 10, 30, tzinfo=dt.UTC)
    texts = ["plain", 'caf\u00e9 \u2028 \U0001f600 \x00 \x7f "q" \\', "x" * 30_000, "\ud800 lone"]
    arguments = [{"n": 1.5, "when": when, "day": when.date()}, {"big": 2**70}, [1, None], "raw"]
    for text in texts:
        for args in arguments:
            message = Message(
                role="assistant",
                text=text,
                tool_calls=[ToolCall("c1", "lookup", args, json.dumps(str(args)), True)],
                tool_results=[ToolResult("c1", b"bytes out", False, "lookup")],
                raw=None,
            )
            data = message_json(message)
            want = json.loads(json.dumps(message_dict(message), default=str))
            assert json.loads(data) == want
            data.decode("utf-8")  # the spool's reader decodes it so
