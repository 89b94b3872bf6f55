"""A Makefile's targets, read without running make: rule names and .PHONY entries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cassettes_app.checks.docs.repofiles import find_file, read_text

_RULE = re.compile(r"^([^:=#\t][^:=#]*?)\s*(::?)(.*)$")


_DEFINE = re.compile(r"^(?:override\s+|export\s+)?define\b")


_MAKEFILE_NAMES = ("GNUmakefile", "makefile", "Makefile")


def make_targets(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """({rule target: line}, {.PHONY name: line}) of Makefile text; never raises.

    Targets are names before a `:` at line start (several per line), not variable
    assignments (`:=`, `::=`, `=`), not recipe lines, not pattern or variable targets.
    """
    rules: dict[str, int] = {}
    phony: dict[str, int] = {}
    lines = text.split("\n")
    index = 0
    in_define = False
    while index < len(lines):
        start = index + 1
        line = lines[index]
        index += 1
        while line.endswith("\\") and index < len(lines):
            line = line[:-1] + " " + lines[index]
            index += 1
        stripped = line.strip()
        if in_define:
            in_define = not stripped.startswith("endef")
            continue
        if _DEFINE.match(stripped):
            in_define = True
            continue
        if line.startswith("\t") or not stripped or stripped.startswith("#"):
            continue
        match = _RULE.match(line.split("#", 1)[0].rstrip("\r"))
        if not match:
            continue
        rest = match.group(3)
        if re.match(r":*=", rest):
            continue  # VAR := value, VAR ::= value, VAR :::= value
        names = match.group(1).split()
        if names == [".PHONY"]:
            for name in rest.split(";", 1)[0].split():
                phony.setdefault(name, start)
            continue
        for name in names:
            if name.startswith(".") or "$" in name or "%" in name:
                continue
            rules.setdefault(name, start)
    return rules, phony


@dataclass(slots=True)
class Makefile:
    """The root Makefile (path None when there is none): its rules, .PHONY names and text."""

    path: str | None
    rules: dict[str, int] = field(default_factory=dict)
    phony: dict[str, int] = field(default_factory=dict)
    text: str = ""
    truncated: bool = False
    includes: bool = False  # it includes other makefiles (`include`, `-include`), not read


def read_makefile(root: Path) -> Makefile:
    """The Makefile at the root of the tree (GNUmakefile, makefile, Makefile), read capped."""
    rel = find_file(root, _MAKEFILE_NAMES)
    if rel is None:
        return Makefile(None)
    text, truncated = read_text(root, rel)
    if text is None:
        return Makefile(None)
    rules, phony = make_targets(text)
    includes = bool(re.search(r"^\s*-?s?include\s+\S", text, re.M))
    return Makefile(rel, rules, phony, text, truncated, includes)
