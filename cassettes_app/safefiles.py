"""Opening one file of a submission tree, the only way any code here opens one.

A hand-in is hostile input: a link in it may point anywhere on the worker (`Makefile ->
/etc/shadow`, `docs -> /`), a FIFO would hang a reader, a device could answer anything.
So a file is opened relative to the tree's root one component at a time, each with
O_NOFOLLOW (a link swapped in between a check and the open is refused too), the last one
with O_NONBLOCK (a planted FIFO cannot block before the regular-file test) and O_NOCTTY,
and only a regular file is handed back. The path must be relative and stay under the
root: no absolute path, no `..`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEAF = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegular(OSError):
    """The path names a folder, FIFO, socket or device, not a regular file."""


class OutsideRoot(OSError):
    """The path is absolute, empty or climbs out of the root with `..`."""


def parts_under_root(rel: str) -> tuple[str, ...]:
    """The components of a path that stays under its root (`.` dropped), else OutsideRoot."""
    path = PurePosixPath(rel)
    if not rel or "\0" in rel or path.is_absolute() or ".." in path.parts or not path.parts:
        raise OutsideRoot(errno.EINVAL, "not a path inside the tree", rel)
    return path.parts


def open_regular(root: Path | str, rel: str) -> BinaryIO:
    """root/rel opened for binary reading: a regular file, reached without a link anywhere.

    Raises OSError: ELOOP for a symbolic link at any component, NotRegular, OutsideRoot,
    FileNotFoundError and the rest as the system gives them. The caller closes the file.
    """
    parts = parts_under_root(rel)
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = _open_folder(part, dir_fd, rel)
            os.close(dir_fd)
            dir_fd = nxt
        fd = os.open(parts[-1], _LEAF, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", rel)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_folder(part: str, dir_fd: int, rel: str) -> int:
    try:
        return os.open(part, _DIR, dir_fd=dir_fd)
    except NotADirectoryError:
        # O_NOFOLLOW|O_DIRECTORY on a link says ENOTDIR; name it as the link it is.
        if stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "symbolic link; not followed", rel) from None
        raise
