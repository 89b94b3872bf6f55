"""Zip: the central directory parsed here (overlapping entries refused, CVE-2024-0450),
zip64, and the entries' data streamed with the limits applied."""

from __future__ import annotations

import os
import re
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from submissions.intake.archive.core import (
    CHUNK,
    ArchiveRejected,
    Limits,
    Seekable,
    corrupt,
    name_text,
)
from submissions.intake.archive.sink import Sink

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


def _zip_directory(fh: Seekable, size: int, limits: Limits) -> tuple[list[_ZipEntry], int]:
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
                raise corrupt("the zip64 end record is missing")
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
        raise corrupt("the central directory is not where the end record says")

    fh.seek(cd_offset)
    entries = []
    for _ in range(count):
        record = fh.read(_CENTRAL.size)
        if len(record) < _CENTRAL.size or record[:4] != b"PK\x01\x02":
            raise corrupt("a central directory record is damaged")
        fields = _CENTRAL.unpack(record)
        flags, method, crc, csize, usize = fields[5], fields[6], fields[9], fields[10], fields[11]
        name_len, extra_len, comment_len = fields[12], fields[13], fields[14]
        external_attr, offset = fields[17], fields[18]
        name = fh.read(name_len)
        extra = fh.read(extra_len)
        fh.seek(comment_len, os.SEEK_CUR)
        if len(name) < name_len or len(extra) < extra_len:
            raise corrupt("a central directory record is cut short")
        if _U32 in (csize, usize, offset):
            usize, csize, offset = _zip64_sizes(extra, usize, csize, offset, name)
        entries.append(
            _ZipEntry(name, flags, method, crc, csize, usize, external_attr >> 16, offset)
        )
    if fh.tell() != cd_end:
        raise corrupt("the central directory size does not match its records")
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
                        raise corrupt("the zip64 extra field is cut short", name)
                    values[index] = struct.unpack_from("<Q", data, cursor)[0]
                    cursor += 8
            return values[0], values[1], values[2]
        pos += 4 + length
    raise corrupt("the zip64 sizes are missing", name)


def _zip_check_layout(fh: Seekable, entries: list[_ZipEntry], cd_offset: int) -> None:
    """Find each entry's data and refuse entries whose bytes overlap (CVE-2024-0450)."""
    for e in entries:
        fh.seek(e.header_offset)
        header = fh.read(_LOCAL.size)
        if len(header) < _LOCAL.size or header[:4] != b"PK\x03\x04":
            raise corrupt("the local header is missing", e.name)
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
                f"the entry shares its bytes with {name_text(e.name)!r}",
                name_text(following.name),
            )
        if following is None and e.data_start + e.compress_size > cd_offset:
            raise ArchiveRejected(
                "overlap", "the entry's data runs into the central directory", name_text(e.name)
            )


def _zip_chunks(fh: Seekable, e: _ZipEntry) -> Iterator[bytes]:
    """The member's uncompressed bytes, from its own compressed range, CRC-checked."""
    fh.seek(e.header_offset)
    fields = _LOCAL.unpack(fh.read(_LOCAL.size))
    if fields[4] != e.method or fh.read(fields[10]) != e.name:
        # Tools that trust one header or the other would unpack different files.
        raise corrupt("the local header disagrees with the central directory", e.name)
    fh.seek(e.data_start)
    left = e.compress_size
    size = crc = 0
    if e.method == _ZIP_STORED:
        while left:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                raise ArchiveRejected(
                    "truncated", "the member's data is cut short", name_text(e.name)
                )
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
                        "truncated", "the member's data is cut short", name_text(e.name)
                    )
                left -= len(pending)
            try:
                # max_length bounds memory whatever the stream claims to hold.
                out = inflater.decompress(pending, CHUNK)
            except zlib.error as exc:
                raise corrupt(f"the deflate data is damaged ({exc})", e.name) from None
            pending = inflater.unconsumed_tail
            if out:
                size += len(out)
                crc = zlib.crc32(out, crc)
                yield out
            elif not (pending or left or inflater.eof):
                raise corrupt("the deflate data ends early", e.name)
    if size != e.file_size or crc != e.crc:
        raise corrupt("the member's size or CRC does not match its header", e.name)


def extract_zip(fh: Seekable, size: int, sink: Sink, limits: Limits) -> None:
    entries, cd_offset = _zip_directory(fh, size, limits)
    _zip_check_layout(fh, entries, cd_offset)
    for e in entries:
        entry = name_text(e.name)
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
