"""Safe unpacking of candidate archives: zip, tar, tar.gz, tar.bz2 and tar.xz.

An allowlist extractor. Only regular files and directories are created; every name is
checked and refused, never rewritten; sizes come from the bytes actually produced, not from
headers; and the tree appears at its destination only once the whole archive has passed.
Stdlib only and free of Django, so intake, the `ingest` command and tests call it directly.

Zip central directories and tar headers are parsed here rather than by zipfile/tarfile:
Python 3.11.7 lacks the overlapping-entry check (CVE-2024-0450), parses pax headers in
quadratic time (CVE-2024-6232), and its tarfile ends a listing silently at a corrupt or
truncated header, which would pass a damaged archive off as a complete one.

Modules: `core` (rules, limits, rejection, result), `sink` (names and placement), `zip`, `tar`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from submissions.intake.archive.core import (
    BLOCK,
    DEFAULT_LIMITS,
    RULES,
    ArchiveRejected,
    ExtractResult,
    Limits,
    Seekable,
    sha256_file,
)
from submissions.intake.archive.sink import Sink
from submissions.intake.archive.tar import (
    GZIP_MAGIC,
    XZ_MAGIC,
    Stream,
    decoder,
    extract_tar,
    looks_like_tar,
)
from submissions.intake.archive.zip import extract_zip

__all__ = [
    "RULES",
    "ArchiveRejected",
    "ExtractResult",
    "Limits",
    "detect_format",
    "extract_archive",
    "sha256_file",
]


def detect_format(path: Path) -> str:
    """Name the archive format from its magic bytes, or raise ArchiveRejected."""
    with Path(path).open("rb") as fh:
        return _sniff(fh, DEFAULT_LIMITS)


def extract_archive(archive: Path, dest: Path, limits: Limits = DEFAULT_LIMITS) -> ExtractResult:
    """Unpack `archive` into the new directory `dest`, all or nothing."""
    archive, dest = Path(archive), Path(dest)
    if os.path.lexists(dest):
        raise ValueError(f"destination already exists: {dest}")
    with archive.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limits.max_upload_bytes:
            raise ArchiveRejected(
                "upload_too_large",
                f"the archive is {size} bytes, over the limit of {limits.max_upload_bytes}"
                " (max_upload_bytes)",
            )
        fmt = _sniff(fh, limits)
        partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
        try:
            sink = Sink(partial, limits, size)
            try:
                if fmt == "zip":
                    extract_zip(fh, size, sink, limits)
                else:
                    extract_tar(fh, fmt, sink, limits)
            finally:
                sink.close()
            if sink.files == 0:
                raise ArchiveRejected("empty", "the archive holds no files")
            root = sink.single_root()
            if root is None:
                os.chmod(partial, 0o755)  # noqa: S103 - the policy: folders are 0755
                os.rename(partial, dest)
            else:
                os.rename(partial / root, dest)
                os.rmdir(partial)
        except BaseException:
            shutil.rmtree(partial)
            raise
    return ExtractResult(fmt, sink.files, sink.bytes, root)


def _sniff(fh: Seekable, limits: Limits) -> str:
    """The archive format from magic bytes; compressed files must hold a tar inside."""
    fh.seek(0)
    head = fh.read(BLOCK)
    if not head:
        raise ArchiveRejected("not_an_archive", "the file is empty")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    fmt = None
    if head.startswith(GZIP_MAGIC):
        fmt = "tar.gz"
    elif head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0":
        fmt = "tar.bz2"
    elif head.startswith(XZ_MAGIC):
        fmt = "tar.xz"
    if fmt is not None:
        first = Stream(decoder(fh, fmt, limits), BLOCK).read(BLOCK)
        if looks_like_tar(first):
            return fmt
        raise ArchiveRejected("not_an_archive", f"the {fmt[4:]} file does not hold a tar archive")
    if looks_like_tar(head):
        return "tar"
    raise ArchiveRejected("not_an_archive", "the file is neither a zip nor a tar archive")
