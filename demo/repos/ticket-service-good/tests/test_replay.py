from __future__ import annotations

import shutil

import replay

from .conftest import REPO


def test_replay_is_deterministic_and_matches_the_sample_ledger(tmp_path, monkeypatch):
    outputs = []
    for n in range(2):
        copy = tmp_path / f"run{n}"
        for name in ("samples", "recordings"):
            shutil.copytree(REPO / name, copy / name)
        monkeypatch.setattr(replay, "HERE", copy)
        assert replay.main() == 0
        outputs.append((copy / "out" / "tickets.json").read_bytes())
    assert outputs[0] == outputs[1]
    assert (copy / "out" / "ledger.jsonl").read_text() == (REPO / "ledger.jsonl").read_text()


def test_replay_fails_loudly_on_a_missing_recording(tmp_path, monkeypatch, capsys):
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    shutil.copytree(REPO / "recordings", tmp_path / "recordings")
    victim = sorted((tmp_path / "recordings").glob("*.json"))[0]
    victim.unlink()
    monkeypatch.setattr(replay, "HERE", tmp_path)
    assert replay.main() == 2
    assert victim.name in capsys.readouterr().err
