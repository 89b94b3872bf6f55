"""inspect_ai eval logs: the JSON log (`{"version", "eval", "samples": [...]}`) and the
zipped `.eval` log (header.json, samples/<id>_epoch_<n>.json, journal and summaries).

Each sample's `model` events (newer logs; older ones keep them under `transcript.events`)
are its model calls: the event's `input` messages and `output` (a ModelOutput with
choices and usage). A sample without events is read as its message transcript, each run
of assistant messages one call. The zip is read from memory with caps on its entries and
on each member's and the total unpacked size; nothing is extracted to disk.
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.formats.base import run_parser, set_models
from cassettes_app.formats.conversation import (
    as_chat_message,
    as_chat_messages,
    chat_call,
    iso_time,
    model_calls,
    rebuilt_interaction,
    token_usage,
)
from cassettes_app.formats.sniff import NO, SURE, json_doc_keys
from cassettes_app.limits import DEFAULT_LIMITS, PARSE_ERRORS, LoadError, ParseLimits
from cassettes_app.parsed import (
    ParsedFinding,
    ParsedInteraction,
    ParsedMessage,
    ParsedRecording,
    ParseResult,
)

NAME = "inspect_log"
NOTE = "rebuilt from an inspect_ai model event"

ZIP_MAGIC = b"PK\x03\x04"
MAX_MEMBERS = 20_000
_SAMPLE = re.compile(r"^samples/[^/]+\.json$")
# What reading one member may raise: a finding for that member, the rest still read.
_MEMBER_ERRORS: tuple[type[BaseException], ...] = (
    *PARSE_ERRORS,
    zipfile.BadZipFile,
    OSError,
    EOFError,
)


def sniff(path: str, head: bytes) -> float:
    """A zip named .eval, or a JSON log with `version` and `eval` (and samples or results)."""
    if head.startswith(ZIP_MAGIC):
        return SURE if path.lower().endswith(".eval") else NO
    kind, keys = json_doc_keys(path, head)
    if kind == "object" and {"version", "eval"} <= keys and keys & {"samples", "results", "plan"}:
        return SURE
    return NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording per log; one interaction per model call of every sample."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    if data.startswith(ZIP_MAGIC):
        header, samples = _unzip(result, path, data, limits)
    else:
        doc = safeload.load_json(data, limits)
        if not isinstance(doc, Mapping):
            result.findings.append(
                ParsedFinding("invalid_structure", "error", path, None, "log must be an object")
            )
            return
        header, samples = doc, iter(doc.get("samples") or [])
    spec = safeload.object_at(header, "eval")
    default_model = spec.get("model") if isinstance(spec.get("model"), str) else None
    recording = ParsedRecording(
        path=path,
        format=NAME,
        recorded_at=iso_time(spec.get("created")),
        meta={
            "task": spec.get("task"),
            "status": header.get("status"),
            "samples": 0,
        },
    )
    for sample in samples:
        if not isinstance(sample, Mapping):
            continue
        recording.meta["samples"] += 1
        where = f"sample {sample.get('id')} epoch {sample.get('epoch')}"
        calls = _event_calls(sample, where, len(recording.interactions))
        if not calls:
            calls = _transcript_calls(result, path, sample, default_model, recording)
        recording.interactions.extend(calls)
        if sample.get("error"):
            error = sample["error"]
            message = error.get("message") if isinstance(error, Mapping) else error
            result.findings.append(
                ParsedFinding(
                    "invalid_field", "info", path, None, f"{where}: failed: {str(message)[:200]}"
                )
            )
    if header.get("status") not in (None, "success"):
        result.findings.append(
            ParsedFinding(
                "invalid_field",
                "info",
                path,
                None,
                f"the eval's status is {header.get('status')!r}",
            )
        )
    set_models(recording)
    recording.model = recording.model or default_model
    result.recordings.append(recording)


def _events(sample: Mapping[str, Any]) -> list[Any]:
    events = sample.get("events")
    if not isinstance(events, list):
        transcript = sample.get("transcript")
        events = transcript.get("events") if isinstance(transcript, Mapping) else None
    return events if isinstance(events, list) else []


def _output(output: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(reply, usage, model) of a ModelOutput."""
    if not isinstance(output, Mapping):
        return None, None, None
    choices = output.get("choices")
    message = None
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
    reply = (
        as_chat_message({**message, "role": "assistant"}) if isinstance(message, Mapping) else None
    )
    usage = safeload.object_at(output, "usage")
    counts = token_usage(
        usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens")
    )
    model = output.get("model") if isinstance(output.get("model"), str) else None
    return reply, counts, model


def _event_calls(sample: Mapping[str, Any], where: str, start: int) -> list[ParsedInteraction]:
    calls: list[ParsedInteraction] = []
    for event in _events(sample):
        if not isinstance(event, Mapping) or event.get("event") != "model":
            continue
        reply, usage, served = _output(event.get("output"))
        model = served or (event.get("model") if isinstance(event.get("model"), str) else None)
        request, response = chat_call(
            as_chat_messages(event.get("input")), reply, model=model, usage=usage
        )
        error = event.get("error")
        calls.append(
            rebuilt_interaction(
                start + len(calls),
                request,
                response,
                note=NOTE,
                recorded_at=iso_time(event.get("timestamp")),
                extra={"sample": where, **({"error": str(error)[:300]} if error else {})},
            )
        )
    return calls


def _transcript_calls(
    result: ParseResult,
    path: str,
    sample: Mapping[str, Any],
    model: str | None,
    recording: ParsedRecording,
) -> list[ParsedInteraction]:
    messages = []
    for raw in sample.get("messages") or []:
        chat = as_chat_message(raw)
        if chat is not None:
            messages.append(ParsedMessage(role=chat["role"], content=chat.get("content"), raw=chat))
    _, usage, served = _output(sample.get("output"))
    calls = model_calls(
        result, path, messages, model=served or model, start=len(recording.interactions)
    )
    if calls and usage:
        response = calls[-1].response_body.json
        if isinstance(response, dict):
            response["usage"] = usage  # the sample's output is its last call's
    return calls


def _unzip(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> tuple[Mapping[str, Any], Iterator[Any]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        # A cut zip loses its directory (at the end): its members are read from their own
        # headers, as far as they go.
        found, broke = _local_members(data, limits)
        result.findings.append(
            ParsedFinding(
                "parse_error",
                "error",
                path,
                None,
                f"not a whole .eval zip ({exc}): read {len(found)} members from their "
                f"local headers; {broke}",
            )
        )
        first: object = next(
            (v for k, v in found if k in ("header.json", "_journal/start.json")), {}
        )
        loose = [v for k, v in sorted(found, key=lambda kv: _sample_order(kv[0]))
                 if _SAMPLE.match(k)]  # fmt: skip
        return (first if isinstance(first, Mapping) else {}), iter(loose)
    if len(members) > MAX_MEMBERS:
        raise LoadError(f".eval zip has {len(members)} entries, over {MAX_MEMBERS}")
    budget = [4 * limits.max_file_bytes]

    def read(info: zipfile.ZipInfo) -> Any:
        if info.flag_bits & 0x1:
            raise LoadError(f"{info.filename}: encrypted")
        cap = min(limits.max_file_bytes, budget[0])
        with archive.open(info) as handle:
            raw = handle.read(cap + 1)
        if len(raw) > cap:
            raise LoadError(f"{info.filename}: unpacks to over {cap} bytes; not read")
        budget[0] -= len(raw)
        return safeload.load_json(raw, limits)

    by_name = {m.filename: m for m in members}
    header: Mapping[str, Any] = {}
    for name in ("header.json", "_journal/start.json"):
        if name in by_name:
            try:
                loaded = read(by_name[name])
            except _MEMBER_ERRORS as exc:
                result.findings.append(
                    ParsedFinding("parse_error", "warn", path, None, f"{name}: {exc}")
                )
                continue
            if isinstance(loaded, Mapping):
                header = loaded
                break

    def samples() -> Iterator[Any]:
        for info in sorted((m for m in members if _SAMPLE.match(m.filename)),
                           key=lambda m: _sample_order(m.filename)):  # fmt: skip
            try:
                yield read(info)
            except _MEMBER_ERRORS as exc:
                result.findings.append(
                    ParsedFinding(
                        "parse_error", "warn", path, None, f"{info.filename}: {exc}; skipped"
                    )
                )

    return header, samples()


_LOCAL = struct.Struct("<4sHHHHHIIIHH")


def _local_members(data: bytes, limits: ParseLimits) -> tuple[list[tuple[str, Any]], str]:
    """(name, JSON) of the members a zip's local headers reach, and where the walk ended."""
    found: list[tuple[str, Any]] = []
    at = 0
    budget = 4 * limits.max_file_bytes
    while len(found) < MAX_MEMBERS:
        if data[at : at + 4] != ZIP_MAGIC:
            return found, f"no member header at byte {at}"
        if at + _LOCAL.size > len(data):
            return found, f"cut inside a member header at byte {at}"
        _, _, flags, method, _, _, _, packed, _, name_len, extra_len = _LOCAL.unpack_from(data, at)
        start = at + _LOCAL.size + name_len + extra_len
        name = data[at + _LOCAL.size : at + _LOCAL.size + name_len].decode("utf-8", "replace")
        cap = min(limits.max_file_bytes, budget)
        if flags & 0x1 or method not in (0, 8):
            return found, f"{name}: encrypted or packed in a way not read (method {method})"
        if method == 0:
            if flags & 0x8 or start + packed > len(data):
                return found, f"{name}: cut off at byte {len(data)}"
            raw, end = data[start : start + packed], start + packed
        else:
            inflater = zlib.decompressobj(-15)
            raw = inflater.decompress(memoryview(data)[start:], cap + 1)
            if len(raw) > cap:
                return found, f"{name}: unpacks to over {cap} bytes; not read"
            if not inflater.eof:
                return found, f"{name}: cut off at byte {len(data)}"
            end = len(data) - len(inflater.unused_data)
        budget -= len(raw)
        if flags & 0x8:  # a data descriptor follows: its signature is optional
            end += 16 if data[end : end + 4] == b"PK\x07\x08" else 12
        with contextlib.suppress(*PARSE_ERRORS):  # only members that are whole JSON count
            found.append((name, safeload.load_json(raw, limits)))
        at = end
    return found, f"stopped after {MAX_MEMBERS} members"


def _sample_order(name: str) -> tuple[int, str]:
    match = re.search(r"/(\d+)_epoch_(\d+)\.json$", name)
    return (int(match.group(1)) * 1000 + int(match.group(2)), name) if match else (1 << 60, name)
