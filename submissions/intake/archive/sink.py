"""Where extracted entries land: every name checked and refused (never rewritten), sizes
counted from the bytes produced, and the tree moved into place only once all passed."""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from submissions.intake.archive.core import ArchiveRejected, Limits, name_text

_DRIVE = re.compile(r"[A-Za-z]:")


_SEPARATORS = re.compile(r"[/\\]")


_IGNORED_TOP = "__MACOSX"


_IGNORED_LEAF = ".DS_Store"


def name_parts(raw: bytes, limits: Limits) -> tuple[str, ...]:
    """The path components of an entry name, or ArchiveRejected if the name is unsafe."""
    entry = name_text(raw)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveRejected("bad_name", "the name is not valid UTF-8", entry) from None
    if not name:
        raise ArchiveRejected("bad_name", "the name is empty", entry)
    if any(ch < " " or "\x7f" <= ch <= "\x9f" for ch in name):
        raise ArchiveRejected("bad_name", "the name contains a control character", entry)
    if name[0] in "/\\" or _DRIVE.match(name):
        raise ArchiveRejected("absolute_path", "the path is absolute", entry)
    if ".." in _SEPARATORS.split(name):
        raise ArchiveRejected("zip_slip", "the path escapes the archive", entry)
    if "\\" in name:
        raise ArchiveRejected("bad_name", "the name contains a backslash", entry)
    # "./" prefixes (tar of ".") and doubled or trailing slashes carry no meaning.
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if len(raw) > limits.max_path_bytes:
        raise ArchiveRejected(
            "name_too_long",
            f"the path is {len(raw)} bytes, over the limit of {limits.max_path_bytes}"
            " (max_path_bytes)",
            entry,
        )
    longest = max((len(part.encode()) for part in parts), default=0)
    if longest > limits.max_component_bytes:
        raise ArchiveRejected(
            "name_too_long",
            f"a path component is {longest} bytes, over the limit of"
            f" {limits.max_component_bytes} (max_component_bytes)",
            entry,
        )
    if len(parts) > limits.max_depth:
        raise ArchiveRejected(
            "too_deep",
            f"the path is {len(parts)} levels deep, over the limit of {limits.max_depth}"
            " (max_depth)",
            entry,
        )
    return parts


def is_litter(parts: Sequence[str]) -> bool:
    """macOS Finder litter, which no tree keeps."""
    return parts[0] == _IGNORED_TOP or parts[-1] == _IGNORED_LEAF


def _fold(path: str) -> str:
    """A key under which names that differ only in case or Unicode normalisation meet."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", path).casefold())


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Sink:
    """Where accepted entries go: names are reserved, caps counted, files written by dir fd."""

    def __init__(self, root: Path, limits: Limits, archive_size: int) -> None:
        self._limits = limits
        self._archive_size = archive_size
        self._paths: dict[str, tuple[str, bool]] = {}  # folded path -> (path, is_dir)
        self._dirs = 0
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._chain: list[tuple[str, int]] = []  # the open directory fds below the root
        self.files = 0
        self.bytes = 0

    def close(self) -> None:
        """Release every directory fd."""
        for _, fd in self._chain:
            os.close(fd)
        self._chain.clear()
        os.close(self._root_fd)

    def place(self, raw_name: bytes, is_dir: bool) -> tuple[str, ...] | None:
        """Check an entry's name and reserve its path; None when the entry is skipped."""
        entry = name_text(raw_name)
        parts = name_parts(raw_name, self._limits)
        if not parts:
            if is_dir:
                return None  # "./", the archive root itself
            raise ArchiveRejected("bad_name", "the name does not name a file", entry)
        if is_litter(parts):
            return None
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            as_dir = is_dir or depth < len(parts)
            key = _fold(path)
            known = self._paths.get(key)
            if known is None:
                self._paths[key] = (path, as_dir)
                continue
            known_path, known_dir = known
            if known_path == path and known_dir and as_dir:
                continue  # a folder seen before, listed or implied
            if known_path == path and known_dir == as_dir:
                raise ArchiveRejected("duplicate", "the archive holds this file twice", entry)
            if known_path == path:
                detail = f"{path!r} is both a file and a directory"
            else:
                detail = f"the path collides with {known_path!r} when case is ignored"
            raise ArchiveRejected("collision", detail, entry)
        return parts

    def directory(self, parts: Sequence[str], entry: str) -> int:
        """An fd for the directory at `parts`, creating missing levels as 0755."""
        # The previous entry's chain stays open: archives list a folder's files together, so
        # most entries reuse it, and at most max_depth descriptors are ever held.
        keep = 0
        while keep < min(len(parts), len(self._chain)) and self._chain[keep][0] == parts[keep]:
            keep += 1
        for _, fd in self._chain[keep:]:
            os.close(fd)
        del self._chain[keep:]
        for name in parts[keep:]:
            parent = self._chain[-1][1] if self._chain else self._root_fd
            created = False
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent)
                created = True
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            self._chain.append((name, fd))
            if created:
                self._dirs += 1
                if self._dirs > self._limits.max_files:
                    raise ArchiveRejected(
                        "too_many_files",
                        f"the archive makes more than {self._limits.max_files} directories"
                        " (max_files)",
                        entry,
                    )
                os.fchmod(fd, 0o755)  # mkdir's mode passed through the umask
        return self._chain[-1][1] if self._chain else self._root_fd

    def file(
        self,
        parts: Sequence[str],
        entry: str,
        chunks: Iterable[bytes],
        compressed_size: int | None,
        executable: bool = False,
    ) -> None:
        """Write one regular file from `chunks`, stopping at the first cap it crosses.

        Only the executable bit survives from the archive (a `./run.sh` must still run):
        0755 or 0644, never setuid, setgid, sticky or group/other write.
        """
        limits = self._limits
        parent = self.directory(parts[:-1], entry)
        fd = os.open(parts[-1], _FILE_FLAGS, 0o644, dir_fd=parent)
        written = 0
        with open(fd, "wb") as out:
            os.fchmod(fd, 0o755 if executable else 0o644)
            for chunk in chunks:
                written += len(chunk)
                total = self.bytes + written
                if written > limits.max_file_bytes:
                    raise ArchiveRejected(
                        "file_too_large",
                        f"the file expands past the limit of {limits.max_file_bytes} bytes"
                        " (max_file_bytes)",
                        entry,
                    )
                if total > limits.max_total_bytes:
                    raise ArchiveRejected(
                        "total_too_large",
                        f"the archive expands past the limit of {limits.max_total_bytes}"
                        " bytes (max_total_bytes)",
                        entry,
                    )
                # Below the floor nothing is ratio-checked: short repetitive text is normal.
                if (
                    compressed_size is not None
                    and written > limits.ratio_floor_bytes
                    and written > limits.max_ratio * max(compressed_size, 1)
                ):
                    raise ArchiveRejected(
                        "ratio",
                        f"the file expands more than {limits.max_ratio}:1 (max_ratio)",
                        entry,
                    )
                if (
                    total > limits.ratio_floor_bytes
                    and total > limits.max_total_ratio * self._archive_size
                ):
                    raise ArchiveRejected(
                        "ratio",
                        f"the archive expands more than {limits.max_total_ratio}:1"
                        " (max_total_ratio)",
                        entry,
                    )
                out.write(chunk)
        self.files += 1
        self.bytes += written

    def single_root(self) -> str | None:
        """The one top-level directory holding everything, if the archive has one."""
        tops = [(path, is_dir) for path, is_dir in self._paths.values() if "/" not in path]
        if len(tops) == 1 and tops[0][1]:
            return tops[0][0]
        return None
