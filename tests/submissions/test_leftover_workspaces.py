"""A run killed mid-replay leaves its workspace behind; the next worker start removes it,
unless a process of this host still holds that workspace's slot."""

from __future__ import annotations

import fcntl
import os

from submissions.sandbox.slots import leftovers_remove


def test_a_killed_runs_workspace_goes_at_start_but_not_a_held_slots(settings, tmp_path) -> None:
    settings.SANDBOX_WORK_DIR = work = tmp_path / "sandbox"
    locks = tmp_path / "locks"
    for name in ("ws-0-k1ll3d", "ws-1-runn1ng", "ws-12-k1ll3d", "ws-legacy", "notes"):
        (work / name / "out").mkdir(parents=True)
        (work / name / "out" / "answers.json").write_text("{}")
    locks.mkdir()
    held = os.open(locks / "job-slot-1.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process runs in slot 1
        gone = leftovers_remove(locks)
    finally:
        os.close(held)
    assert sorted(p.name for p in gone) == ["ws-0-k1ll3d", "ws-12-k1ll3d"]
    assert sorted(os.listdir(work)) == ["notes", "ws-1-runn1ng", "ws-legacy"]
    # Once slot 1 is free, its workspace is a leftover too.
    assert [p.name for p in leftovers_remove(locks)] == ["ws-1-runn1ng"]


def test_no_workspace_folder_is_nothing_to_do(settings, tmp_path) -> None:
    settings.SANDBOX_WORK_DIR = tmp_path / "never-made"
    assert leftovers_remove(tmp_path / "locks") == []
