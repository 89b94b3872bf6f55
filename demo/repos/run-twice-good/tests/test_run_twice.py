from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from answerer import model
from answerer.__main__ import main

REPO = Path(__file__).resolve().parents[1]
EXPECTED_LABELS = ["billing", "bug", "feature", "praise", "question"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    shutil.copytree(REPO / "fixtures", tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access during replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def run_replay(copy: Path, seed: str, tz: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": tz, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(copy / "run.sh"), "replay"], env=env, capture_output=True, text=True)


def test_two_replays_are_byte_identical(tmp_path):
    outputs = []
    for n, (seed, tz) in enumerate([("1", "UTC"), ("4242", "Asia/Kolkata")]):
        copy = tmp_path / f"run{n}"
        shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns("out", "__pycache__", ".pytest_cache"))
        result = run_replay(copy, seed, tz)
        assert result.returncode == 0, result.stderr
        outputs.append((copy / "out" / "answers.json").read_bytes())
    assert outputs[0] == outputs[1]


def test_answers_come_from_the_recordings(workdir, no_network):
    assert main(["replay"]) == 0
    answers = json.loads((workdir / "out" / "answers.json").read_text(encoding="utf-8"))
    assert [a["label"] for a in answers["answers"]] == EXPECTED_LABELS
    assert answers["count"] == 5


def test_volatile_data_goes_to_the_log_only(workdir, no_network):
    assert main(["replay"]) == 0
    answers = (workdir / "out" / "answers.json").read_text(encoding="utf-8")
    assert "gpt-" not in answers and "elapsed" not in answers and "recorded_at" not in answers
    log = [json.loads(line) for line in (workdir / "out" / "run.log").read_text().splitlines()]
    assert {e.get("model") for e in log if "index" in e} == {model.MODEL}


def test_a_missing_recording_fails_loudly_and_offline(workdir, no_network, capsys):
    victim = sorted((workdir / "fixtures" / "recordings").glob("*.json"))[2]
    victim.unlink()
    assert main(["replay"]) == 3
    err = capsys.readouterr().err
    assert str(Path("fixtures/recordings") / victim.name) in err
    assert not (workdir / "out" / "answers.json").exists()


def test_record_is_capped_and_rerunnable(workdir, monkeypatch):
    shutil.rmtree(workdir / "fixtures" / "recordings")
    calls = []

    def fake_ask(text):
        calls.append(text)
        return json.dumps({"label": "question", "reply": "ok"}), "gpt-test"

    monkeypatch.setattr(model, "ask", fake_ask)
    assert main(["record", "--limit", "2"]) == 3  # three inputs still unrecorded
    assert len(calls) == 2
    assert main(["record"]) == 0  # picks up where it stopped
    assert len(calls) == 5
    assert main(["record"]) == 0  # nothing left to record
    assert len(calls) == 5
