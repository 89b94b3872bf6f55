"""What `./run.sh MODE` does with its argument, read without running anything.

A run.sh names its modes itself (`case "$1" in replay)`, `[ "$1" = record ]`), or forwards
its arguments ("$@", $1) to a script. Then the script is followed, and the modes its argument
parser accepts are read from its syntax tree: argparse `choices=` (a literal, a module
constant or an Enum), `add_parser("replay")` sub-commands, comparisons (`sys.argv[1] ==
"record"`, `mode in ("replay", "record")`) and `match` cases, in the script and in the
local modules it imports. What cannot be followed (a binary, node, a dynamic dispatch) is
said so: the reading is then unsure, never a proof that a mode is missing.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cassettes_app.checks.docs.repofiles import exists, read_text

# A reference to the script's own arguments: "$@", $*, $1, ${1:-replay}.
ARGS = re.compile(r"\$\{?[1@*]")


_MAX_FOLLOWED = 12


@dataclass(slots=True)
class Modes:
    """The modes a run.sh's argument reaches: mode → (file, line), and what was followed."""

    reads_args: bool = False  # run.sh uses its arguments at all
    followed: list[str] = field(default_factory=list)  # scripts read after run.sh
    unread: list[str] = field(default_factory=list)  # forwarded to, but not readable here
    found: dict[str, tuple[str, int]] = field(default_factory=dict)


def code_lines(text: str) -> str:
    """Shell text with comment lines blanked (a word in a comment handles no mode); the line
    numbers stay those of the file."""
    return "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return line.split()


def module_file(root: Path, module: str) -> str | None:
    """The file `python -m module` runs, when it is in the tree."""
    base = module.replace(".", "/")
    for rel in (f"{base}/__main__.py", f"{base}.py", f"{base}/__init__.py"):
        if exists(root, rel):
            return rel
    return None


def forward_targets(root: Path, text: str) -> tuple[list[str], list[str]]:
    """(scripts in the tree, other programs) that run.sh lines passing "$@"/$1 invoke.

    A word naming a file is taken after any `$dir/`, `$(dirname "$0")/` or `./` prefix, so
    `exec "${PYTHON:-python3}" "$here/src/answer.py" "$@"` leads to src/answer.py.
    """
    targets: list[str] = []
    others: list[str] = []
    for line in code_lines(text).splitlines():
        if not ARGS.search(line):
            continue
        words = _words(line)
        for index, word in enumerate(words):
            if word == "-m" and index + 1 < len(words):
                found = module_file(root, words[index + 1])
                if found and found not in targets:
                    targets.append(found)
                continue
            # Leading path parts that expand a variable ($here, ${DIR}, $(dirname "$0")) are
            # the script's own folder: what follows is the path inside the tree.
            parts = word.split("/")
            while len(parts) > 1 and ("$" in parts[0] or parts[0] in (".", "")):
                parts = parts[1:]
            rel = "/".join(parts)
            if ARGS.match(word) or not re.search(r"\.(?:py|sh|bash)$", rel):
                if re.search(r"\.(?:js|mjs|cjs|ts|rb|go)$", rel) and rel not in others:
                    others.append(rel)
                continue
            if exists(root, rel) and rel not in targets:
                targets.append(rel)
            elif rel not in others:
                others.append(rel)
    return targets, others


def shell_modes(text: str, mode: str) -> int | None:
    """The line where shell code names `mode` as a word (a case label, a test), or None."""
    hit = re.search(rf"\b{re.escape(mode)}\b", code_lines(text))
    return text[: hit.start()].count("\n") + 1 if hit else None


def _strings(node: ast.AST | None, constants: dict[str, list[str]]) -> list[str]:
    """String constants of a literal, a tuple/list/set of them, or a module constant's."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for item in node.elts for s in _strings(item, constants)]
    if isinstance(node, ast.Name):
        return constants.get(node.id, [])
    if isinstance(node, ast.Call) and node.args:  # list(MODES), sorted(Mode), tuple(...)
        return _strings(node.args[0], constants)
    return []


def _constants(tree: ast.Module) -> dict[str, list[str]]:
    """Module constants holding strings (MODES = ("replay", "record")) and Enum classes'
    string members (class Mode(StrEnum): REPLAY = "replay")."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = _strings(node.value, out)
            for target in targets:
                if isinstance(target, ast.Name) and values:
                    out[target.id] = values
        elif isinstance(node, ast.ClassDef):
            members = [
                s
                for item in node.body
                if isinstance(item, ast.Assign)
                for s in _strings(item.value, {})
            ]
            if members:
                out[node.name] = members
    return out


def python_modes(text: str) -> tuple[dict[str, int], list[str]] | None:
    """(mode → line, local imports) an argument parser in Python source accepts; None when
    the source does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    constants = _constants(tree)
    found: dict[str, int] = {}
    imports: list[str] = []

    def add(values: list[str], line: int) -> None:
        for value in values:
            found.setdefault(value, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "choices":
                    add(_strings(keyword.value, constants), node.lineno)
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("add_parser", "command", "add_command") and node.args:
                add(_strings(node.args[0], {}), node.lineno)
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                add(_strings(side, constants), node.lineno)
        elif isinstance(node, ast.match_case):
            add(_pattern_strings(node.pattern), node.pattern.lineno)
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            imports += [prefix] + [f"{prefix}.{a.name}".lstrip(".") for a in node.names]
        elif isinstance(node, ast.Import):
            imports += [alias.name for alias in node.names]
    return found, imports


def _pattern_strings(pattern: ast.pattern) -> list[str]:
    if isinstance(pattern, ast.MatchValue):
        return _strings(pattern.value, {})
    if isinstance(pattern, ast.MatchOr):
        return [s for p in pattern.patterns for s in _pattern_strings(p)]
    if isinstance(pattern, ast.MatchSequence) and pattern.patterns:
        return _pattern_strings(pattern.patterns[0])  # case ["replay", *rest]
    return []


def _local_module(root: Path, script: str, name: str) -> str | None:
    """A module an import names, when it is a file of the tree (beside the script or from
    the root)."""
    folder = PurePosixPath(script).parent
    base = name.lstrip(".")
    if not base:
        return None
    for start in (str(folder), ""):
        module = f"{start.replace('/', '.')}.{base}" if start not in ("", ".") else base
        found = module_file(root, module)
        if found:
            return found
    return None


def forwarded_modes(root: Path, run_sh: str, modes: tuple[str, ...]) -> Modes:
    """The modes run.sh's argument reaches, in run.sh itself or the scripts it forwards to."""
    text = read_text(root, run_sh)[0] or ""
    out = Modes(reads_args=bool(ARGS.search(code_lines(text))))
    for mode in modes:
        line = shell_modes(text, mode)
        if line:
            out.found[mode] = (run_sh, line)
    if not out.reads_args:
        return out
    todo, out.unread = forward_targets(root, text)
    while todo and len(out.followed) < _MAX_FOLLOWED:
        rel = todo.pop(0)
        if rel in out.followed:
            continue
        out.followed.append(rel)
        source = read_text(root, rel)[0] or ""
        if rel.endswith((".sh", ".bash")):
            for mode in modes:
                line = shell_modes(source, mode)
                if line and mode not in out.found:
                    out.found[mode] = (rel, line)
            todo += [t for t in forward_targets(root, source)[0] if t not in out.followed]
            continue
        read = python_modes(source)
        if read is None:
            for mode in modes:  # unparsable: a quoted literal is the best reading there is
                hit = re.search(rf"""["']{re.escape(mode)}["']""", source)
                if hit and mode not in out.found:
                    out.found[mode] = (rel, source[: hit.start()].count("\n") + 1)
            continue
        found, imports = read
        for mode in modes:
            if mode in found and mode not in out.found:
                out.found[mode] = (rel, found[mode])
        for name in imports:
            local = _local_module(root, rel, name)
            if local and local not in out.followed and local not in todo:
                todo.append(local)
    return out
