"""The pack guard: every entry of a git pack measured before dulwich resolves a single object.

dulwich inflates an object into memory up to the size its pack header declares, and applies
a delta to whatever target size the delta says. So the caps are applied here first, from
the declared sizes and the delta instructions themselves: an object over the per-file cap,
a delta whose copies add up to more (or less) than its stated target, more objects than the
cap, a history that inflates past the total cap, or a delta chain deeper than git itself
writes (a "delta chain bomb": a few kilobytes of deltas resolving to gigabytes) is refused
with its rule, having inflated at most `max_object_bytes` of any one entry.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass

from submissions.intake.archive.core import CHUNK, ArchiveRejected, corrupt

_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


_OFS_DELTA = 6


_REF_DELTA = 7


_SHA_BYTES = 20


@dataclass(frozen=True)
class GitLimits:
    """Caps on a pack, beside the archive caps that apply to the tree written out."""

    max_pack_bytes: int = 50 * 2**20
    max_objects: int = 200_000
    max_object_bytes: int = 100 * 2**20  # one object, or one delta's result
    max_inflated_bytes: int = 1000 * 2**20  # every object of the history, inflated
    max_delta_depth: int = 500  # git writes chains of 50 (250 with --aggressive)
    max_commits: int = 100_000  # walked by --before


@dataclass
class PackSummary:
    objects: int
    inflated_bytes: int
    deepest_delta: int


def _varint_le(data: bytes, pos: int) -> tuple[int, int]:
    """A delta header size: 7 bits a byte, least significant first."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise corrupt("a delta header is cut short")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 63:
            raise corrupt("a delta header size is malformed")


def _delta_target(delta: bytes) -> tuple[int, int]:
    """(source size, target size) of a delta, its instructions checked to produce exactly that."""
    source, pos = _varint_le(delta, 0)
    target, pos = _varint_le(delta, pos)
    produced = 0
    while pos < len(delta):
        cmd = delta[pos]
        pos += 1
        if cmd & 0x80:
            offset = size = 0
            for bit in range(4):
                if cmd & (1 << bit):
                    offset |= delta[pos] << (8 * bit) if pos < len(delta) else 0
                    pos += 1
            for bit in range(3):
                if cmd & (0x10 << bit):
                    size |= delta[pos] << (8 * bit) if pos < len(delta) else 0
                    pos += 1
            size = size or 0x10000
            if pos > len(delta) or offset + size > source:
                raise corrupt("a delta copies outside its base object")
        elif cmd:
            size = cmd
            pos += cmd
            if pos > len(delta):
                raise corrupt("a delta's inserted data is cut short")
        else:
            raise corrupt("a delta holds the reserved instruction 0")
        produced += size
        if produced > target:
            break
    if produced != target:
        raise corrupt(f"a delta produces {produced} bytes where it states {target}")
    return source, target


class _Entries:
    """Walks the entries of a pack held in memory, inflating each one under its cap."""

    def __init__(self, pack: bytes, limits: GitLimits) -> None:
        self.pack = pack
        self.limits = limits
        self.pos = 12

    def header(self) -> tuple[int, int, int | bytes | None]:
        """(type, declared size, delta base: an offset, a sha or None) of the next entry."""
        start = self.pos
        byte = self._byte()
        kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
        while byte & 0x80:
            byte = self._byte()
            size |= (byte & 0x7F) << shift
            shift += 7
            if shift > 70:
                raise corrupt("an object header is malformed")
        base: int | bytes | None = None
        if kind == _OFS_DELTA:
            byte = self._byte()
            back = byte & 0x7F
            while byte & 0x80:
                byte = self._byte()
                back = ((back + 1) << 7) | (byte & 0x7F)
            if back <= 0 or back > start - 12:
                raise corrupt("a delta points outside the pack")
            base = start - back
        elif kind == _REF_DELTA:
            base = self.pack[self.pos : self.pos + _SHA_BYTES]
            self.pos += _SHA_BYTES
        elif kind not in _TYPE_NAMES:
            raise corrupt(f"an object has the unknown type {kind}")
        return kind, size, base

    def inflate(self, size: int) -> bytes:
        """The entry's data: exactly `size` bytes, never more inflated than that plus one."""
        inflater = zlib.decompressobj()
        out = bytearray()
        view = memoryview(self.pack)
        while not inflater.eof:
            if self.pos >= len(self.pack) - _SHA_BYTES:
                raise ArchiveRejected("truncated", "the pack is cut short")
            chunk = view[self.pos : self.pos + CHUNK]
            try:
                out += inflater.decompress(chunk, size - len(out) + 1)
            except zlib.error as exc:
                raise corrupt(f"an object's data is damaged ({exc})") from None
            if len(out) > size:
                raise corrupt("an object inflates past its declared size")
            used = len(chunk) - len(inflater.unconsumed_tail) - len(inflater.unused_data)
            self.pos += used
            if not used and not inflater.eof:
                raise corrupt("an object's data does not inflate")
        if len(out) != size:
            raise corrupt("an object inflates to less than its declared size")
        return bytes(out)

    def _byte(self) -> int:
        if self.pos >= len(self.pack) - _SHA_BYTES:
            raise ArchiveRejected("truncated", "the pack is cut short")
        self.pos += 1
        return self.pack[self.pos - 1]


def scan_pack(pack: bytes, limits: GitLimits) -> PackSummary:
    """Measure every entry of `pack` against `limits`, or raise ArchiveRejected."""
    if len(pack) > limits.max_pack_bytes:
        raise ArchiveRejected(
            "pack_too_large",
            f"the pack is {len(pack)} bytes, over the limit of {limits.max_pack_bytes}"
            " (max_pack_bytes)",
        )
    if len(pack) < 12 + _SHA_BYTES or pack[:4] != b"PACK":
        raise corrupt("the pack data does not start with a pack header")
    version, count = struct.unpack(">II", pack[4:12])
    if version not in (2, 3):
        raise ArchiveRejected("unsupported", f"pack version {version} is not supported")
    if hashlib.sha1(memoryview(pack)[:-_SHA_BYTES]).digest() != pack[-_SHA_BYTES:]:  # noqa: S324 - git's own checksum
        raise corrupt("the pack's checksum does not match its contents")
    if count > limits.max_objects:
        raise ArchiveRejected(
            "too_many_objects",
            f"the pack holds {count} objects, over the limit of {limits.max_objects} (max_objects)",
        )
    entries = _Entries(pack, limits)
    depth_at: dict[int, int] = {}  # entry offset -> delta depth (0: a whole object)
    whole: dict[bytes, int] = {}  # sha of a whole object -> its offset
    inflated = deepest = 0
    for _ in range(count):
        start = entries.pos
        kind, size, base = entries.header()
        if size > limits.max_object_bytes:
            raise _too_large(size, limits)
        data = entries.inflate(size)
        if base is None:
            result, depth = size, 0
            header = _TYPE_NAMES[kind] + b" " + str(size).encode() + b"\0"
            whole[hashlib.sha1(header + data).digest()] = start  # noqa: S324 - git's object ids
        else:
            result = _delta_target(data)[1]
            if result > limits.max_object_bytes:
                raise _too_large(result, limits)
            base_at = base if isinstance(base, int) else whole.get(base)
            # A ref-delta against another delta: git never writes one into a complete pack.
            depth = 1 + (depth_at.get(base_at, 0) if base_at is not None else 0)
            if isinstance(base, int) and base not in depth_at:
                raise corrupt("a delta points between objects")
        if depth > limits.max_delta_depth:
            raise ArchiveRejected(
                "delta_too_deep",
                f"a delta chain is more than {limits.max_delta_depth} deep (max_delta_depth)",
            )
        depth_at[start] = depth
        deepest = max(deepest, depth)
        inflated += result
        if inflated > limits.max_inflated_bytes:
            raise ArchiveRejected(
                "history_too_large",
                f"the history inflates past the limit of {limits.max_inflated_bytes} bytes"
                " (max_inflated_bytes)",
            )
    if entries.pos != len(pack) - _SHA_BYTES:
        raise corrupt("the pack holds data after its last object")
    return PackSummary(count, inflated, deepest)


def _too_large(size: int, limits: GitLimits) -> ArchiveRejected:
    return ArchiveRejected(
        "object_too_large",
        f"an object of the history is {size} bytes, over the limit of"
        f" {limits.max_object_bytes} (max_object_bytes)",
    )
