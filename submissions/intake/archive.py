"""Safe unpacking of candidate archives: zip, tar, tar.gz, tar.bz2 and tar.xz.

An allowlist extractor. Only regular files and directories are created; every name is
checked and refused, never rewritten; sizes come from the bytes actually produced, not from
headers; and the tree appears at its destination only once the whole archive has passed.
Stdlib only and free of Django, so intake, the `ingest` command and tests call it directly.

Zip central directories and tar headers are parsed here rather than by zipfile/tarfile:
Python 3.11.7 lacks the overlapping-entry check (CVE-2024-0450), parses pax headers in
quadratic time (CVE-2024-6232), and its tarfile ends a listing silently at a corrupt or
truncated header, which would pass a damaged archive off as a complete one.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import lzma
import os
import re
import shutil
import stat
import struct
import tempfile
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "RULES",
    "ArchiveRejected",
    "ExtractResult",
    "Limits",
    "detect_format",
    "extract_archive",
    "sha256_file",
]

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


_DEFAULT_LIMITS = Limits()


class ArchiveRejected(Exception):
    """The archive was refused: `rule` is a stable id, `entry` the offending entry or None."""

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


def detect_format(path: Path) -> str:
    """Name the archive format from its magic bytes, or raise ArchiveRejected."""
    with Path(path).open("rb") as fh:
        return _sniff(fh, _DEFAULT_LIMITS)


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def extract_archive(archive: Path, dest: Path, limits: Limits = _DEFAULT_LIMITS) -> ExtractResult:
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
            sink = _Sink(partial, limits, size)
            try:
                if fmt == "zip":
                    _extract_zip(fh, size, sink, limits)
                else:
                    _extract_tar(fh, fmt, sink, limits)
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


# --- names -----------------------------------------------------------------------------

CHUNK = 64 * 1024
_BLOCK = 512

_DRIVE = re.compile(r"[A-Za-z]:")
_SEPARATORS = re.compile(r"[/\\]")
_IGNORED_TOP = "__MACOSX"
_IGNORED_LEAF = ".DS_Store"


def _text(raw: bytes) -> str:
    """An entry name for messages: undecodable bytes shown as \\xNN."""
    return raw.decode("utf-8", "backslashreplace")


def _name_parts(raw: bytes, limits: Limits) -> tuple[str, ...]:
    """The path components of an entry name, or ArchiveRejected if the name is unsafe."""
    entry = _text(raw)
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


def _fold(path: str) -> str:
    """A key under which names that differ only in case or Unicode normalisation meet."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", path).casefold())


# --- writing ---------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Sink:
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
        entry = _text(raw_name)
        parts = _name_parts(raw_name, self._limits)
        if not parts:
            if is_dir:
                return None  # "./", the archive root itself
            raise ArchiveRejected("bad_name", "the name does not name a file", entry)
        if parts[0] == _IGNORED_TOP or parts[-1] == _IGNORED_LEAF:
            return None  # macOS Finder litter
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


# --- zip -------------------------------------------------------------------------------

_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_ZIP_STORED = 0
_ZIP_DEFLATED = 8
_ZIP_AES = 99
_ZIP_ENCRYPTED_FLAGS = 0x0001 | 0x0040  # traditional and strong encryption
_ZIP_UNSAFE_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}
_U32 = 0xFFFFFFFF


@dataclass
class _ZipEntry:
    name: bytes
    flags: int
    method: int
    crc: int
    compress_size: int
    file_size: int
    mode: int  # the Unix mode from the high half of external_attr
    header_offset: int
    data_start: int = 0
    local_flags: int = 0


def _corrupt(detail: str, entry: bytes | None = None) -> ArchiveRejected:
    return ArchiveRejected("corrupt", detail, None if entry is None else _text(entry))


def _zip_directory(fh: _File, size: int, limits: Limits) -> tuple[list[_ZipEntry], int]:
    """The entries of the central directory, and the offset where it starts."""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    # The end record is followed by a comment of its stated length; a signature inside the
    # comment fails that test, so prefer an exact fit and fall back to the last one found.
    candidates = [m.start() for m in re.finditer(re.escape(b"PK\x05\x06"), tail)]
    candidates = [pos for pos in candidates if pos + _EOCD.size <= len(tail)]
    if not candidates:
        raise ArchiveRejected("truncated", "the zip end record is missing; the file is cut short")
    exact = [p for p in candidates if p + _EOCD.size + _EOCD.unpack_from(tail, p)[7] == len(tail)]
    pos = (exact or candidates)[-1]
    _, disk, cd_disk, disk_count, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, pos)
    end_at = size - tail_len + pos
    cd_end = end_at
    if end_at >= _EOCD64_LOCATOR.size:
        fh.seek(end_at - _EOCD64_LOCATOR.size)
        locator = fh.read(_EOCD64_LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":
            zip64_at = _EOCD64_LOCATOR.unpack(locator)[2]
            fh.seek(zip64_at)
            record = fh.read(_EOCD64.size)
            if len(record) < _EOCD64.size or record[:4] != b"PK\x06\x06":
                raise _corrupt("the zip64 end record is missing")
            _, _, _, _, disk, cd_disk, disk_count, count, cd_size, cd_offset = _EOCD64.unpack(
                record
            )
            cd_end = zip64_at
    if disk or cd_disk or disk_count != count:
        raise ArchiveRejected("unsupported", "split (multi-disk) zip archives are not supported")
    if count > limits.max_files:
        raise ArchiveRejected(
            "too_many_files",
            f"the archive lists {count} entries, over the limit of {limits.max_files} (max_files)",
        )
    if cd_offset + cd_size != cd_end:
        raise _corrupt("the central directory is not where the end record says")

    fh.seek(cd_offset)
    entries = []
    for _ in range(count):
        record = fh.read(_CENTRAL.size)
        if len(record) < _CENTRAL.size or record[:4] != b"PK\x01\x02":
            raise _corrupt("a central directory record is damaged")
        fields = _CENTRAL.unpack(record)
        flags, method, crc, csize, usize = fields[5], fields[6], fields[9], fields[10], fields[11]
        name_len, extra_len, comment_len = fields[12], fields[13], fields[14]
        external_attr, offset = fields[17], fields[18]
        name = fh.read(name_len)
        extra = fh.read(extra_len)
        fh.seek(comment_len, os.SEEK_CUR)
        if len(name) < name_len or len(extra) < extra_len:
            raise _corrupt("a central directory record is cut short")
        if _U32 in (csize, usize, offset):
            usize, csize, offset = _zip64_sizes(extra, usize, csize, offset, name)
        entries.append(
            _ZipEntry(name, flags, method, crc, csize, usize, external_attr >> 16, offset)
        )
    if fh.tell() != cd_end:
        raise _corrupt("the central directory size does not match its records")
    return entries, cd_offset


def _zip64_sizes(
    extra: bytes, usize: int, csize: int, offset: int, name: bytes
) -> tuple[int, int, int]:
    """Replace the 0xFFFFFFFF placeholders from the zip64 extra field, in their fixed order."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 0x0001:
            data = extra[pos + 4 : pos + 4 + length]
            values = [usize, csize, offset]
            cursor = 0
            for index, value in enumerate(values):
                if value == _U32:
                    if cursor + 8 > len(data):
                        raise _corrupt("the zip64 extra field is cut short", name)
                    values[index] = struct.unpack_from("<Q", data, cursor)[0]
                    cursor += 8
            return values[0], values[1], values[2]
        pos += 4 + length
    raise _corrupt("the zip64 sizes are missing", name)


def _zip_check_layout(fh: _File, entries: list[_ZipEntry], cd_offset: int) -> None:
    """Find each entry's data and refuse entries whose bytes overlap (CVE-2024-0450)."""
    for e in entries:
        fh.seek(e.header_offset)
        header = fh.read(_LOCAL.size)
        if len(header) < _LOCAL.size or header[:4] != b"PK\x03\x04":
            raise _corrupt("the local header is missing", e.name)
        fields = _LOCAL.unpack(header)
        e.local_flags = fields[3]
        e.data_start = e.header_offset + _LOCAL.size + fields[10] + fields[11]
    # A non-recursive zip bomb points many entries at one shared run of compressed data.
    ordered = sorted(entries, key=lambda e: e.header_offset)
    for index, e in enumerate(ordered):
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        if following is not None and e.data_start + e.compress_size > following.header_offset:
            raise ArchiveRejected(
                "overlap",
                f"the entry shares its bytes with {_text(e.name)!r}",
                _text(following.name),
            )
        if following is None and e.data_start + e.compress_size > cd_offset:
            raise ArchiveRejected(
                "overlap", "the entry's data runs into the central directory", _text(e.name)
            )


def _zip_chunks(fh: _File, e: _ZipEntry) -> Iterator[bytes]:
    """The member's uncompressed bytes, from its own compressed range, CRC-checked."""
    fh.seek(e.header_offset)
    fields = _LOCAL.unpack(fh.read(_LOCAL.size))
    if fields[4] != e.method or fh.read(fields[10]) != e.name:
        # Tools that trust one header or the other would unpack different files.
        raise _corrupt("the local header disagrees with the central directory", e.name)
    fh.seek(e.data_start)
    left = e.compress_size
    size = crc = 0
    if e.method == _ZIP_STORED:
        while left:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                raise ArchiveRejected("truncated", "the member's data is cut short", _text(e.name))
            left -= len(chunk)
            size += len(chunk)
            crc = zlib.crc32(chunk, crc)
            yield chunk
    else:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        pending = b""
        while not inflater.eof:
            if not pending and left:
                pending = fh.read(min(CHUNK, left))
                if not pending:
                    raise ArchiveRejected(
                        "truncated", "the member's data is cut short", _text(e.name)
                    )
                left -= len(pending)
            try:
                # max_length bounds memory whatever the stream claims to hold.
                out = inflater.decompress(pending, CHUNK)
            except zlib.error as exc:
                raise _corrupt(f"the deflate data is damaged ({exc})", e.name) from None
            pending = inflater.unconsumed_tail
            if out:
                size += len(out)
                crc = zlib.crc32(out, crc)
                yield out
            elif not (pending or left or inflater.eof):
                raise _corrupt("the deflate data ends early", e.name)
    if size != e.file_size or crc != e.crc:
        raise _corrupt("the member's size or CRC does not match its header", e.name)


def _extract_zip(fh: _File, size: int, sink: _Sink, limits: Limits) -> None:
    entries, cd_offset = _zip_directory(fh, size, limits)
    _zip_check_layout(fh, entries, cd_offset)
    for e in entries:
        entry = _text(e.name)
        kind = stat.S_IFMT(e.mode)
        if kind == stat.S_IFLNK:
            raise ArchiveRejected("link", "the entry is a symbolic link", entry)
        if kind in _ZIP_UNSAFE_KINDS:
            raise ArchiveRejected("special_file", f"the entry is {_ZIP_UNSAFE_KINDS[kind]}", entry)
        if (e.flags | e.local_flags) & _ZIP_ENCRYPTED_FLAGS or e.method == _ZIP_AES:
            raise ArchiveRejected("encrypted", "the entry is encrypted", entry)
        is_dir = e.name.endswith(b"/") or kind == stat.S_IFDIR
        parts = sink.place(e.name, is_dir)
        if parts is None:
            continue
        if is_dir:
            sink.directory(parts, entry)
            continue
        if e.method not in (_ZIP_STORED, _ZIP_DEFLATED):
            raise ArchiveRejected(
                "unsupported", f"compression method {e.method} is not supported", entry
            )
        sink.file(parts, entry, _zip_chunks(fh, e), e.compress_size, bool(e.mode & 0o111))


# --- tar -------------------------------------------------------------------------------

_ZERO_BLOCK = bytes(_BLOCK)
_TAR_META_LIMIT = 256 * 1024  # one pax or GNU long-name header; real ones are a few hundred bytes
_TAR_OVERHEAD_PER_ENTRY = 16 * _BLOCK  # headers and padding allowed on top of max_total_bytes
_TAR_FILE_TYPES = (b"0", b"\0", b"7")
_TAR_DIR_TYPE = b"5"
_TAR_LINK_TYPES = {b"1": "a hard link", b"2": "a symbolic link"}
_TAR_SPECIAL_TYPES = {b"3": "a character device", b"4": "a block device", b"6": "a FIFO"}
_TAR_META_TYPES = (b"x", b"g", b"L", b"K")
_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"


class _File(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _XzReader:
    """An .xz decoder with liblzma's memory limit, which lzma.open cannot set."""

    def __init__(self, fh: _Readable, memlimit: int) -> None:
        self._fh = fh
        self._memlimit = memlimit
        self._decoder = self._new()

    def _new(self) -> lzma.LZMADecompressor:
        return lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=self._memlimit)

    def read(self, size: int) -> bytes:
        """Up to `size` bytes; b"" at the end of the last stream."""
        while True:
            data = b""
            if self._decoder.eof:
                data = self._decoder.unused_data or self._fh.read(CHUNK)
                if not data:
                    return b""
                self._decoder = self._new()  # xz files may hold several streams back to back
            elif self._decoder.needs_input:
                data = self._fh.read(CHUNK)
                if not data:
                    raise EOFError("the xz stream ends before its end marker")
            out = self._decoder.decompress(data, size)
            if out:
                return out


class _Stream:
    """The decompressed tar bytes, counted against a cap; decoder errors become rejections."""

    def __init__(self, raw: _Readable, cap: int) -> None:
        self._raw = raw
        self._cap = cap
        self._consumed = 0

    def read(self, size: int) -> bytes:
        """Exactly `size` bytes, or fewer only at the end of the stream."""
        parts = []
        want = size
        while want:
            chunk = self._read_raw(want)
            if not chunk:
                break
            parts.append(chunk)
            want -= len(chunk)
        data = b"".join(parts)
        self._consumed += len(data)
        if self._consumed > self._cap:
            raise ArchiveRejected(
                "total_too_large",
                f"the tar stream expands past {self._cap} bytes"
                " (max_total_bytes plus room for headers)",
            )
        return data

    def skip(self, size: int) -> None:
        """Discard `size` bytes that must be there."""
        while size:
            chunk = self.read(min(size, CHUNK))
            if not chunk:
                raise ArchiveRejected("truncated", "the tar stream is cut short")
            size -= len(chunk)

    def _read_raw(self, size: int) -> bytes:
        try:
            return self._raw.read(size)
        except EOFError:
            raise ArchiveRejected("truncated", "the compressed stream is cut short") from None
        except lzma.LZMAError as exc:
            if "memory" in str(exc).lower():
                raise ArchiveRejected(
                    "decoder_memory",
                    "the xz stream needs more decoder memory than allowed (max_xz_memory_bytes)",
                ) from None
            raise ArchiveRejected("corrupt", f"the xz stream is damaged ({exc})") from None
        except (OSError, zlib.error) as exc:
            raise ArchiveRejected("corrupt", f"the compressed stream is damaged ({exc})") from None


@dataclass
class _TarHeader:
    name: bytes
    type: bytes
    size: int
    linkname: bytes
    mode: int = 0o644


@dataclass
class _TarMember:
    name: bytes
    type: bytes
    size: int
    linkname: bytes
    sparse: bool
    mode: int = 0o644


def _tar_number(field: bytes) -> int:
    """A numeric header field: NUL/space-padded octal, or GNU base-256."""
    if field[0] == 0x80:
        return int.from_bytes(field[1:], "big")
    if field[0] == 0xFF:
        raise _corrupt("a tar header holds a negative number")
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if not digits:
        return 0
    if digits.translate(None, b"01234567"):  # anything left over is not octal
        raise _corrupt("a tar header holds a malformed number")
    return int(digits, 8)


def _tar_checksum_ok(block: bytes) -> bool:
    try:
        stored = _tar_number(block[148:156])
    except ArchiveRejected:
        return False
    # Some old tars summed signed chars; tarfile and GNU tar accept either sum.
    unsigned = 256 + sum(struct.unpack_from("148B8x356B", block))
    signed = 256 + sum(struct.unpack_from("148b8x356b", block))
    return stored in (unsigned, signed)


def _looks_like_tar(block: bytes) -> bool:
    return len(block) == _BLOCK and (block == _ZERO_BLOCK or _tar_checksum_ok(block))


def _nts(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def _tar_header(block: bytes) -> _TarHeader:
    if not _tar_checksum_ok(block):
        raise _corrupt("a tar header fails its checksum")
    name = _nts(block[0:100])
    if block[257:263] == b"ustar\x00":  # POSIX ustar: long names are split into a prefix
        prefix = _nts(block[345:500])
        if prefix:
            name = prefix + b"/" + name
    try:
        mode = _tar_number(block[100:108])
    except ArchiveRejected:
        mode = 0o644  # a garbled mode only loses the executable bit, nothing else reads it
    return _TarHeader(name, block[156:157], _tar_number(block[124:136]), _nts(block[157:257]), mode)


def _pax_records(data: bytes) -> dict[bytes, bytes]:
    """Parse `<length> <key>=<value>\\n` records in one linear pass."""
    records = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos, pos + 21)
        digits = data[pos:space] if space > 0 else b""
        if not digits.isdigit():
            raise _corrupt("a pax header is malformed")
        end = pos + int(digits)
        if end <= space + 1 or end > len(data) or data[end - 1] != 0x0A:
            raise _corrupt("a pax header is malformed")
        key, sep, value = data[space + 1 : end - 1].partition(b"=")
        if not sep or not key:
            raise _corrupt("a pax header is malformed")
        records[key] = value
        pos = end
    return records


def _padded(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


class _TarReader:
    """A strict streaming tar parser: ustar, GNU long names and pax headers, nothing more."""

    def __init__(self, stream: _Stream) -> None:
        self._stream = stream
        self._unread = 0  # data and padding of the current member not yet consumed
        self._global: dict[bytes, bytes] = {}

    def __iter__(self) -> Iterator[_TarMember]:
        while (member := self._next()) is not None:
            yield member

    def data(self, member: _TarMember, entry: str) -> Iterator[bytes]:
        """The member's bytes, in chunks."""
        left = member.size
        while left:
            try:
                chunk = self._stream.read(min(CHUNK, left))
            except ArchiveRejected as exc:
                if exc.entry is not None:
                    raise
                raise ArchiveRejected(exc.rule, exc.detail, entry) from None
            if not chunk:
                raise ArchiveRejected("truncated", "the member's data is cut short", entry)
            left -= len(chunk)
            self._unread -= len(chunk)
            yield chunk

    def _next(self) -> _TarMember | None:
        self._stream.skip(self._unread)
        self._unread = 0
        pax: dict[bytes, bytes] = {}
        long_name = long_link = b""
        while True:
            block = self._stream.read(_BLOCK)
            if len(block) < _BLOCK:
                raise ArchiveRejected(
                    "truncated", "the tar stream ends without its end-of-archive marker"
                )
            if block == _ZERO_BLOCK:
                if pax or long_name or long_link:
                    raise _corrupt("an extended header is not followed by an entry")
                return None
            header = _tar_header(block)
            if header.type not in _TAR_META_TYPES:
                break
            data = self._meta(header)
            if header.type == b"x":
                pax.update(_pax_records(data))
            elif header.type == b"g":
                self._global.update(_pax_records(data))
            elif header.type == b"L":
                long_name = _nts(data)
            else:
                long_link = _nts(data)
        fields = {**self._global, **pax}
        name = fields.get(b"path") or long_name or header.name
        size = header.size
        if b"size" in fields:
            if not fields[b"size"].isdigit():
                raise _corrupt("a pax size is malformed", name)
            size = int(fields[b"size"])
        kind = header.type
        if kind == b"\0" and name.endswith(b"/"):
            kind = _TAR_DIR_TYPE  # how V7 tar marked directories
        # Links, devices, FIFOs and directories carry no data blocks; every other type does.
        if kind not in (*_TAR_LINK_TYPES, *_TAR_SPECIAL_TYPES, _TAR_DIR_TYPE):
            self._unread = _padded(size)
        return _TarMember(
            name=name,
            type=kind,
            size=size,
            linkname=fields.get(b"linkpath") or long_link or header.linkname,
            sparse=kind == b"S" or any(key.startswith(b"GNU.sparse.") for key in fields),
            mode=header.mode,
        )

    def _meta(self, header: _TarHeader) -> bytes:
        if header.size > _TAR_META_LIMIT:
            raise ArchiveRejected(
                "bad_header",
                f"an extended tar header of {header.size} bytes is over the limit of"
                f" {_TAR_META_LIMIT}",
            )
        data = self._stream.read(header.size)
        if len(data) < header.size:
            raise ArchiveRejected("truncated", "the tar stream is cut short")
        self._stream.skip(_padded(header.size) - header.size)
        return data


def _decoder(fh: _File, fmt: str, limits: Limits) -> _Readable:
    """A reader of the archive's tar bytes; gzip and bz2 readers bound each read's output."""
    fh.seek(0)
    if fmt == "tar.gz":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if fmt == "tar.bz2":
        return bz2.BZ2File(fh)
    if fmt == "tar.xz":
        return _XzReader(fh, limits.max_xz_memory_bytes)
    return fh


def _extract_tar(fh: _File, fmt: str, sink: _Sink, limits: Limits) -> None:
    cap = limits.max_total_bytes + (limits.max_files + 2) * _TAR_OVERHEAD_PER_ENTRY
    reader = _TarReader(_Stream(_decoder(fh, fmt, limits), cap))
    for count, member in enumerate(reader, start=1):
        entry = _text(member.name)
        if count > limits.max_files:
            raise ArchiveRejected(
                "too_many_files",
                f"the archive has more than {limits.max_files} entries (max_files)",
                entry,
            )
        if member.type in _TAR_LINK_TYPES:
            raise ArchiveRejected(
                "link",
                f"the entry is {_TAR_LINK_TYPES[member.type]} to {_text(member.linkname)!r}",
                entry,
            )
        if member.type in _TAR_SPECIAL_TYPES:
            raise ArchiveRejected(
                "special_file", f"the entry is {_TAR_SPECIAL_TYPES[member.type]}", entry
            )
        if member.sparse:
            raise ArchiveRejected("special_file", "the entry is a sparse file", entry)
        if member.type not in (*_TAR_FILE_TYPES, _TAR_DIR_TYPE):
            raise ArchiveRejected(
                "special_file", f"entry type {_text(member.type)!r} is not supported", entry
            )
        is_dir = member.type == _TAR_DIR_TYPE
        parts = sink.place(member.name, is_dir)
        if parts is None:
            continue
        if is_dir:
            sink.directory(parts, entry)
            continue
        sink.file(parts, entry, reader.data(member, entry), None, bool(member.mode & 0o111))


def _sniff(fh: _File, limits: Limits) -> str:
    """The archive format from magic bytes; compressed files must hold a tar inside."""
    fh.seek(0)
    head = fh.read(_BLOCK)
    if not head:
        raise ArchiveRejected("not_an_archive", "the file is empty")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    fmt = None
    if head.startswith(_GZIP_MAGIC):
        fmt = "tar.gz"
    elif head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0":
        fmt = "tar.bz2"
    elif head.startswith(_XZ_MAGIC):
        fmt = "tar.xz"
    if fmt is not None:
        first = _Stream(_decoder(fh, fmt, limits), _BLOCK).read(_BLOCK)
        if _looks_like_tar(first):
            return fmt
        raise ArchiveRejected("not_an_archive", f"the {fmt[4:]} file does not hold a tar archive")
    if _looks_like_tar(head):
        return "tar"
    raise ArchiveRejected("not_an_archive", "the file is neither a zip nor a tar archive")
