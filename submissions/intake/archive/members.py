"""One file of an accepted archive, read without unpacking the tree: its first bytes, bounded.

A path here is a path of the tree `extract_archive` makes: names checked by the same rule
(`name_parts`), Finder litter skipped, and a single top-level folder stripped as it is on
unpacking. A zip member is found through the central directory and only its own bytes are
inflated; a tar is streamed once, keeping at most two candidates' first bytes until the end
tells whether the archive had a single root. Reading stops at `limit` bytes shown.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from submissions.intake.archive.core import ArchiveRejected, Limits, Seekable, name_text
from submissions.intake.archive.sink import is_litter, name_parts
from submissions.intake.archive.tar import (
    _TAR_DIR_TYPE,
    _TAR_FILE_TYPES,
    _TAR_OVERHEAD_PER_ENTRY,
    Stream,
    _TarReader,
    decoder,
)
from submissions.intake.archive.zip import (
    _zip_check_layout,
    _zip_chunks,
    _zip_directory,
    _ZipEntry,
)

Parts = tuple[str, ...]


@dataclass(frozen=True)
class Member:
    """The first bytes of one file of the tree, and the file's whole size."""

    head: bytes
    size: int


class NoSuchMember(LookupError):
    """The tree holds no file at that path; the message says what is there instead."""


def tree_parts(raw: bytes, limits: Limits) -> Parts | None:
    """An entry's path in the unpacked tree (before a single root is stripped), or None when
    unpacking skips it."""
    try:
        parts = name_parts(raw, limits)
    except ArchiveRejected:
        return None  # an accepted archive has none; a cap lowered since would refuse it
    if not parts or is_litter(parts):
        return None
    return parts


def single_root(entries: Iterable[tuple[Parts, bool]]) -> str | None:
    """The one top-level folder holding everything, as `Sink.single_root` finds it."""
    tops: dict[str, bool] = {}
    for parts, is_dir in entries:
        tops[parts[0]] = tops.get(parts[0], False) or is_dir or len(parts) > 1
    if len(tops) == 1:
        top, is_dir = next(iter(tops.items()))
        return top if is_dir else None
    return None


def check_size(size: int, limits: Limits, path: str) -> None:
    """Refuse a file over the per-file cap before any of it is read."""
    if size > limits.max_file_bytes:
        raise ArchiveRejected(
            "file_too_large",
            f"the file is {size} bytes, over the per-file limit of {limits.max_file_bytes}"
            " bytes (max_file_bytes)",
            path,
        )


def _head(chunks: Iterator[bytes], limit: int) -> bytes:
    """At most `limit` bytes from `chunks`; the rest is never produced."""
    parts: list[bytes] = []
    got = 0
    for chunk in chunks:
        parts.append(chunk[: limit - got])
        got += len(parts[-1])
        if got >= limit:
            break
    return b"".join(parts)


def _missing(path: Parts, folders: set[Parts]) -> NoSuchMember:
    if path in folders:
        return NoSuchMember("a folder, not a file")
    return NoSuchMember("no such file in the submission")


# --- listing -----------------------------------------------------------------------------


def archive_files(fh: Seekable, size: int, fmt: str, limits: Limits) -> list[str]:
    """Every file path of the tree the archive unpacks to."""
    entries = list(
        _zip_entries(fh, size, limits) if fmt == "zip" else _tar_entries(fh, fmt, limits)
    )
    root = single_root((parts, is_dir) for parts, is_dir in entries)
    cut = 1 if root else 0
    return sorted("/".join(parts[cut:]) for parts, is_dir in entries if not is_dir)


def _zip_is_dir(e: _ZipEntry) -> bool:
    """A folder entry, as `extract_zip` tells one."""
    return e.name.endswith(b"/") or stat.S_IFMT(e.mode) == stat.S_IFDIR


def _zip_entries(fh: Seekable, size: int, limits: Limits) -> Iterator[tuple[Parts, bool]]:
    entries, _ = _zip_directory(fh, size, limits)
    for e in entries:
        is_dir = _zip_is_dir(e)
        parts = tree_parts(e.name, limits)
        if parts is not None:
            yield parts, is_dir


def _tar_reader(fh: Seekable, fmt: str, limits: Limits) -> _TarReader:
    cap = limits.max_total_bytes + (limits.max_files + 2) * _TAR_OVERHEAD_PER_ENTRY
    return _TarReader(Stream(decoder(fh, fmt, limits), cap))


def _tar_entries(fh: Seekable, fmt: str, limits: Limits) -> Iterator[tuple[Parts, bool]]:
    for member in _tar_reader(fh, fmt, limits):
        if member.type not in (*_TAR_FILE_TYPES, _TAR_DIR_TYPE):
            continue  # an accepted archive holds no others
        parts = tree_parts(member.name, limits)
        if parts is not None:
            yield parts, member.type == _TAR_DIR_TYPE


# --- one member --------------------------------------------------------------------------


def read_member(fh: Seekable, size: int, fmt: str, path: str, limit: int, limits: Limits) -> Member:
    """The first `limit` bytes of the tree's file at `path` (a checked relative path)."""
    want = tuple(path.split("/"))
    if fmt == "zip":
        return _zip_member(fh, size, want, limit, limits)
    return _tar_member(fh, fmt, want, limit, limits)


def _folders(parts: Parts, is_dir: bool) -> Iterator[Parts]:
    """The folders an entry makes: its parents, and itself when it is one."""
    for depth in range(1, len(parts) + (1 if is_dir else 0)):
        yield parts[:depth]


def _zip_member(fh: Seekable, size: int, want: Parts, limit: int, limits: Limits) -> Member:
    entries, cd_offset = _zip_directory(fh, size, limits)
    _zip_check_layout(fh, entries, cd_offset)  # where each member's data starts
    named = []
    for e in entries:
        is_dir = _zip_is_dir(e)
        parts = tree_parts(e.name, limits)
        if parts is not None:
            named.append((parts, is_dir, e))
    cut = 1 if single_root((p, d) for p, d, _ in named) else 0
    folders: set[Parts] = set()
    for parts, is_dir, e in named:
        folders.update(f[cut:] for f in _folders(parts, is_dir))
        if not is_dir and parts[cut:] == want:
            check_size(e.file_size, limits, "/".join(want))
            return Member(_head(_zip_chunks(fh, e), limit), e.file_size)
    raise _missing(want, folders)


def _tar_member(fh: Seekable, fmt: str, want: Parts, limit: int, limits: Limits) -> Member:
    # Whether a single root is stripped is known only at the end: keep the file found at
    # `want` itself and the one found at `<top>/want` while only one top was seen.
    reader = _tar_reader(fh, fmt, limits)
    seen: list[tuple[Parts, bool]] = []
    tops: set[str] = set()
    found: dict[int, Member] = {}  # 0: at want; 1: under the single top
    for member in reader:
        if member.type not in (*_TAR_FILE_TYPES, _TAR_DIR_TYPE):
            continue
        parts = tree_parts(member.name, limits)
        if parts is None:
            continue
        is_dir = member.type == _TAR_DIR_TYPE
        seen.append((parts, is_dir))
        tops.add(parts[0])
        if is_dir:
            continue
        for cut in (0, 1):
            if parts[cut:] == want and (cut == 0 or len(tops) == 1) and cut not in found:
                entry = name_text(member.name)
                if member.size > limits.max_file_bytes:
                    found[cut] = Member(b"", member.size)  # refused below if it is the one
                else:
                    found[cut] = Member(_head(reader.data(member, entry), limit), member.size)
    cut = 1 if single_root(seen) else 0
    if cut in found:
        check_size(found[cut].size, limits, "/".join(want))
        return found[cut]
    folders = {f[cut:] for parts, is_dir in seen for f in _folders(parts, is_dir)}
    raise _missing(want, folders)
