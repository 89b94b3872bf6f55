"""The two libc calls the sandbox needs that Python lacks: mount(2)/umount2(2), memfd."""

from __future__ import annotations

import ctypes
import os


def load_libc() -> ctypes.CDLL:
    """Return libc for mount(2)/umount2(2)."""
    return ctypes.CDLL(None, use_errno=True)


def memfd(name: str, data: bytes) -> int:
    """Return a memfd holding data, for bwrap's --ro-bind-data (no host path needed)."""
    fd = os.memfd_create(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
