"""Glob patterns of the assignment (recording, trace and ledger files), matched per path segment."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


def _segment_regex(segment: str) -> re.Pattern[str]:
    """One path component of a glob: `*`, `?` and `[...]` never cross a `/`."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


@dataclass(frozen=True, slots=True)
class _Glob:
    text: str
    parts: tuple[re.Pattern[str] | None, ...]  # None stands for `**`

    def _states(self, segments: Sequence[str]) -> set[int]:
        """Pattern positions reachable after consuming `segments` (an NFA over components)."""
        states = self._close({0})
        for seg in segments:
            nxt: set[int] = set()
            for i in states:
                if i >= len(self.parts):
                    continue
                part = self.parts[i]
                if part is None:
                    nxt.add(i)  # `**` swallows this component and may swallow more
                elif part.fullmatch(seg):
                    nxt.add(i + 1)
            states = self._close(nxt)
            if not states:
                break
        return states

    def _close(self, states: set[int]) -> set[int]:
        out = set(states)
        for i in sorted(states):
            while i < len(self.parts) and self.parts[i] is None:
                i += 1
                out.add(i)
        return out

    def matches(self, rel: str) -> bool:
        """True when the "/"-separated relative path matches the whole pattern."""
        segments = rel.split("/")
        # A file cannot end on `**` (pathlib's `**` names directories).
        return any(
            i == len(self.parts) and (i == 0 or self.parts[i - 1] is not None)
            for i in self._states(segments)
        )

    def may_contain(self, rel_dir: str) -> bool:
        """True when some file under this directory could match."""
        return any(i < len(self.parts) for i in self._states(rel_dir.split("/")))


def compile_glob(pattern: str) -> _Glob | None:
    """A pathlib-style pattern relative to the root; None when it escapes the root."""
    text = pattern.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    text = text.lstrip("/")
    segments = [s for s in text.split("/") if s not in ("", ".")]
    if not segments or ".." in segments:
        return None
    if segments[-1] == "**":
        segments.append("*")  # `dir/**` means every file below dir, as people expect
    parts = tuple(None if s == "**" else _segment_regex(s.replace("**", "*")) for s in segments)
    return _Glob(pattern, parts)


def glob_match(pattern: str, rel: str) -> bool:
    """pathlib-style `**` glob match of a "/"-separated path relative to the root."""
    compiled = compile_glob(pattern)
    return compiled is not None and compiled.matches(rel)
