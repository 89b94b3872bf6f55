"""Recorded model answers: fixtures/recordings/<sha16 of the input text>.json."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


class MissingRecording(RuntimeError):
    def __init__(self, index: int, text: str, path: Path) -> None:
        self.path = path
        super().__init__(
            f"input #{index} ({text[:40]!r}) has no recording: {path} is missing. "
            "Replay never calls the model; run ./run.sh record to create it."
        )


class StaleRecording(RuntimeError):
    pass


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def recording_path(directory: Path, text: str) -> Path:
    return directory / f"{text_sha(text)}.json"


def load_recording(directory: Path, index: int, text: str) -> dict:
    path = recording_path(directory, text)
    if not path.is_file():
        raise MissingRecording(index, text, path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("text") != text:
        raise StaleRecording(f"{path} was recorded for another text; re-record input #{index}")
    return data


def save_recording(directory: Path, text: str, response: str, model: str, recorded_at: str) -> Path:
    path = recording_path(directory, text)
    directory.mkdir(parents=True, exist_ok=True)
    record = {"text": text, "response": response, "model": model, "recorded_at": recorded_at}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
