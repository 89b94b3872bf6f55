"""What every archive format shares: the rules, the limits, the rejection, the result."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

RULES = frozenset(
    {
        "upload_too_large",
        "not_an_archive",
        "truncated",
        "corrupt",
        "unsupported",
        "empty",
        "zip_slip",
        "absolute_path",
        "bad_name",
        "name_too_long",
        "too_deep",
        "collision",
        "duplicate",
        "link",
        "special_file",
        "encrypted",
        "overlap",
        "too_many_files",
        "file_too_large",
        "total_too_large",
        "ratio",
        "bad_header",
        "decoder_memory",
        # git bundles and repositories (submissions/intake/git)
        "incomplete",
        "no_such_ref",
        "no_commit_before",
        "pack_too_large",
        "too_many_objects",
        "object_too_large",
        "history_too_large",
        "delta_too_deep",
        "fetch_refused",
        "fetch_failed",
    }
)


@dataclass(frozen=True)
class Limits:
    """Caps applied while unpacking; the defaults are the intake policy's starting values."""

    max_upload_bytes: int = 50 * 2**20
    max_total_bytes: int = 500 * 2**20  # total uncompressed
    max_file_bytes: int = 100 * 2**20  # one member
    max_files: int = 20_000  # archive entries; directories created are capped at this too
    max_ratio: int = 100  # one zip member, uncompressed:compressed
    max_total_ratio: int = 50  # everything written : archive size
    ratio_floor_bytes: int = 2**20  # below this, neither ratio is checked
    max_depth: int = 32
    max_path_bytes: int = 1024
    max_component_bytes: int = 255
    max_xz_memory_bytes: int = 128 * 2**20  # `xz -9` needs 65 MiB to decode


DEFAULT_LIMITS = Limits()


class ArchiveRejected(Exception):
    """The archive was refused: `rule` is a stable id, `entry` the offending entry or None."""

    # A git hand-in refused in its tree still names the ref and commit that were judged.
    ref: str = ""
    commit: str = ""

    def __init__(self, rule: str, detail: str, entry: str | None = None) -> None:
        # args mirror __init__ so the exception survives pickling (Celery results).
        super().__init__(rule, detail, entry)
        self.rule = rule
        self.detail = detail
        self.entry = entry

    def __str__(self) -> str:
        where = "archive" if self.entry is None else f"entry {self.entry!r}"
        return f"{where}: {self.detail} ({self.rule})"


@dataclass
class ExtractResult:
    """What an accepted archive unpacked to."""

    format: str  # "zip" | "tar" | "tar.gz" | "tar.bz2" | "tar.xz"
    files: int
    total_bytes: int
    stripped_root: str | None  # the single top-level folder that was stripped, if any


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


CHUNK = 64 * 1024


BLOCK = 512


def name_text(raw: bytes) -> str:
    """An entry name for messages: undecodable bytes shown as \\xNN."""
    return raw.decode("utf-8", "backslashreplace")


def corrupt(detail: str, entry: bytes | None = None) -> ArchiveRejected:
    return ArchiveRejected("corrupt", detail, None if entry is None else name_text(entry))


class Seekable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...
    def seekable(self) -> bool: ...  # bz2 asks its file


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...
