"""Documentation checks: the entrypoints an assignment asks for, and the replay notes.

Both read the unpacked submission tree and nothing else; nothing is ever executed. Files
are read without following links, capped at 1 MB and decoded leniently, so a 5 MB or
binary Makefile is a finding at worst, never an exception.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.catalog import ENTRYPOINTS, REPLAY_NOTES
from cassettes_app.safefiles import open_regular

__all__ = [
    "ENTRYPOINTS",
    "MAX_READ",
    "REPLAY_NOTES",
    "docs_entrypoints",
    "docs_replay_notes",
    "make_targets",
    "replay_note_fields",
]

ENTRYPOINTS = ENTRYPOINTS
REPLAY_NOTES = REPLAY_NOTES

MAX_READ = 1024 * 1024

SHAPES = ("cassette", "run-twice", "trace", "ticket-service")

# Folders never searched for scripts: tests, vendored code, virtualenvs.
_SKIP_DIRS = frozenset(
    {".git", "node_modules", ".venv", "venv", "env", "__pycache__", "tests", "test", ".tox"}
)
_MAX_LISTING = 5000


# --------------------------------------------------------------------------- files


def _read(root: Path, rel: str) -> tuple[str | None, bool]:
    """(text, truncated) of a regular file under root, links not followed; None if unreadable."""
    try:
        with open_regular(root, rel) as handle:
            data = handle.read(MAX_READ + 1)
    except OSError:
        return None, False
    return data[:MAX_READ].decode("utf-8", "replace"), len(data) > MAX_READ


def _listing(root: Path, rel: str = "") -> list[os.DirEntry[str]]:
    """Entries of one folder (capped), or nothing when it is missing or a link."""
    folder = root / rel if rel else root
    try:
        if rel and folder.is_symlink():
            return []
        with os.scandir(folder) as entries:
            out = []
            for entry in entries:
                out.append(entry)
                if len(out) >= _MAX_LISTING:
                    break
            return out
    except OSError:
        return []


def _find(root: Path, names: Sequence[str], folders: Sequence[str] = ("",)) -> str | None:
    """Relative path of the first regular file (not a link) named like one of `names`.

    Names match case-insensitively; earlier names and folders win.
    """
    for folder in folders:
        files = {}
        for entry in _listing(root, folder):
            try:
                if entry.is_file(follow_symlinks=False):
                    files.setdefault(entry.name.lower(), entry.name)
            except OSError:
                continue
        for name in names:
            real = files.get(name.lower())
            if real:
                return f"{folder}/{real}" if folder else real
    return None


def _exists(root: Path, rel: str) -> bool:
    """A regular file or folder at rel, inside root, not through a link."""
    rel = rel.strip().removeprefix("./")
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        return False
    current = root
    for part in Path(rel).parts:
        current = current / part
        if current.is_symlink() or not current.exists():
            return False
    return True


def _executable(root: Path, rel: str) -> bool:
    try:
        return bool(os.stat(root / rel, follow_symlinks=False).st_mode & 0o111)
    except OSError:
        return False


# --------------------------------------------------------------------------- Makefiles

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
class _Make:
    path: str | None
    rules: dict[str, int] = field(default_factory=dict)
    phony: dict[str, int] = field(default_factory=dict)
    text: str = ""
    truncated: bool = False


def _makefile(root: Path) -> _Make:
    rel = _find(root, _MAKEFILE_NAMES)
    if rel is None:
        return _Make(None)
    text, truncated = _read(root, rel)
    if text is None:
        return _Make(None)
    rules, phony = make_targets(text)
    return _Make(rel, rules, phony, text, truncated)


# --------------------------------------------------------------------------- entrypoints


@dataclass(slots=True)
class _Entry:
    """One entrypoint the assignment asks for and what the tree shows for it."""

    label: str
    found: bool
    detail: str
    path: str | None = None
    line: int | None = None
    soft: bool = False  # found, but weakly (a .PHONY name without a rule, ...)
    optional: bool = False  # the brief welcomes it but does not require it (absent here)

    def evidence(self) -> dict[str, Any]:
        if self.optional:
            state = "not required"
        elif self.soft:
            state = "not as asked"
        else:
            state = "found" if self.found else "missing"
        item: dict[str, Any] = {"message": f"{self.label}: {state} — {self.detail}"}
        if self.path:
            item["path"] = self.path
        if self.line:
            item["line"] = self.line
        return item


def _make_entry(make: _Make, target: str) -> _Entry:
    label = f"make {target}"
    if make.path is None:
        return _Entry(label, False, "looked for a Makefile at the repository root; there is none")
    if target in make.rules:
        return _Entry(label, True, f"rule `{target}:`", make.path, make.rules[target])
    if target in make.phony:
        return _Entry(
            label,
            True,
            f"declared in .PHONY but no `{target}:` rule, so `make {target}` does nothing",
            make.path,
            make.phony[target],
            soft=True,
        )
    known = ", ".join(sorted(make.rules)[:15]) or "none"
    cut = " (first 1 MB read)" if make.truncated else ""
    return _Entry(
        label,
        False,
        f"looked for a `{target}:` rule or .PHONY entry; targets found: {known}{cut}",
        make.path,
    )


_TEST_SCRIPTS = ("test.sh", "run_tests.sh", "run-tests.sh", "tests.sh")


def _optional(entry: _Entry, why: str) -> _Entry:
    """An entry the brief does not require: absent, it is noted, never missing."""
    if entry.found:
        return entry
    return _Entry(entry.label, True, f"none ({why}, not required)", optional=True)


def _test_entry(root: Path, make: _Make) -> _Entry:
    label = "test target"
    for target in ("test", "tests", "check"):
        if target in make.rules:
            return _Entry(label, True, f"make {target}", make.path, make.rules[target])
    script = _find(root, _TEST_SCRIPTS, ("", "scripts", "bin"))
    if script:
        return _Entry(label, True, f"script {script}", script)
    for name in ("tox.ini", "noxfile.py"):
        found = _find(root, (name,))
        if found:
            return _Entry(label, True, found, found)
    config = _find(root, ("pytest.ini", "conftest.py"))
    if config is None:
        for name, marker in (("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]")):
            found = _find(root, (name,))
            if found and marker in (_read(root, found)[0] or ""):
                config = found
                break
    has_tests = _exists(root, "tests") or _exists(root, "test")
    if config and has_tests:
        return _Entry(label, True, f"pytest ({config} and a tests folder)", config)
    looked = "a Makefile test/tests/check rule, test.sh, tox.ini, or pytest config with tests/"
    if make.phony.get("test"):
        return _Entry(
            label, True, "make test is declared .PHONY without a rule", make.path, soft=True
        )
    return _Entry(label, False, f"looked for {looked}")


_PYTHON_TARGET = re.compile(
    r"(?:python[0-9.]*|\$\{?PYTHON[^}\s]*\}?|\$\(PYTHON\))\s+(?:-[A-Za-z]+\s+)*?"
    r"(?:-m\s+([A-Za-z_][\w.]*)|([\w./-]+\.py))"
)


def _module_file(root: Path, module: str) -> str | None:
    base = module.replace(".", "/")
    for rel in (f"{base}/__main__.py", f"{base}.py", f"{base}/__init__.py"):
        if _exists(root, rel):
            return rel
    return None


def _code_lines(text: str) -> str:
    """Shell text with comment lines blanked (a word in a comment handles no mode); the line
    numbers stay those of the file."""
    return "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())


def _run_sh_entries(root: Path, make: _Make, replay_command: str) -> list[_Entry]:
    rel = _find(root, ("run.sh",))
    if rel is None:
        return [
            _Entry("./run.sh", False, "looked for run.sh at the repository root"),
            _Entry("./run.sh replay", False, "no run.sh"),
            _Entry("./run.sh record", False, "no run.sh"),
        ]
    entries: list[_Entry] = []
    if _executable(root, rel):
        entries.append(_Entry("./run.sh", True, "executable", rel))
    else:
        callers = [make.text, replay_command]
        readme = _find(root, ("README.md", "README", "README.rst", "README.txt"))
        if readme:
            callers.append(_read(root, readme)[0] or "")
        invoked = re.compile(r"\b(?:ba|z|da)?sh\s+(?:\./)?run\.sh\b")
        if any(invoked.search(text) for text in callers if text):
            entries.append(_Entry("./run.sh", True, "not executable, but invoked with sh", rel))
        else:
            entries.append(
                _Entry(
                    "./run.sh",
                    False,
                    "run.sh is not executable and nothing runs it with sh/bash",
                    rel,
                )
            )
    text = _code_lines(_read(root, rel)[0] or "")
    forwarded: str | None = None
    if re.search(r"\$\{?(?:1|@|\*)", text):
        for match in _PYTHON_TARGET.finditer(text):
            target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
            if target and _exists(root, target.removeprefix("./")):
                forwarded = target.removeprefix("./")
                break
    forwarded_text = (_read(root, forwarded)[0] or "") if forwarded else ""
    for mode in ("replay", "record"):
        label = f"./run.sh {mode}"
        hit = re.search(rf"\b{mode}\b", text)
        if hit:
            line = text[: hit.start()].count("\n") + 1
            entries.append(_Entry(label, True, f"run.sh names the `{mode}` mode", rel, line))
            continue
        literal = re.search(rf"""["']{mode}["']""", forwarded_text)
        if forwarded and literal:
            line = forwarded_text[: literal.start()].count("\n") + 1
            entries.append(
                _Entry(
                    label,
                    True,
                    f"run.sh passes its argument to {forwarded}, which handles {mode!r}",
                    forwarded,
                    line,
                )
            )
            continue
        looked = f"`{mode}` in a case/if of run.sh" + (
            f" or a '{mode}' literal in {forwarded}" if forwarded else ""
        )
        entries.append(_Entry(label, False, f"looked for {looked}", rel))
    return entries


_STUB_EXTS = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".go", ".rb")

# A bound on record's model calls, as take-homes name it: MAX_CALLS, --max-calls, RECORD_CAP,
# call_limit, --limit, a budget...
_RECORD_CAP = re.compile(
    r"(?i)(?:\bmax[_-]?(?:model[_-]?)?(?:calls|requests)\b|\brecord[_-]?(?:cap|limit|max)\b|"
    r"\b(?:call|request)[_-]?(?:cap|limit|budget)s?\b|--limit\b|\bmax[_-]?records?\b)"
)
_CAP_SKIP_DIRS = frozenset({"tests", "test", ".git", "node_modules", ".venv", "venv", "fixtures"})
_CAP_MAX_FILES = 300


def _code_files(root: Path) -> list[str]:
    """Relative paths of the tree's own scripts (not tests, not vendored), bounded in count."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _CAP_SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith((".py", ".sh")) and not name.startswith("test_"):
                found.append(os.path.relpath(os.path.join(folder, name), root))
                if len(found) >= _CAP_MAX_FILES:
                    return found
    return found


def _record_cap_entry(root: Path, run_sh: str | None) -> _Entry:
    """run-twice: `record` must be capped, by a max-calls bound the reviewer can find."""
    label = "record capped"
    candidates = ([run_sh] if run_sh else []) + [p for p in _code_files(root) if p != run_sh]
    for rel in candidates:
        text = _read(root, rel)[0] or ""
        hit = _RECORD_CAP.search(text)
        if hit:
            line = text[: hit.start()].count("\n") + 1
            return _Entry(label, True, f"a bound on model calls: `{hit.group(0)}`", rel, line)
    return _Entry(
        label,
        True,
        "no max-calls bound found (MAX_CALLS, --max-calls, --limit, a record cap) in run.sh "
        "or the scripts it runs",
        run_sh,
        soft=True,
    )


def _stub_entry(root: Path, make: _Make) -> _Entry:
    label = "stub start script"
    subfolders = sorted(
        e.name
        for e in _listing(root)
        if e.name not in _SKIP_DIRS and not e.name.startswith(".") and _is_dir(e)
    )
    folders = ["", *subfolders]
    for folder in folders[:200]:
        for entry in sorted(_listing(root, folder), key=lambda e: e.name):
            name = entry.name.lower()
            if "stub" not in name or not name.endswith(_STUB_EXTS) or name.startswith("test"):
                continue
            try:
                regular = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if regular:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                return _Entry(label, True, rel, rel)
    for target, line in make.rules.items():
        if "stub" in target.lower():
            return _Entry(label, True, f"make {target}", make.path, line)
    return _Entry(
        label,
        False,
        "looked for a *stub* script (.py/.js/.ts/.sh/...) at the root or one folder down, "
        "or a Makefile target named like stub",
    )


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# Words that name each runbook step; headings may use the broader set.
_STEP_WORDS = {
    "start": (("start", "starting", "serve", "launch"), ("start", "run", "running", "serve")),
    "test": (("test", "tests", "testing"), ("test", "tests", "testing")),
    "replay": (("replay", "replaying"), ("replay", "replaying")),
}
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_SPAN = re.compile(r"`([^`\n]+)`")
_COMMANDISH = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:make|python[0-9.]*|\./|sh\s|bash\s|uv\s|poetry\s|pytest|"
    r"docker|npm|node|go\s|cargo|uvicorn|gunicorn|flask|curl)"
)


def _doc_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, is code) per line: fenced or indented code is code."""
    out = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        code = fenced or line.startswith(("    ", "\t"))
        out.append((number, line, code))
    return out


def _command_in(line: str, code: bool) -> str | None:
    """The command a doc line shows: the line itself in code, else a command-like span."""
    if code:
        command = line.strip().split("  #", 1)[0].split(" # ", 1)[0].strip()
        return command or None
    for span in _SPAN.findall(line):
        if _COMMANDISH.match(span.strip()):
            return span.strip()
    return None


def _doc_step(lines: list[tuple[int, str, bool]], step: str) -> tuple[int, str] | None:
    """(line, command) where a runbook shows how to do `step` (start, test, replay)."""
    line_words, heading_words = _STEP_WORDS[step]
    heading_re = re.compile(rf"\b(?:{'|'.join(heading_words)})\b", re.I)
    line_re = re.compile(rf"\b(?:{'|'.join(line_words)})\b", re.I)
    # A heading naming the step, then the first command in its section.
    in_section = False
    for number, line, code in lines:
        heading = None if code else _HEADING.match(line)
        if heading:
            in_section = bool(heading_re.search(heading.group(2)))
            continue
        if in_section:
            command = _command_in(line, code)
            if command:
                return number, command
    # Else a line naming the step beside a command (`make test  # run the suite`).
    for number, line, code in lines:
        if line_re.search(line):
            command = _command_in(line, code)
            if command:
                return number, command
    return None


_ENTRY_FILES = (
    "app.py",
    "main.py",
    "server.py",
    "service.py",
    "serve.py",
    "wsgi.py",
    "asgi.py",
    "manage.py",
)


def _service_target(root: Path, command: str, make: _Make) -> str | None:
    """The file or target a start command runs, when it exists in the tree."""
    match = _PYTHON_TARGET.search(command)
    if match:
        target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
        if target and _exists(root, target):
            return target.removeprefix("./")
    served = re.search(r"\b(?:uvicorn|gunicorn|hypercorn)\s+(?:-\S+\s+)*([\w.]+):\w+", command)
    if served:
        found = _module_file(root, served.group(1))
        if found:
            return found
    make_run = re.search(r"\bmake\s+([\w.-]+)", command)
    if make_run and make_run.group(1) in make.rules:
        return f"make {make_run.group(1)}"
    script = re.search(r"(?:^|\s)(\./[\w./-]+)", command)
    if script and _exists(root, script.group(1)):
        return script.group(1).removeprefix("./")
    return None


_RUNBOOK_NAMES = ("RUNBOOK.md", "RUNBOOK", "RUNBOOK.txt", "RUNBOOK.rst", "OPERATIONS.md")
_README_NAMES = ("README.md", "README", "README.rst", "README.txt")


def _runbook_entries(root: Path, make: _Make) -> list[_Entry]:
    docs: list[tuple[str, list[tuple[int, str, bool]]]] = []
    for names in (_RUNBOOK_NAMES, _README_NAMES):
        rel = _find(root, names, ("", "docs"))
        if rel:
            docs.append((rel, _doc_lines(_read(root, rel)[0] or "")))
    entries: list[_Entry] = []
    start_command: str | None = None
    for step in ("start", "test", "replay"):
        label = f"runbook {step}"
        for rel, lines in docs:
            hit = _doc_step(lines, step)
            if hit:
                entries.append(_Entry(label, True, f"`{hit[1][:120]}`", rel, hit[0]))
                if step == "start" and start_command is None:
                    start_command = hit[1]
                break
        else:
            looked = ", ".join(rel for rel, _ in docs) or "no RUNBOOK.md or README"
            entries.append(
                _Entry(
                    label,
                    False,
                    f"looked for a `{step}` heading or line with a command in {looked}",
                    docs[0][0] if docs else None,
                )
            )
    target = _service_target(root, start_command, make) if start_command else None
    if target:
        entries.append(_Entry("service entry", True, f"{target} (from the start command)"))
    else:
        found = _find(root, _ENTRY_FILES)
        if found is None:
            for name in sorted(e.name for e in _listing(root) if _is_dir(e))[:200]:
                if name not in _SKIP_DIRS and _exists(root, f"{name}/__main__.py"):
                    found = f"{name}/__main__.py"
                    break
        if found:
            entries.append(_Entry("service entry", True, found, found))
        else:
            entries.append(
                _Entry(
                    "service entry",
                    False,
                    "the start command names no file in the tree, and there is no "
                    + "/".join(_ENTRY_FILES[:4])
                    + " or package __main__.py",
                )
            )
    return entries


def _split_command(command: str) -> list[list[str]]:
    """A shell command line as word lists, split at &&, ||, ;, | and newlines."""
    out = []
    for segment in re.split(r"&&|\|\||[;|\n]", command):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]  # leading VAR=value
        if words:
            out.append(words)
    return out


def _replay_command_entries(root: Path, make: _Make, command: str) -> list[_Entry]:
    entries: list[_Entry] = []
    for words in _split_command(command):
        head = words[0]
        if head in ("make", "gmake"):
            if any(w in ("-C", "-f", "--directory", "--file") for w in words[1:]):
                continue  # another folder or file: not the root Makefile
            targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            for target in targets or [next(iter(make.rules), "all")]:
                entries.append(_make_entry(make, target))
        elif head.startswith("./") or head in ("sh", "bash"):
            script = head if head.startswith("./") else (words[1] if len(words) > 1 else "")
            rel = script.removeprefix("./")
            label = f"./{rel}" if head.startswith("./") else f"{head} {script}"
            if rel and _exists(root, rel):
                entries.append(_Entry(label, True, "file exists", rel))
            else:
                entries.append(_Entry(label, False, f"looked for {rel or 'a script'}"))
        elif re.match(r"^python[0-9.]*$", head):
            match = _PYTHON_TARGET.search(" ".join(words))
            if not match:
                continue
            target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
            label = " ".join(words[:3])
            if target and _exists(root, target):
                entries.append(_Entry(label, True, target, target.removeprefix("./")))
            else:
                entries.append(
                    _Entry(label, False, f"looked for {match.group(1) or match.group(2)}")
                )
    return entries


def docs_entrypoints(
    root: Path, shape: str | None, replay_command: str | None = ""
) -> CheckOutcome:
    """Establish that the commands the assignment shape asks for exist in the tree.

    cassette: `make record`, `make test`, `make demo`; run-twice: `./run.sh` handling
    `replay` and `record`, plus a test target; trace: a stub start script and a test target;
    ticket-service: a runbook with start/test/replay commands and the service entry. The
    assignment's replay command (`make test && make demo`, `./run.sh replay`) is checked
    too. Files are only read, never run.
    """
    root = Path(root)
    shape = (shape or "").strip().lower()
    replay_command = replay_command or ""  # assignments without one store None or ""
    if not root.is_dir():
        return CheckOutcome(ENTRYPOINTS, "error", f"the submission tree {root} is not a folder")
    if shape not in SHAPES and not replay_command.strip():
        return skip(ENTRYPOINTS, f"no entrypoints to check for shape {shape or '(none)'!r}")
    make = _makefile(root)
    entries: list[_Entry] = []
    if shape == "cassette":
        entries += [_make_entry(make, target) for target in ("record", "test", "demo")]
    elif shape == "run-twice":
        entries += _run_sh_entries(root, make, replay_command)
        entries.append(_record_cap_entry(root, _find(root, ("run.sh",))))
        entries.append(_optional(_test_entry(root, make), "the run-twice brief welcomes tests"))
    elif shape == "trace":
        entries += [_stub_entry(root, make), _test_entry(root, make)]
    elif shape == "ticket-service":
        entries += _runbook_entries(root, make)
    labels = {e.label for e in entries}
    for entry in _replay_command_entries(root, make, replay_command):
        if entry.label not in labels:
            labels.add(entry.label)
            entries.append(entry)
    if not entries:
        return skip(ENTRYPOINTS, "the replay command names nothing this check can look for")
    missing = [e for e in entries if not e.found]
    soft = [e for e in entries if e.found and e.soft]
    evidence = [e.evidence() for e in missing + soft] + [
        e.evidence() for e in entries if e.found and not e.soft
    ]
    if missing:
        return CheckOutcome(
            ENTRYPOINTS,
            "fail",
            "missing: " + ", ".join(e.label for e in missing),
            evidence,
        )
    if soft:
        return CheckOutcome(
            ENTRYPOINTS,
            "warn",
            "found, but not as the brief asks: "
            + "; ".join(f"{e.label} ({e.detail})" for e in soft),
            evidence,
        )
    # An entry the brief only welcomes, absent here, is not reported as found.
    found = ", ".join(e.label for e in entries if not e.optional)
    absent = [e.label for e in entries if e.optional]
    tail = f" ({', '.join(absent)}: none, not required)" if absent else ""
    return CheckOutcome(ENTRYPOINTS, "pass", f"found: {found}{tail}", evidence)


# --------------------------------------------------------------------------- replay notes

_TRIGGER = re.compile(
    r"\b(?:drop(?:s|ped|ping)?|ignor(?:e|es|ed|ing)|normali[sz](?:e|es|ed|ing|ation)|"
    r"volatile|strip(?:s|ped|ping)?|remov(?:e|es|ed|ing)|exclud(?:e|es|ed|ing)|"
    r"omit(?:s|ted|ting)?|discard(?:s|ed|ing)?)\b",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|never|no longer|kept|keeps?|retain(?:s|ed)?|preserv(?:e|es|ed))\b|n't\b", re.I
)
_KEEP = re.compile(r"\b(?:kept|keeps?|retain(?:s|ed)?|preserv(?:e|es|ed))\b", re.I)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?](?=\s|$)")
# Names that sit near the trigger words but are not request fields.
_NOT_FIELDS = frozenset(
    {
        "key",
        "request",
        "response",
        "recorded_at",
        "cassette",
        "cassettes",
        "sha256",
        "sha1",
        "md5",
        "hexdigest",
        "json",
        "true",
        "false",
        "null",
        "none",
        "utf8",
    }
)
# Request fields a note may name before the trigger word ("`user` is dropped").
_REQUEST_FIELDS = frozenset(
    {
        "user",
        "request_id",
        "id",
        "created",
        "timestamp",
        "ts",
        "time",
        "nonce",
        "seed",
        "trace_id",
        "session_id",
        "metadata",
        "stream",
        "stream_options",
        "store",
        "model",
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "n",
        "stop",
        "response_format",
        "logprobs",
        "parallel_tool_calls",
        "service_tier",
        "input",
        "instructions",
        "system",
        "headers",
        "idempotency_key",
    }
)


@dataclass(slots=True)
class _Unit:
    """A heading, a list item (with its continuation lines) or a paragraph."""

    kind: str  # heading | item | para
    indent: int
    start: int
    lines: list[str]
    level: int = 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _units(text: str) -> list[_Unit]:
    """Markdown-ish blocks of a note, fenced code left out (line numbers kept)."""
    units: list[_Unit] = []
    current: _Unit | None = None
    blank = False
    for number, line, code in _doc_lines(text):
        if code and not line.startswith(("    ", "\t")):
            current = None  # fenced code: not prose
            continue
        if not line.strip():
            blank = True
            if current is not None and current.kind != "item":
                current = None
            continue
        heading = _HEADING.match(line)
        item = _ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if heading:
            current = None
            units.append(_Unit("heading", 0, number, [heading.group(2)], len(heading.group(1))))
        elif item:
            current = _Unit("item", len(item.group(1)), number, [item.group(2)])
            units.append(current)
        elif line.lstrip().startswith("|"):
            current = None
            units.append(_Unit("para", indent, number, [line.strip()]))
        elif current is not None and (not blank or indent > current.indent):
            current.lines.append(line.strip())
        elif code:
            current = None  # an indented code block
        else:
            current = _Unit("para", indent, number, [line.strip()])
            units.append(current)
        blank = False
    return units


@dataclass(slots=True)
class _Notes:
    dropped: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)


def _field_name(span: str) -> str | None:
    name = span.strip()
    if _IDENT.match(name) and name.lower() not in _NOT_FIELDS:
        return name
    return None


def _item_field(unit: _Unit) -> str | None:
    """The field a list item names: its leading code span, else its first bare word."""
    text = unit.text.lstrip("*_ ")
    span = _SPAN.match(text)
    if span:
        return _field_name(span.group(1))
    word = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\b(?:\s*$|\s*[-—:(,])", text)
    return _field_name(word.group(1)) if word else None


def _clauses(text: str) -> list[tuple[int, str]]:
    """(offset, text) of sentences split again at `;` and `but`, code spans kept whole."""
    protected = _SPAN.sub(lambda m: "\0" * len(m.group(0)), text)
    cuts = [0]
    for match in _SENTENCE_END.finditer(protected):
        cuts.append(match.end())
    for match in re.finditer(r";|\bbut\b", protected):
        cuts.append(match.start())
    cuts = [*sorted(set(cuts)), len(text)]
    return [(a, text[a:b]) for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def replay_note_fields(text: str, vocabulary: Iterable[str] = ()) -> _Notes:
    """Field names a replay note says are dropped (or kept), with their line numbers.

    A name counts when it is a backticked identifier after a trigger word ("dropped",
    "ignored", "normalised", "volatile", "stripped", ...) in the same clause, or before it
    when it is a known request field; or a list item under a line or heading that has a
    trigger word and ends the intro (`drop these fields:` + `- user`). Negated clauses
    ("`created` is not dropped", "`id` is kept") record the name as kept.
    """
    vocab = {v for v in vocabulary if isinstance(v, str)} | _REQUEST_FIELDS
    notes = _Notes()
    units = _units(text)

    def add(target: dict[str, int], name: str | None, line: int) -> None:
        if name:
            target.setdefault(name, line)

    for position, unit in enumerate(units):
        body = unit.text
        for offset, clause in _clauses(body):
            trigger = _TRIGGER.search(clause)
            keep = _KEEP.search(clause)
            if not trigger and not keep:
                continue
            negated = bool(_NEGATION.search(_SPAN.sub("", clause)))
            for span in _SPAN.finditer(clause):
                name = _field_name(span.group(1))
                if not name:
                    continue
                line = unit.start + body[: offset + span.start()].count("\n")
                after = trigger is not None and span.start() > trigger.start()
                if trigger and not negated:
                    if after or name in vocab:
                        add(notes.dropped, name, line)
                elif name in vocab:
                    add(notes.kept, name, line)
        # An intro ("drop these top-level fields:") or a heading ("## Volatile fields")
        # followed by a list: each item names one field.
        intro = unit.text.rstrip(" *_").endswith(":") and _TRIGGER.search(unit.text)
        titled = unit.kind == "heading" and _TRIGGER.search(unit.text)
        if not (intro or titled) or _NEGATION.search(_SPAN.sub("", unit.text)):
            continue
        depth: int | None = None
        for child in units[position + 1 :]:
            if child.kind == "heading":
                if titled and child.level > unit.level:
                    continue
                break
            if child.kind != "item":
                if intro:
                    break
                continue
            if unit.kind == "item" and child.indent <= unit.indent:
                break
            if depth is None:
                depth = child.indent
            if child.indent < depth:
                break
            if child.indent == depth:
                add(notes.dropped, _item_field(child), child.start)
    return notes


def _key_facts(
    key_findings: Any,
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    """(kept, dropped, also_dropped): field → cassette paths, from either form of findings.

    Accepts the summary form {"kept": [...], "dropped": [...], "also_dropped": [...]}
    (values lists of names, or name → paths) and the per-cassette list form
    [{"path", "matched", "kept_fields", "also_dropped", "volatile_present"}, ...].
    """
    kept: dict[str, list[str]] = {}
    dropped: dict[str, list[str]] = {}
    also: dict[str, list[str]] = {}

    def put(target: dict[str, list[str]], names: Any, where: str | None = None) -> None:
        if isinstance(names, Mapping):
            for name, paths in names.items():
                listed = [str(p) for p in paths] if isinstance(paths, list | tuple) else []
                target.setdefault(str(name), []).extend(listed[:5])
        elif isinstance(names, list | tuple | set | frozenset):
            for name in names:
                if isinstance(name, str):
                    paths = target.setdefault(name, [])
                    if where and len(paths) < 5:
                        paths.append(where)

    if key_findings is None:
        return kept, dropped, also
    if isinstance(key_findings, Mapping):
        put(kept, key_findings.get("kept"))
        put(dropped, key_findings.get("dropped"))
        put(also, key_findings.get("also_dropped"))
        entries = key_findings.get("entries")
        if isinstance(entries, list) and not (kept or dropped or also):
            return _key_facts(entries)
        return kept, dropped, also
    if isinstance(key_findings, list | tuple):
        for entry in key_findings:
            if not isinstance(entry, Mapping):
                continue
            where = entry.get("path") if isinstance(entry.get("path"), str) else None
            if entry.get("matched"):
                put(dropped, entry.get("volatile_present"), where)
            else:
                put(kept, entry.get("kept_fields"), where)
                put(also, entry.get("also_dropped"), where)
        return kept, dropped, also
    # A KeyReport-like object.
    for name, target in (("kept", kept), ("dropped", dropped), ("also_dropped", also)):
        put(target, getattr(key_findings, name, None))
    return kept, dropped, also


def _paths(paths: list[str]) -> str:
    return f" ({', '.join(paths[:3])})" if paths else ""


def docs_replay_notes(
    root: Path,
    *,
    volatile_fields: Sequence[str] = (),
    key_findings: Any = None,
    shape: str | None = "cassette",
) -> CheckOutcome:
    """Establish that REPLAY.md (or the runbook) names the normalised request fields and
    that they agree with the assignment's volatile fields and with the recomputed keys.

    `key_findings` is what `cassettes.keys_match` derived ({"kept": [...], "dropped":
    [...]}, or its per-cassette entries): a field the note calls dropped but the keys keep
    is a fail. The cassette shape requires REPLAY.md; trace and ticket-service notes are
    optional (skip when absent); run-twice fixtures have no request to normalise (skip).
    """
    root = Path(root)
    shape = (shape or "").strip().lower()
    if shape == "run-twice":
        return skip(REPLAY_NOTES, "run-twice fixtures are keyed by their text; no request fields")
    if not root.is_dir():
        return CheckOutcome(REPLAY_NOTES, "error", f"the submission tree {root} is not a folder")
    volatile = [v for v in volatile_fields if isinstance(v, str)]
    keys = _KeyFacts(*_key_facts(key_findings))
    vocabulary = set(volatile) | set(keys.kept) | set(keys.dropped) | set(keys.also)

    replay_md, sources = _note_sources(root, shape)
    if not sources:
        if shape == "cassette":
            return CheckOutcome(
                REPLAY_NOTES,
                "fail",
                "no REPLAY.md: the cassette task asks for one naming the normalised fields",
                [{"message": "looked for REPLAY.md at the root and in docs/"}],
            )
        return skip(REPLAY_NOTES, "no REPLAY.md, runbook or README to read")

    source, notes, truncated = _read_notes(root, sources, replay_md, vocabulary)
    if not notes.dropped:
        if shape == "cassette" or replay_md:
            return CheckOutcome(
                REPLAY_NOTES,
                "fail",
                f"{source} names no normalised request fields",
                [
                    {
                        "message": "looked for backticked names or list items near "
                        "'dropped', 'ignored', 'normalised', 'volatile', 'stripped'"
                        + (" (first 1 MB read)" if truncated else ""),
                        "path": source,
                    }
                ],
            )
        return skip(REPLAY_NOTES, "no replay notes naming normalised fields (optional here)")
    return _notes_outcome(source, notes, keys, volatile, vocabulary)


@dataclass(slots=True)
class _KeyFacts:
    """What the recomputed keys show: field → cassette paths, as `_key_facts` returns it."""

    kept: dict[str, list[str]]
    dropped: dict[str, list[str]]
    also: dict[str, list[str]]


def _note_sources(root: Path, shape: str) -> tuple[str | None, list[str]]:
    """REPLAY.md (if any), and the files to read for notes: it first, then runbook, README.

    Only the cassette shape insists on REPLAY.md; the others may keep notes elsewhere.
    """
    replay_md = _find(root, ("REPLAY.md", "REPLAY", "REPLAY.txt", "REPLAY.rst"), ("", "docs"))
    sources = [replay_md] if replay_md else []
    if shape != "cassette":
        for names in (_RUNBOOK_NAMES, _README_NAMES):
            found = _find(root, names, ("", "docs"))
            if found:
                sources.append(found)
    return replay_md, sources


def _read_notes(
    root: Path, sources: list[str], replay_md: str | None, vocabulary: set[str]
) -> tuple[str, _Notes, bool]:
    """(source, notes, truncated): the first source that names dropped fields, else REPLAY.md."""
    source = sources[0]
    notes = _Notes()
    truncated = False
    for candidate in sources:
        text, cut = _read(root, candidate)
        found_notes = replay_note_fields(text or "", vocabulary)
        if found_notes.dropped or candidate == replay_md:
            source, notes, truncated = candidate, found_notes, cut
            if found_notes.dropped:
                break
    return source, notes, truncated


def _key_disagreements(source: str, notes: _Notes, keys: _KeyFacts) -> list[dict[str, Any]]:
    """Fails: fields the note calls dropped that the keys keep, or kept that they drop."""
    fails: list[dict[str, Any]] = []
    for name, line in notes.dropped.items():
        if name in keys.kept:
            fails.append(
                {
                    "message": f"{source} says `{name}` is dropped but the keys keep it"
                    f"{_paths(keys.kept[name])}",
                    "path": source,
                    "line": line,
                }
            )
    for name, line in notes.kept.items():
        if name in keys.dropped or name in keys.also:
            paths = keys.dropped.get(name) or keys.also.get(name) or []
            fails.append(
                {
                    "message": f"{source} says `{name}` is kept but the keys drop it"
                    f"{_paths(paths)}",
                    "path": source,
                    "line": line,
                }
            )
    return fails


def _unnamed_fields(
    source: str, notes: _Notes, keys: _KeyFacts, volatile: list[str]
) -> list[dict[str, Any]]:
    """Warns: fields the keys also drop, or the assignment calls volatile, the note omits."""
    warns: list[dict[str, Any]] = []
    for name, paths in keys.also.items():
        if name not in notes.dropped:
            warns.append(
                {
                    "message": f"the keys also drop `{name}`{_paths(paths)}, which {source} "
                    "does not name",
                    "path": source,
                }
            )
    for name in volatile:
        if name not in notes.dropped and name not in keys.kept:
            warns.append(
                {
                    "message": f"{source} does not name `{name}`, which the assignment lists "
                    "as volatile",
                    "path": source,
                }
            )
    return warns


def _named_fields(
    source: str, notes: _Notes, volatile: list[str], vocabulary: set[str]
) -> list[dict[str, Any]]:
    """Evidence of each field the note drops, and of those the assignment does not list."""
    named = [
        {"message": f"names `{name}` as dropped", "path": source, "line": line}
        for name, line in notes.dropped.items()
    ]
    extra = [n for n in notes.dropped if n not in volatile and n not in vocabulary]
    if extra:
        named.append(
            {
                "message": f"{source} also drops {', '.join(f'`{n}`' for n in extra[:10])}, "
                "which the assignment does not list",
                "path": source,
            }
        )
    return named


def _notes_outcome(
    source: str, notes: _Notes, keys: _KeyFacts, volatile: list[str], vocabulary: set[str]
) -> CheckOutcome:
    """fail when the note disagrees with the keys, warn when it omits a field, else pass."""
    fails = _key_disagreements(source, notes, keys)
    warns = _unnamed_fields(source, notes, keys, volatile)
    named = _named_fields(source, notes, volatile, vocabulary)
    listed = ", ".join(f"`{n}`" for n in notes.dropped)
    if fails:
        return CheckOutcome(
            REPLAY_NOTES,
            "fail",
            f"{source} disagrees with the recomputed keys: "
            + "; ".join(f["message"].removeprefix(f"{source} ") for f in fails[:3]),
            fails + warns + named,
        )
    if warns:
        return CheckOutcome(
            REPLAY_NOTES,
            "warn",
            f"{source} names {listed}, which does not match the volatile fields",
            warns + named,
        )
    return CheckOutcome(REPLAY_NOTES, "pass", f"{source} names {listed} as dropped", named)
