"""The zipped inspect_ai log is read from memory: broken, hostile and huge archives give a
finding and whatever samples could be read, never an exception or a file on disk."""

from __future__ import annotations

import io
import json
import zipfile

from cassettes_app.formats import parse_file
from cassettes_app.formats.inspect_log import MAX_MEMBERS
from cassettes_app.limits import ParseLimits
from tests.paths import ROOT

REAL = ROOT / "tests" / "fixtures" / "wild" / "inspect-ai" / "inspect-ai-scorer-popularity.eval"


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _sample(number: int) -> bytes:
    output = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    event = {"event": "model", "model": "m", "input": [{"role": "user", "content": "hi"}],
             "output": output}  # fmt: skip
    return json.dumps({"id": number, "epoch": 1, "events": [event]}).encode()


def test_a_corrupt_member_is_skipped_and_the_others_read() -> None:
    data = _zip({
        "header.json": b'{"eval": {"model": "m", "task": "t"}, "status": "success"}',
        "samples/1_epoch_1.json": _sample(1),
        "samples/2_epoch_1.json": b'{"id": 2, "events": [',
        "samples/3_epoch_1.json": _sample(3),
    })  # fmt: skip
    result = parse_file("logs/run.eval", data)
    assert result.format == "inspect_log"
    assert len(result.recordings[0].interactions) == 2
    assert any("samples/2_epoch_1.json" in f.message for f in result.findings)


def test_a_bomb_member_is_not_unpacked_past_the_cap() -> None:
    bomb = b'{"id": 1, "pad": "' + b"0" * 3_000_000 + b'"}'
    data = _zip({"samples/1_epoch_1.json": bomb, "samples/2_epoch_1.json": _sample(2)})
    assert len(data) < 50_000  # deflate squeezes the padding
    limits = ParseLimits(max_file_bytes=1_000_000)
    result = parse_file("logs/bomb.eval", data, limits)
    assert any("unpacks to over" in f.message for f in result.findings)
    assert len(result.recordings[0].interactions) == 1


def test_too_many_entries_or_not_a_zip_is_an_error_finding() -> None:
    many = _zip({f"x/{i}": b"" for i in range(MAX_MEMBERS + 1)}, zipfile.ZIP_STORED)
    result = parse_file("logs/many.eval", many)
    assert any("entries" in f.message and f.severity == "error" for f in result.findings)
    broken = parse_file("logs/cut.eval", REAL.read_bytes()[:4000])
    assert broken.findings and all(f.severity != "info" for f in broken.findings[:1])
    assert any("zip" in f.message for f in broken.findings)


def test_a_zip_not_named_eval_is_not_taken_for_a_log() -> None:
    result = parse_file("uploads/archive.zip", _zip({"samples/1_epoch_1.json": _sample(1)}))
    assert result.format == "unknown"


def test_a_cut_eval_still_gives_the_samples_before_the_cut() -> None:
    data = REAL.read_bytes()
    whole = parse_file("logs/run.eval", data).recordings[0].interactions
    cut = parse_file("logs/run.eval", data[: len(data) * 2 // 3])
    (finding,) = [f for f in cut.findings if f.severity == "error"]
    assert "local headers" in finding.message and "cut off at byte" in finding.message
    recovered = cut.recordings[0].interactions
    assert 0 < len(recovered) < len(whole)
    assert {i.response_body.json["choices"][0]["message"]["content"] for i in recovered} <= {
        i.response_body.json["choices"][0]["message"]["content"] for i in whole
    }
