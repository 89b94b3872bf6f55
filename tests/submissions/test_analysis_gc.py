"""The analysis leaves full collections for after it: they walked every object the
process held, grew with the hand-in, and never found anything to free."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest

import submissions.runs.analysis as analysis
from submissions.assignments import assignment_values
from submissions.models import Job, Recording
from tests.conftest import ingest_inline


def _cassettes(count: int) -> dict[str, str]:
    files = {"README.md": "# gc\n"}
    for i in range(count):
        request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"t{i}"}]}
        response = {"choices": [{"message": {"role": "assistant", "content": f"a{i}"}}]}
        files[f"cassettes/{i:03d}.json"] = json.dumps(
            {"key": f"{i:016x}", "request": request, "response": response}
        )
    return files


@pytest.fixture
def eager_collector() -> Iterator[None]:
    """A collector that runs a full collection every other young one: the process's
    objects frozen, its count of long-lived ones zeroed, the thresholds at their lowest."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.collect()
    gc.set_threshold(100, 1, 1)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_an_analysis_runs_young_collections_only(
    db: None, eager_collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = False
    seen: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and inside:
            seen.append(info["generation"])

    run = analysis._analysis

    def watched(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside
        inside = True
        try:
            return run(*args, **kwargs)
        finally:
            inside = False

    monkeypatch.setattr(analysis, "_analysis", watched)
    values = assignment_values(
        {"slug": "gc", "title": "GC", "replay_command": "", "recordings": ["cassettes/*.json"]}
    )
    gc.callbacks.append(watch)
    try:
        submission, _ = ingest_inline(_cassettes(30), values)
    finally:
        gc.callbacks.remove(watch)
    job = Job.objects.get(submission=submission, kind=Job.Kind.ANALYSIS)
    assert job.state == Job.State.PASSED
    assert Recording.objects.filter(submission=submission).count() == 30
    assert 0 in seen, "young collections stopped too"
    assert 2 not in seen
    assert gc.get_threshold() == (100, 1, 1), "the process's thresholds were not restored"


def test_the_thresholds_come_back_when_the_block_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), analysis.young_collections_only():
        assert gc.get_threshold() == (*before[:2], analysis._NEVER)
        raise RuntimeError("the analysis failed")
    assert gc.get_threshold() == before
