"""Builders of benign and hostile archives, made in code so no binary bomb is ever committed."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import warnings
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

REPO = {
    "README.md": b"# Triage agent\n",
    "Makefile": b"test:\n\tpython -m pytest\n",
    "src/agent.py": b"print('triage')\n",
    "cassettes/0123456789abcdef.json": b'{"key": "0123456789abcdef"}\n',
    "empty.txt": b"",
}

# --- zip through zipfile ------------------------------------------------------------------


def zip_info(name: str, *, mode: int = 0o100644) -> zipfile.ZipInfo:
    """A ZipInfo whose Unix mode (type and permission bits) is `mode`."""
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.create_system = 3  # Unix, so readers look at the high half of external_attr
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def zip_bytes(
    entries: dict[str, bytes] | Iterable[tuple[str | zipfile.ZipInfo, bytes]],
    *,
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    """A zip of (name or ZipInfo, data) pairs, in order; duplicates are allowed."""
    pairs = entries.items() if isinstance(entries, dict) else entries
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name" is the point sometimes
        for name, data in pairs:
            archive.writestr(name, data)
    return buffer.getvalue()


# --- zip by hand --------------------------------------------------------------------------

_U32 = 0xFFFFFFFF


def deflate(data: bytes) -> bytes:
    """Raw deflate, as stored in a zip member."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@dataclass
class RawMember:
    """One zip member written byte by byte; every header field can be made to lie."""

    name: bytes
    content: bytes = b""
    method: int = zipfile.ZIP_DEFLATED
    flags: int = 0
    external_attr: int = 0
    file_size: int | None = None  # None: the true size
    crc: int | None = None  # None: the true CRC
    local_name: bytes | None = None  # None: same as the central directory's

    @property
    def payload(self) -> bytes:
        return deflate(self.content) if self.method == zipfile.ZIP_DEFLATED else self.content

    @property
    def size(self) -> int:
        return len(self.content) if self.file_size is None else self.file_size

    @property
    def checksum(self) -> int:
        return zlib.crc32(self.content) if self.crc is None else self.crc


def local_record(member: RawMember, compress_size: int | None = None) -> bytes:
    """A local file header followed by the member's compressed bytes."""
    payload = member.payload
    name = member.name if member.local_name is None else member.local_name
    header = struct.pack(
        "<4s2B4HL2L2H",
        b"PK\x03\x04",
        20,
        0,
        member.flags,
        member.method,
        0,
        0x5821,
        member.checksum,
        len(payload) if compress_size is None else compress_size,
        member.size,
        len(name),
        0,
    )
    return header + name + payload


def central_record(
    member: RawMember, offset: int, *, compress_size: int | None = None, zip64: bool = False
) -> bytes:
    """A central directory record pointing at the local header at `offset`."""
    csize = len(member.payload) if compress_size is None else compress_size
    usize, extra = member.size, b""
    if zip64:
        extra = struct.pack("<HHQQQ", 0x0001, 24, usize, csize, offset)
        usize = csize = offset = _U32
    header = struct.pack(
        "<4s4B4HL2L5H2L",
        b"PK\x01\x02",
        20,
        3,
        20,
        0,
        member.flags,
        member.method,
        0,
        0x5821,
        member.checksum,
        csize,
        usize,
        len(member.name),
        len(extra),
        0,
        0,
        0,
        member.external_attr,
        offset,
    )
    return header + member.name + extra


def end_record(count: int, cd_size: int, cd_offset: int, *, zip64_at: int | None = None) -> bytes:
    """The end of central directory record, with zip64 records first when asked."""
    prefix = b""
    if zip64_at is not None:
        prefix = struct.pack(
            "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset
        ) + struct.pack("<4sLQL", b"PK\x06\x07", 0, zip64_at, 1)
        count, cd_size, cd_offset = 0xFFFF, _U32, _U32
    return prefix + struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, 0
    )


def raw_zip(members: Iterable[RawMember], *, zip64: bool = False) -> bytes:
    """A well-laid-out zip of hand-made members (each header says what the member says)."""
    body, central = b"", b""
    members = list(members)
    for member in members:
        central += central_record(member, len(body), zip64=zip64)
        body += local_record(member)
    zip64_at = len(body) + len(central) if zip64 else None
    return body + central + end_record(len(members), len(central), len(body), zip64_at=zip64_at)


def overlapping_zip_shared_header() -> bytes:
    """Two central records, different names, both pointing at one local header (Fifield)."""
    kernel = RawMember(b"a.txt", b"A" * 1000)
    body = local_record(kernel)
    twin = RawMember(b"b.txt", kernel.content)
    central = central_record(kernel, 0) + central_record(twin, 0)
    return body + central + end_record(2, len(central), len(body))


def overlapping_zip_quoted_header() -> bytes:
    """Entry a.txt claims compressed bytes that run over b.txt's local header."""
    second = local_record(RawMember(b"b.txt", b"B" * 100, method=zipfile.ZIP_STORED))
    first = RawMember(b"a.txt", b"A" * 100, method=zipfile.ZIP_STORED)
    spread = len(first.payload) + len(second)
    body = local_record(first, compress_size=spread) + second
    b_offset = len(local_record(first))
    central = central_record(first, 0, compress_size=spread) + central_record(
        RawMember(b"b.txt", b"B" * 100, method=zipfile.ZIP_STORED), b_offset
    )
    return body + central + end_record(2, len(central), len(body))


# --- tar through tarfile ------------------------------------------------------------------

TarMember = tuple[tarfile.TarInfo, bytes | None]


def tar_file(name: str, data: bytes = b"", *, mode: int = 0o644) -> TarMember:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 1_700_000_000
    return info, data


def tar_dir(name: str, *, mode: int = 0o755) -> TarMember:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info, None


def tar_link(name: str, target: str, *, kind: bytes = tarfile.SYMTYPE) -> TarMember:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def tar_special(name: str, kind: bytes) -> TarMember:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    return info, None


def compress(data: bytes, fmt: str) -> bytes:
    """Wrap tar bytes as `fmt` ("tar", "tar.gz", "tar.bz2" or "tar.xz")."""
    if fmt == "tar.gz":
        return gzip.compress(data, mtime=0)
    if fmt == "tar.bz2":
        return bz2.compress(data)
    if fmt == "tar.xz":
        return lzma.compress(data, preset=1)
    return data


def tar_bytes(
    members: dict[str, bytes] | Iterable[TarMember],
    fmt: str = "tar",
    *,
    tar_format: int = tarfile.PAX_FORMAT,
) -> bytes:
    """A tar of TarInfo members (or a name -> data dict), optionally compressed."""
    if isinstance(members, dict):
        members = [tar_file(name, data) for name, data in members.items()]
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer,
        mode="w",
        format=tar_format,
        encoding="utf-8",
        errors="surrogateescape",  # lets a test write a name that is not UTF-8
    ) as archive:
        for info, data in members:
            archive.addfile(info, None if data is None else io.BytesIO(data))
    return compress(buffer.getvalue(), fmt)


# --- tar by hand --------------------------------------------------------------------------


def tar_header(name: bytes, *, kind: bytes = b"0", size: int = 0, size_field: bytes = b"") -> bytes:
    """One ustar header block with a correct checksum."""
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b"0000644\0"
    block[108:116] = block[116:124] = b"0000000\0"
    block[124:136] = size_field or b"%011o\0" % size
    block[136:148] = b"%011o\0" % 1_700_000_000
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def tar_entry(name: bytes, data: bytes = b"", *, kind: bytes = b"0") -> bytes:
    """A header and its padded data."""
    return tar_header(name, kind=kind, size=len(data)) + _pad(data)


def pax_entry(records: dict[bytes, bytes], *, kind: bytes = b"x") -> bytes:
    """A pax extended header ('x', or 'g' for global) holding `records`."""
    body = b""
    for key, value in records.items():
        text = b" " + key + b"=" + value + b"\n"
        length = len(text) + 1
        while len(str(length)) + len(text) != length:
            length += 1
        body += str(length).encode() + text
    return tar_entry(b"PaxHeader", body, kind=kind)


TAR_END = bytes(1024)
