"""The caps every reader of a recording honours, and the error an unsafe load raises.

The lowest module of the app: safeload, the formats and the providers all read it, and it
reads nothing of theirs.
"""

from __future__ import annotations

import binascii
import json
import zlib
from dataclasses import dataclass

import yaml

__all__ = [
    "DEFAULT_LIMITS",
    "PARSE_ERRORS",
    "LoadError",
    "MiB",
    "ParseLimits",
    "error_line",
    "error_message",
]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Caps every parser honours; lower them in tests to build small bombs."""

    max_depth: int = 200
    max_line_bytes: int = 8 * MiB
    max_body_bytes: int = 16 * MiB
    max_yaml_nodes: int = 1_000_000
    max_yaml_aliases: int = 100
    max_events: int = 100_000
    max_file_bytes: int = 64 * MiB
    max_int_digits: int = 4300


DEFAULT_LIMITS = ParseLimits()


class LoadError(ValueError):
    """A recording could not be loaded safely; `line` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return self.message if self.line is None else f"{self.message} (line {self.line})"


# Every parser turns these into findings (security-and-reliability.md §2.2).
PARSE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    RecursionError,
    yaml.YAMLError,
    UnicodeDecodeError,
    zlib.error,
    binascii.Error,
    EOFError,
    LoadError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,
    MemoryError,
)


def error_line(exc: BaseException) -> int | None:
    """Best-known 1-based line number of a load error."""
    if isinstance(exc, LoadError):
        return exc.line
    if isinstance(exc, json.JSONDecodeError):
        return exc.lineno
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return mark.line + 1
    return None


def error_message(exc: BaseException) -> str:
    """A one-line reason for a load error."""
    if isinstance(exc, LoadError):
        return exc.message
    if isinstance(exc, RecursionError):
        return "too deeply nested"
    if isinstance(exc, MemoryError):
        return "out of memory while parsing"
    if isinstance(exc, yaml.MarkedYAMLError):
        return f"invalid YAML: {exc.problem or exc.context or type(exc).__name__}"
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
