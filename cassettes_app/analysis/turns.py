"""Compact turns: messages cut to TEXT_CAP, their keys, and the spool that holds them."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from dataclasses import dataclass
from typing import IO, Any

import orjson

from cassettes_app.parsed import Body
from cassettes_app.providers import Message, ToolCall, ToolResult

TEXT_CAP = 20_000  # characters of one message text kept for threads and display

# Marks a text cut to TEXT_CAP; the digest after it keeps distinct long texts distinct when
# threads compare messages.
_CUT = "\x00cut\x00"  # ASCII, so a cut text stays one byte per character


@dataclass(frozen=True, slots=True)
class TurnView:
    """One model call of a rebuilt conversation, as plain JSON-able data."""

    index: int
    path: str
    interaction_index: int
    new_messages: list[dict[str, Any]]
    response: dict[str, Any] | None
    model: str | None
    usage: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TurnJson:
    """A TurnView whose messages are still the JSON text the spool keeps (`message_json`):
    what storing a turn needs, without parsing and dumping every message again."""

    index: int
    path: str
    interaction_index: int
    new_messages: list[str]
    response: str | None
    model: str | None
    usage: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ThreadView:
    """One rebuilt conversation; a fork names (thread index, turn position) it left."""

    index: int
    turns: list[TurnView]
    forked_from: tuple[int, int] | None = None


def _cap(text: str) -> str:
    """Cut a long text to TEXT_CAP, keeping a digest so distinct texts stay distinct."""
    if len(text) <= TEXT_CAP:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:TEXT_CAP]}{_CUT}{digest}:{len(text)}"


def _shown(text: str) -> tuple[str, bool]:
    """The display form of a possibly cut text, and whether it was cut."""
    head, cut, _ = text.partition(_CUT)
    return (head, True) if cut else (text, False)


def _compact_call(call: ToolCall) -> ToolCall:
    raw = call.arguments_raw
    args = call.arguments
    if isinstance(raw, str) and len(raw) > TEXT_CAP:
        raw = _cap(raw)
        if call.arguments_valid:
            args = raw
    elif call.arguments_valid and not isinstance(args, str | int | float | bool | type(None)):
        try:
            text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = ""
        if len(text) > TEXT_CAP:
            args = _cap(text)
    elif isinstance(args, str) and len(args) > TEXT_CAP:
        args = _cap(args)
    return ToolCall(call.id, call.name, args, raw, call.arguments_valid)


def compact_message(message: Message | None) -> Message | None:
    """The message without its raw payload, long texts capped (threads compare what is left)."""
    if message is None:
        return None
    return Message(
        role=message.role,
        text=_cap(message.text if isinstance(message.text, str) else str(message.text)),
        tool_calls=[_compact_call(c) for c in message.tool_calls],
        tool_results=[
            ToolResult(r.tool_call_id, _cap(str(r.content)), r.is_error, r.name)
            for r in message.tool_results
        ],
        raw=None,
    )


def small_usage(usage: Any) -> dict[str, Any]:
    if not isinstance(usage, dict):
        return {}
    try:
        return usage if len(json.dumps(usage, default=str)) <= 4096 else {}
    except (TypeError, ValueError, RecursionError):
        return {}


def message_dict(message: Message) -> dict[str, Any]:
    """A message as plain JSON-able data; cut texts carry "truncated": true."""
    truncated = False

    def show(text: Any) -> str:
        nonlocal truncated
        shown, cut = _shown(text if isinstance(text, str) else str(text))
        truncated = truncated or cut
        return shown

    calls = []
    for call in message.tool_calls:
        args = call.arguments
        if isinstance(args, str):
            args = show(args)
        calls.append(
            {
                "id": call.id,
                "name": call.name,
                "arguments": args,
                "arguments_valid": call.arguments_valid,
            }
        )
    out: dict[str, Any] = {
        "role": message.role,
        "text": show(message.text),
        "tool_calls": calls,
        "tool_results": [
            {"tool_call_id": r.tool_call_id, "content": show(r.content)}
            for r in message.tool_results
        ],
    }
    if truncated:
        out["truncated"] = True
    return out


# orjson writes a datetime (a YAML date) as json's default=str does, a str() of it.
_MESSAGE_JSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def message_json(message: Message) -> bytes:
    """`message_dict` as JSON text (UTF-8), the value a JSONField reads back; a value JSON
    cannot hold (a YAML date, bytes) as its str(). orjson writes it, thirty times faster
    than json on long texts; what it refuses (a lone surrogate, an integer past 64 bits)
    json writes, as ASCII."""
    value = message_dict(message)
    try:
        return orjson.dumps(value, default=str, option=_MESSAGE_JSON)
    except orjson.JSONEncodeError:
        return json.dumps(value, default=str).encode("ascii")


# Key parts longer than this are kept as a 128-bit digest: threads only compare keys.
_KEY_PART_MAX = 32


def _key_part(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _KEY_PART_MAX:
        return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return value


def lean_key(key: tuple) -> tuple:
    """`threads.message_key` with every long text replaced by its digest.

    Equal keys stay equal and distinct ones distinct (short parts are kept as text, long
    ones as bytes, so a text can never equal a digest); the role stays first.
    """
    role, text, calls, results = key
    return (
        _key_part(role),
        _key_part(text),
        tuple([(_key_part(name), _key_part(args)) for name, args in calls]),
        tuple([_key_part(r) for r in results]),
    )


# Entries of the spool's and the key interner's lookup tables before they start afresh.
# Forgetting costs a second copy of a message on disk, or of a key in memory, never a
# difference in results; remembering all would grow with the archive.
MEMO_MAX = 65_536


def spool_digest(data: bytes) -> bytes:
    """What tells the spool's shared values apart: a 128-bit digest of their bytes."""
    return hashlib.blake2b(data, digest_size=16).digest()


# A spool address: the segment (0 the spool's own file, else one a pool process writes) in
# the bits above SEGMENT_SHIFT, the offset in that segment's file below them.
SEGMENT_SHIFT = 44


class SegmentWriter:
    """Appends values to one segment of a spool (`TurnSpool.segment`), from this process or
    another, and gives each one's address; shared ones are written once per distinct
    content (within the last MEMO_MAX).

    It appends at the offset it counts from 0; the spool reads with pread, so the file's
    shared position is never moved under it.
    """

    def __init__(self, index: int, fd: int) -> None:
        self.base = index << SEGMENT_SHIFT
        self.fd = fd
        self.size = 0
        self.offsets: dict[bytes, int] = {}

    def append(self, data: bytes) -> int:
        address = self.base + self.size
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += 8 + len(data)
        return address

    def add_shared(self, data: bytes, digest: bytes) -> int:
        """Store bytes once per distinct content (`digest`: `spool_digest(data)`)."""
        address = self.offsets.get(digest)
        if address is None:
            if len(self.offsets) >= MEMO_MAX:
                self.offsets.clear()
            address = self.offsets[digest] = self.append(data)
        return address


class TurnSpool:
    """What the turns of a conversation show, kept in temporary files instead of memory.

    Each distinct message (its `message_json`) is written once, whatever the number of
    requests repeating it (within the last MEMO_MAX distinct ones); an exchange keeps only
    the addresses of its messages (pickled, with its usage). Pool processes write the
    messages of the files they examine into segments of their own (`segment`), so those
    never pass through the analyser's process until a turn is stored; this process writes
    into segment 0.
    """

    def __init__(self) -> None:
        # Segment k's file; only their descriptors are used (os.write, os.pread).
        self._files: list[IO[bytes]] = []
        self._own = SegmentWriter(*self.segment())

    def add(self, value: Any) -> int:
        """Store a value (read back by `get`)."""
        return self._own.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def add_shared(self, data: bytes | int, digest: bytes) -> int:
        """`SegmentWriter.add_shared` into segment 0; an int is the address another
        process's SegmentWriter already stored the bytes at."""
        if isinstance(data, int):
            return data
        return self._own.add_shared(data, digest)

    def segment(self) -> tuple[int, int]:
        """A new segment for a SegmentWriter: (its index, its descriptor, which the spool
        keeps open until it closes)."""
        handle = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the spool
        self._files.append(handle)
        return len(self._files) - 1, handle.fileno()

    def get(self, offset: int) -> Any:
        """The value `add` stored at `offset` (a fresh copy each time)."""
        return pickle.loads(self.get_bytes(offset))  # noqa: S301 - our own temporary file

    def get_bytes(self, address: int) -> bytes:
        """The bytes stored at `address`."""
        offset = address & ((1 << SEGMENT_SHIFT) - 1)
        fd = self._files[address >> SEGMENT_SHIFT].fileno()
        size = int.from_bytes(os.pread(fd, 8, offset), "little")
        return os.pread(fd, size, offset + 8)

    def close(self) -> None:
        for handle in self._files:
            handle.close()
        self._files.clear()


def body_payload(body: Body) -> Any:
    """What providers.normalise reads: parsed JSON when there is some, else the text."""
    if body.json is not None:
        return body.json
    return body.text or None
