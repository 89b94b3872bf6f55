"""Tar (plain, gzip, bzip2, xz): headers and pax records parsed here in linear time
(CVE-2024-6232), and a corrupt or truncated header refused rather than ending the listing."""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from submissions.intake.archive.core import (
    BLOCK,
    CHUNK,
    ArchiveRejected,
    Limits,
    Readable,
    Seekable,
    corrupt,
    name_text,
)
from submissions.intake.archive.sink import Sink

_ZERO_BLOCK = bytes(BLOCK)


_TAR_META_LIMIT = 256 * 1024  # one pax or GNU long-name header; real ones are a few hundred bytes


_TAR_OVERHEAD_PER_ENTRY = 16 * BLOCK  # headers and padding allowed on top of max_total_bytes


_TAR_FILE_TYPES = (b"0", b"\0", b"7")


_TAR_DIR_TYPE = b"5"


_TAR_LINK_TYPES = {b"1": "a hard link", b"2": "a symbolic link"}


_TAR_SPECIAL_TYPES = {b"3": "a character device", b"4": "a block device", b"6": "a FIFO"}


_TAR_META_TYPES = (b"x", b"g", b"L", b"K")


GZIP_MAGIC = b"\x1f\x8b"


XZ_MAGIC = b"\xfd7zXZ\x00"


class _XzReader:
    """An .xz decoder with liblzma's memory limit, which lzma.open cannot set."""

    def __init__(self, fh: Readable, memlimit: int) -> None:
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


class Stream:
    """The decompressed tar bytes, counted against a cap; decoder errors become rejections."""

    def __init__(self, raw: Readable, cap: int) -> None:
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
        raise corrupt("a tar header holds a negative number")
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if not digits:
        return 0
    if digits.translate(None, b"01234567"):  # anything left over is not octal
        raise corrupt("a tar header holds a malformed number")
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


def looks_like_tar(block: bytes) -> bool:
    return len(block) == BLOCK and (block == _ZERO_BLOCK or _tar_checksum_ok(block))


def _nts(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def _tar_header(block: bytes) -> _TarHeader:
    if not _tar_checksum_ok(block):
        raise corrupt("a tar header fails its checksum")
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
            raise corrupt("a pax header is malformed")
        end = pos + int(digits)
        if end <= space + 1 or end > len(data) or data[end - 1] != 0x0A:
            raise corrupt("a pax header is malformed")
        key, sep, value = data[space + 1 : end - 1].partition(b"=")
        if not sep or not key:
            raise corrupt("a pax header is malformed")
        records[key] = value
        pos = end
    return records


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


class _TarReader:
    """A strict streaming tar parser: ustar, GNU long names and pax headers, nothing more."""

    def __init__(self, stream: Stream) -> None:
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
            block = self._stream.read(BLOCK)
            if len(block) < BLOCK:
                raise ArchiveRejected(
                    "truncated", "the tar stream ends without its end-of-archive marker"
                )
            if block == _ZERO_BLOCK:
                if pax or long_name or long_link:
                    raise corrupt("an extended header is not followed by an entry")
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
                raise corrupt("a pax size is malformed", name)
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


def decoder(fh: Seekable, fmt: str, limits: Limits) -> Readable:
    """A reader of the archive's tar bytes; gzip and bz2 readers bound each read's output."""
    fh.seek(0)
    if fmt == "tar.gz":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if fmt == "tar.bz2":
        return bz2.BZ2File(fh)
    if fmt == "tar.xz":
        return _XzReader(fh, limits.max_xz_memory_bytes)
    return fh


def extract_tar(fh: Seekable, fmt: str, sink: Sink, limits: Limits) -> None:
    cap = limits.max_total_bytes + (limits.max_files + 2) * _TAR_OVERHEAD_PER_ENTRY
    reader = _TarReader(Stream(decoder(fh, fmt, limits), cap))
    for count, member in enumerate(reader, start=1):
        entry = name_text(member.name)
        if count > limits.max_files:
            raise ArchiveRejected(
                "too_many_files",
                f"the archive has more than {limits.max_files} entries (max_files)",
                entry,
            )
        if member.type in _TAR_LINK_TYPES:
            raise ArchiveRejected(
                "link",
                f"the entry is {_TAR_LINK_TYPES[member.type]} to {name_text(member.linkname)!r}",
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
                "special_file", f"entry type {name_text(member.type)!r} is not supported", entry
            )
        is_dir = member.type == _TAR_DIR_TYPE
        parts = sink.place(member.name, is_dir)
        if parts is None:
            continue
        if is_dir:
            sink.directory(parts, entry)
            continue
        sink.file(parts, entry, reader.data(member, entry), None, bool(member.mode & 0o111))
