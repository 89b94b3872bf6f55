"""The run-twice run log: where the model id belongs, outside the graded file."""

from __future__ import annotations

import pytest

from cassettes_app.checks.runlog import cassettes_model_metadata_from_run_log, model_in_run_log


@pytest.mark.parametrize(
    ("text", "model"),
    [
        (
            '{"event": "call", "model": "gpt-4o-mini-2024-07-18", "ms": 412}\n',
            "gpt-4o-mini-2024-07-18",
        ),
        (
            "2026-11-01T10:00:00Z model=claude-3-5-haiku-20241022 latency=0.4s\n",
            "claude-3-5-haiku-20241022",
        ),
        ("replaying 3 prompts against gemini-1.5-flash-002 (cached)\n", "gemini-1.5-flash-002"),
        ("model_id: llama3.1:8b\n", "llama3.1:8b"),
    ],
)
def test_the_model_is_found_in_the_common_log_styles(text: str, model: str) -> None:
    assert model_in_run_log(text) == model


def test_a_log_without_a_model_or_no_log_is_a_warning_not_a_fail() -> None:
    assert model_in_run_log("took 3.2 s, 3 prompts, 0 retries\n") is None
    assert cassettes_model_metadata_from_run_log(b"took 3.2 s\n").status == "warn"
    missing = cassettes_model_metadata_from_run_log(None)
    assert missing.status == "warn" and "wrote no out/run.log" in missing.summary
    found = cassettes_model_metadata_from_run_log(b'{"model": "gpt-4o-mini"}\n')
    assert found.status == "pass" and found.summary == "out/run.log names the model: gpt-4o-mini"
