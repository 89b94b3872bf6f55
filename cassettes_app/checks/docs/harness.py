"""Which record/replay harness a hand-in uses, and what it matches requests on and filters.

The briefs' sample layer keys each request by a canonicalising hash with volatile fields
dropped; its notes name those fields. A matcher-based library has no such list: vcrpy
(directly or through pytest-recording) matches on `match_on` and filters with
`filter_headers`, `filter_query_parameters`, `filter_post_data_parameters` and
`before_record_*` hooks; nock matches method, path and body (plus `matchHeader`) and is
filtered in `afterRecord` or by `filteringPath`/`filteringRequestBody`. Read from the
hand-in's source, never run.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cassettes_app.checks.docs.repofiles import read_text

# vcrpy's own default matchers, and what nock compares when a recording has a body.
VCRPY_DEFAULT_MATCH = ("method", "scheme", "host", "port", "path", "query")
NOCK_MATCH = ("method", "path", "body")
_VCR_FILTERS = ("filter_headers", "filter_query_parameters", "filter_post_data_parameters")
_VCR_HOOKS = ("before_record_request", "before_record_response", "before_record")
_VCR_SIGNS = re.compile(
    r"\bvcr_config\b|^\s*import vcr\b|\bpytest\.mark\.vcr\b|\buse_cassette\(", re.M
)
_NOCK_SIGNS = re.compile(r"""require\(\s*["']nock["']\s*\)|from\s+["']nock["']""")
_NOCK_HOOKS = ("afterRecord", "filteringPath", "filteringRequestBody", "before")
_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "dist"})
_MAX_FILES = 400


@dataclass(slots=True)
class Harness:
    """A matcher-based harness found in the tree (kind "" when none: the sample layer)."""

    kind: str = ""  # vcrpy | nock | ""
    path: str | None = None
    line: int | None = None
    match_on: list[str] = field(default_factory=list)
    filtered: list[str] = field(default_factory=list)  # header/parameter names filtered
    hooks: list[str] = field(default_factory=list)  # filtering hooks by name


def _source_files(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        for name in sorted(files):
            if name.endswith((".py", ".js", ".mjs", ".cjs", ".ts")):
                found.append(os.path.relpath(os.path.join(folder, name), root))
                if len(found) >= _MAX_FILES:
                    return found
    return found


def _first_string(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Tuple | ast.List) and node.elts:
        return _first_string(node.elts[0])  # ("authorization", "REDACTED")
    return None


def _vcrpy_settings(text: str, harness: Harness) -> None:
    """match_on, filters and hooks from vcr_config dicts and VCR(...)/use_cassette(...)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    pairs: list[tuple[str, ast.AST, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for dict_key, dict_value in zip(node.keys, node.values, strict=False):
                if isinstance(dict_key, ast.Constant) and isinstance(dict_key.value, str):
                    pairs.append((dict_key.value, dict_value, node.lineno))
        elif isinstance(node, ast.Call):
            pairs += [(k.arg, k.value, node.lineno) for k in node.keywords if k.arg]
    for key, value, line in pairs:
        items = value.elts if isinstance(value, ast.List | ast.Tuple | ast.Set) else []
        names = [n for n in (_first_string(item) for item in items) if n]
        if key == "match_on" and names:
            harness.match_on, harness.line = names, line
        elif key in _VCR_FILTERS:
            harness.filtered += [n for n in names if n not in harness.filtered]
            harness.line = harness.line or line
        elif key in _VCR_HOOKS and key not in harness.hooks:
            harness.hooks.append(key)


def _nock_settings(text: str, harness: Harness) -> None:
    """matchHeader names, filtering hooks, and what afterRecord deletes or lists."""
    harness.match_on += [
        f"header {h}" for h in re.findall(r"""\.matchHeader\(\s*["']([\w-]+)["']""", text)
    ]
    for hook in _NOCK_HOOKS:
        if re.search(rf"\b{hook}\b\s*[:(=,]", text) and hook not in harness.hooks:
            harness.hooks.append(hook)
    if "afterRecord" in text:
        names = re.findall(r"\bdelete\s+[\w.]+\.(\w+)\s*(?:;|$)", text, re.M)
        for array in re.findall(r"\[([^\[\]]*)\]", text):
            words = re.findall(r"""["']([A-Za-z][\w-]*)["']""", array)
            if words and re.fullmatch(r"""[\s"',\w-]*""", array):
                names += words
        harness.filtered += [n for n in names if n not in harness.filtered]


def detect_harness(root: Path) -> Harness:
    """The matcher-based harness the hand-in's own source configures, if any."""
    vcr = Harness("vcrpy")
    nock = Harness("nock")
    for rel in _source_files(root):
        text = read_text(root, rel)[0] or ""
        if rel.endswith(".py") and _VCR_SIGNS.search(text):
            vcr.path = vcr.path or rel
            _vcrpy_settings(text, vcr)
        elif not rel.endswith(".py") and _NOCK_SIGNS.search(text):
            nock.path = nock.path or rel
            _nock_settings(text, nock)
    if vcr.path:
        vcr.match_on = vcr.match_on or list(VCRPY_DEFAULT_MATCH)
        return vcr
    if nock.path:
        nock.match_on = [*NOCK_MATCH, *nock.match_on]
        return nock
    return Harness()
