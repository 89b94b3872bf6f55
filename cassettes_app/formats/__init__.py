"""Format registry: sniff a recording file, hand it to its parser, never raise.

A new format is one module exposing `NAME`, `sniff(path, head)` and
`parse(path, data, limits)`, plus one line in `FORMATS`. Every sniff answers how
sure it is (formats/sniff.py: NO .. SURE, from the content: known keys, several lines, the
inner shape); the surest reader parses the file, a tie going to the one listed
first. JSON documents are told apart by their keys, JSON Lines by a sample of lines.

ParsedFinding kinds: parse_error, unknown_format, empty_file, file_too_large,
invalid_structure, invalid_field, missing_field, invalid_har, bad_line,
body_problem, yaml_coerced, invalid_tool_arguments.
"""

from __future__ import annotations

import errno
import os
from pathlib import PurePosixPath
from types import ModuleType

from cassettes_app import bodies
from cassettes_app.formats import (
    agent_log,
    agents_trace,
    cassette_json,
    exchange,
    explorer,
    fixture_json,
    har,
    inspect_log,
    langfuse,
    langsmith,
    ledger,
    nock,
    spans,
    trace,
    vcr,
)
from cassettes_app.formats.sniff import (
    NO,
    SURE,
    jsonl_sample,
    looks_binary,
    looks_like,
    wide_encoding,
)
from cassettes_app.limits import DEFAULT_LIMITS, LoadError, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParseResult, Severity
from cassettes_app.safefiles import NotRegular, open_regular

__all__ = [
    "FORMATS",
    "by_name",
    "detect",
    "parse_file",
    "parse_path",
    "rank",
]

FORMATS: list[ModuleType] = [
    cassette_json,
    exchange,
    har,
    vcr,
    nock,
    fixture_json,
    ledger,
    trace,
    agent_log,
    spans,
    langsmith,
    langfuse,
    inspect_log,
    explorer,
    agents_trace,
]

# How much of a file the sniffers see.
HEAD_BYTES = 256 * 1024


def by_name(name: str) -> ModuleType | None:
    """The format module called `name`, if any."""
    return next((module for module in FORMATS if name == module.NAME), None)


def _strip_gz(path: str) -> str:
    return path[:-3] if path.lower().endswith(".gz") else path


def rank(path: str, head: bytes) -> list[tuple[float, ModuleType]]:
    """Every reader that would take this file head, surest first (ties: FORMATS order)."""
    return _rank(path, head, until_sure=False)


def _rank(path: str, head: bytes, *, until_sure: bool) -> list[tuple[float, ModuleType]]:
    """`rank`; with `until_sure`, stop at the first reader that is SURE (it wins: no score
    is above SURE, and a tie goes to the reader listed first)."""
    if head.startswith(bodies.GZIP_MAGIC):
        head = bodies.peek_gzip(head, HEAD_BYTES)
        path = _strip_gz(path)
    scored: list[tuple[float, ModuleType]] = []
    for module in FORMATS:
        try:
            score = float(module.sniff(path, head))
        except Exception:  # noqa: S112 - a sniffer that trips simply does not claim the file
            continue
        if score > NO:
            scored.append((score, module))
            if until_sure and score >= SURE:
                break
    scored.sort(key=lambda pair: -pair[0])  # stable: the first listed wins a tie
    return scored


def detect(path: str, head: bytes) -> ModuleType | None:
    """The reader surest that this file head is its format, or None."""
    # The sniffers after a SURE one cannot change the winner: asking them cost as much as
    # parsing a cassette-task file.
    ranked = _rank(path, head, until_sure=True)
    return ranked[0][1] if ranked else None


def parse_file(
    path: str,
    data: bytes,
    limits: ParseLimits = DEFAULT_LIMITS,
    *,
    format_hint: str | None = None,
) -> ParseResult:
    """Parse one file that matched a recording glob; problems become findings, never raises.

    `format_hint` names a format to use without sniffing (e.g. for a `ledgers:` glob).
    """
    try:
        return _parse_file(path, data, limits, format_hint)
    except Exception as exc:  # the boundary: one broken file must not stop the others
        message = f"parser crashed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return ParseResult(
            "unknown", findings=[ParsedFinding("parse_error", "error", path, None, message)]
        )


def _finding(path: str, kind: str, severity: Severity, message: str) -> ParseResult:
    return ParseResult("unknown", findings=[ParsedFinding(kind, severity, path, None, message)])


def _parse_file(
    path: str, data: bytes, limits: ParseLimits, format_hint: str | None
) -> ParseResult:
    if len(data) > limits.max_file_bytes:
        return _finding(
            path,
            "file_too_large",
            "error",
            f"file is {len(data)} bytes, over max_file_bytes ({limits.max_file_bytes}); not parsed",
        )
    if not data.strip():
        return _finding(path, "empty_file", "warn", "file is empty")
    inner_path = path
    if data.startswith(bodies.GZIP_MAGIC):
        try:
            data = bodies.gunzip_file(data, limits)
        except LoadError as exc:
            return _finding(path, "parse_error", "error", exc.message)
        inner_path = _strip_gz(path)
        if not data.strip():
            return _finding(path, "empty_file", "warn", "file is empty once decompressed")
    wide = wide_encoding(data[:4])
    if wide:
        return _finding(path, "parse_error", "error", f"file is {wide} encoded; expected UTF-8")
    module = by_name(format_hint) if format_hint else None
    if module is None:
        module = detect(inner_path, data[:HEAD_BYTES])
    if module is None:
        if looks_binary(data[:HEAD_BYTES]):
            return _finding(path, "unknown_format", "warn", "binary file, not a recording format")
        family = looks_like(jsonl_sample(data[:HEAD_BYTES]))
        if family:
            return _finding(
                path,
                "unknown_format",
                "warn",
                f"unknown format: looks like {family}, which this tool does not read yet",
            )
        return _finding(path, "unknown_format", "warn", "not a recording format this tool reads")
    result = module.parse(path, data, limits)
    if inner_path != path:
        for recording in result.recordings:
            recording.meta.setdefault("compressed", "gzip")
    return result


def parse_path(
    path: str, display_path: str | None = None, limits: ParseLimits = DEFAULT_LIMITS
) -> ParseResult:
    """Read a regular file (no link anywhere under its tree) under the size cap and parse it.

    When `path` ends with `display_path` (the file's path in the submission tree), the
    part before it is the tree's root, so no folder of the hand-in on the way may be a link
    either; otherwise the file is opened as its name in its own folder.
    """
    name = display_path or path
    root, rel = _root_and_rel(path, display_path)
    try:
        with open_regular(root, rel) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limits.max_file_bytes:
                return _finding(
                    name,
                    "file_too_large",
                    "error",
                    f"file is {size} bytes, over max_file_bytes "
                    f"({limits.max_file_bytes}); not parsed",
                )
            # Ask for the file's own size (+1 to see growth): read(n) reserves n bytes up front.
            data = handle.read(min(size, limits.max_file_bytes) + 1)
    except NotRegular:
        return _finding(name, "unknown_format", "warn", "not a regular file; not parsed")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _finding(name, "parse_error", "error", "symbolic link; not followed")
        return _finding(name, "parse_error", "error", f"cannot read file: {exc.strerror or exc}")
    return parse_file(name, data, limits)


def _root_and_rel(path: str, display_path: str | None) -> tuple[str, str]:
    full = PurePosixPath(path)
    if display_path:
        rel = PurePosixPath(display_path)
        n = len(rel.parts)
        inside = not rel.is_absolute() and ".." not in rel.parts and 0 < n < len(full.parts)
        if inside and full.parts[-n:] == rel.parts:
            return str(PurePosixPath(*full.parts[:-n])), str(rel)
    return str(full.parent), full.name
