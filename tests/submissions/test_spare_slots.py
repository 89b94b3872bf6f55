"""A replay borrows free sandbox slots for its runs at once, never the last free one."""

from __future__ import annotations

import fcntl
import os

from submissions.sandbox.slots import Slot, _slot_lock, sandbox_limits, spare_slots


def _hold(locks, number: int) -> int:
    fd = os.open(locks / f"job-slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_spare_slots_leave_one_free_and_are_given_back(settings, tmp_path) -> None:
    settings.SANDBOX_SLOTS = 5
    settings.SANDBOX_UID_BASE = 64000
    locks = tmp_path / "locks"
    locks.mkdir()
    mine = Slot(1, 64001, sandbox_limits(), site=tmp_path / "site")
    held = [_hold(locks, 1), _hold(locks, 3)]  # this job's own slot; another job's
    try:
        with spare_slots(mine, 3, locks) as spares:
            # Free were 2, 4 and 0: two are borrowed, the last one found stays free.
            assert [(s.number, s.uid) for s in spares] == [(2, 64002), (4, 64004)]
            assert all(s.site == mine.site and s.limits == mine.limits for s in spares)
            assert _slot_lock(2, locks) is None and _slot_lock(4, locks) is None
            last = _slot_lock(0, locks)
            assert last is not None  # a job starting now still finds a slot
            os.close(last)
        for number in (2, 4):  # given back
            fd = _slot_lock(number, locks)
            assert fd is not None
            os.close(fd)
        with spare_slots(mine, 1, locks) as spares:
            assert [s.number for s in spares] == [2]
        with spare_slots(mine, 0, locks) as spares:
            assert spares == []
        held.append(_hold(locks, 2))
        held.append(_hold(locks, 4))
        with spare_slots(mine, 3, locks) as spares:  # only slot 0 free: it is left alone
            assert spares == []
    finally:
        for fd in held:
            os.close(fd)
