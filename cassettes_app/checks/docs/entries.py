"""The entrypoints each assignment shape asks for, and how each is found in the tree:
Makefile targets, `./run.sh` and its modes, a stub start script, a runbook's steps and the
service entry, and what the assignment's replay command names.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cassettes_app.checks.docs.makefile import Makefile
from cassettes_app.checks.docs.repofiles import (
    SKIP_DIRS,
    exists,
    find_file,
    is_dir,
    is_executable,
    listing,
    read_text,
)
from cassettes_app.checks.docs.runbook import README_NAMES, RUNBOOK_NAMES, doc_lines, doc_step


@dataclass(slots=True)
class Entry:
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


def make_entry(make: Makefile, target: str) -> Entry:
    label = f"make {target}"
    if make.path is None:
        return Entry(label, False, "looked for a Makefile at the repository root; there is none")
    if target in make.rules:
        return Entry(label, True, f"rule `{target}:`", make.path, make.rules[target])
    if target in make.phony:
        return Entry(
            label,
            True,
            f"declared in .PHONY but no `{target}:` rule, so `make {target}` does nothing",
            make.path,
            make.phony[target],
            soft=True,
        )
    known = ", ".join(sorted(make.rules)[:15]) or "none"
    cut = " (first 1 MB read)" if make.truncated else ""
    return Entry(
        label,
        False,
        f"looked for a `{target}:` rule or .PHONY entry; targets found: {known}{cut}",
        make.path,
    )


_TEST_SCRIPTS = ("test.sh", "run_tests.sh", "run-tests.sh", "tests.sh")


def optional(entry: Entry, why: str) -> Entry:
    """An entry the brief does not require: absent, it is noted, never missing."""
    if entry.found:
        return entry
    return Entry(entry.label, True, f"none ({why}, not required)", optional=True)


def test_entry(root: Path, make: Makefile) -> Entry:
    label = "test target"
    for target in ("test", "tests", "check"):
        if target in make.rules:
            return Entry(label, True, f"make {target}", make.path, make.rules[target])
    script = find_file(root, _TEST_SCRIPTS, ("", "scripts", "bin"))
    if script:
        return Entry(label, True, f"script {script}", script)
    for name in ("tox.ini", "noxfile.py"):
        found = find_file(root, (name,))
        if found:
            return Entry(label, True, found, found)
    config = find_file(root, ("pytest.ini", "conftest.py"))
    if config is None:
        for name, marker in (("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]")):
            found = find_file(root, (name,))
            if found and marker in (read_text(root, found)[0] or ""):
                config = found
                break
    has_tests = exists(root, "tests") or exists(root, "test")
    if config and has_tests:
        return Entry(label, True, f"pytest ({config} and a tests folder)", config)
    looked = "a Makefile test/tests/check rule, test.sh, tox.ini, or pytest config with tests/"
    if make.phony.get("test"):
        return Entry(
            label, True, "make test is declared .PHONY without a rule", make.path, soft=True
        )
    return Entry(label, False, f"looked for {looked}")


_PYTHON_TARGET = re.compile(
    r"(?:python[0-9.]*|\$\{?PYTHON[^}\s]*\}?|\$\(PYTHON\))\s+(?:-[A-Za-z]+\s+)*?"
    r"(?:-m\s+([A-Za-z_][\w.]*)|([\w./-]+\.py))"
)


def _module_file(root: Path, module: str) -> str | None:
    base = module.replace(".", "/")
    for rel in (f"{base}/__main__.py", f"{base}.py", f"{base}/__init__.py"):
        if exists(root, rel):
            return rel
    return None


def _code_lines(text: str) -> str:
    """Shell text with comment lines blanked (a word in a comment handles no mode); the line
    numbers stay those of the file."""
    return "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())


def run_sh_entries(root: Path, make: Makefile, replay_command: str) -> list[Entry]:
    rel = find_file(root, ("run.sh",))
    if rel is None:
        return [
            Entry("./run.sh", False, "looked for run.sh at the repository root"),
            Entry("./run.sh replay", False, "no run.sh"),
            Entry("./run.sh record", False, "no run.sh"),
        ]
    entries: list[Entry] = []
    if is_executable(root, rel):
        entries.append(Entry("./run.sh", True, "executable", rel))
    else:
        callers = [make.text, replay_command]
        readme = find_file(root, ("README.md", "README", "README.rst", "README.txt"))
        if readme:
            callers.append(read_text(root, readme)[0] or "")
        invoked = re.compile(r"\b(?:ba|z|da)?sh\s+(?:\./)?run\.sh\b")
        if any(invoked.search(text) for text in callers if text):
            entries.append(Entry("./run.sh", True, "not executable, but invoked with sh", rel))
        else:
            entries.append(
                Entry(
                    "./run.sh",
                    False,
                    "run.sh is not executable and nothing runs it with sh/bash",
                    rel,
                )
            )
    text = _code_lines(read_text(root, rel)[0] or "")
    forwarded: str | None = None
    if re.search(r"\$\{?(?:1|@|\*)", text):
        for match in _PYTHON_TARGET.finditer(text):
            target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
            if target and exists(root, target.removeprefix("./")):
                forwarded = target.removeprefix("./")
                break
    forwarded_text = (read_text(root, forwarded)[0] or "") if forwarded else ""
    for mode in ("replay", "record"):
        label = f"./run.sh {mode}"
        hit = re.search(rf"\b{mode}\b", text)
        if hit:
            line = text[: hit.start()].count("\n") + 1
            entries.append(Entry(label, True, f"run.sh names the `{mode}` mode", rel, line))
            continue
        literal = re.search(rf"""["']{mode}["']""", forwarded_text)
        if forwarded and literal:
            line = forwarded_text[: literal.start()].count("\n") + 1
            entries.append(
                Entry(
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
        entries.append(Entry(label, False, f"looked for {looked}", rel))
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


def record_cap_entry(root: Path, run_sh: str | None) -> Entry:
    """run-twice: `record` must be capped, by a max-calls bound the reviewer can find."""
    label = "record capped"
    candidates = ([run_sh] if run_sh else []) + [p for p in _code_files(root) if p != run_sh]
    for rel in candidates:
        text = read_text(root, rel)[0] or ""
        hit = _RECORD_CAP.search(text)
        if hit:
            line = text[: hit.start()].count("\n") + 1
            return Entry(label, True, f"a bound on model calls: `{hit.group(0)}`", rel, line)
    return Entry(
        label,
        True,
        "no max-calls bound found (MAX_CALLS, --max-calls, --limit, a record cap) in run.sh "
        "or the scripts it runs",
        run_sh,
        soft=True,
    )


def stub_entry(root: Path, make: Makefile) -> Entry:
    label = "stub start script"
    subfolders = sorted(
        e.name
        for e in listing(root)
        if e.name not in SKIP_DIRS and not e.name.startswith(".") and is_dir(e)
    )
    folders = ["", *subfolders]
    for folder in folders[:200]:
        for entry in sorted(listing(root, folder), key=lambda e: e.name):
            name = entry.name.lower()
            if "stub" not in name or not name.endswith(_STUB_EXTS) or name.startswith("test"):
                continue
            try:
                regular = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if regular:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                return Entry(label, True, rel, rel)
    for target, line in make.rules.items():
        if "stub" in target.lower():
            return Entry(label, True, f"make {target}", make.path, line)
    return Entry(
        label,
        False,
        "looked for a *stub* script (.py/.js/.ts/.sh/...) at the root or one folder down, "
        "or a Makefile target named like stub",
    )


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


def _service_target(root: Path, command: str, make: Makefile) -> str | None:
    """The file or target a start command runs, when it exists in the tree."""
    match = _PYTHON_TARGET.search(command)
    if match:
        target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
        if target and exists(root, target):
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
    if script and exists(root, script.group(1)):
        return script.group(1).removeprefix("./")
    return None


def runbook_entries(root: Path, make: Makefile) -> list[Entry]:
    docs: list[tuple[str, list[tuple[int, str, bool]]]] = []
    for names in (RUNBOOK_NAMES, README_NAMES):
        rel = find_file(root, names, ("", "docs"))
        if rel:
            docs.append((rel, doc_lines(read_text(root, rel)[0] or "")))
    entries: list[Entry] = []
    start_command: str | None = None
    for step in ("start", "test", "replay"):
        label = f"runbook {step}"
        for rel, lines in docs:
            hit = doc_step(lines, step)
            if hit:
                entries.append(Entry(label, True, f"`{hit[1][:120]}`", rel, hit[0]))
                if step == "start" and start_command is None:
                    start_command = hit[1]
                break
        else:
            looked = ", ".join(rel for rel, _ in docs) or "no RUNBOOK.md or README"
            entries.append(
                Entry(
                    label,
                    False,
                    f"looked for a `{step}` heading or line with a command in {looked}",
                    docs[0][0] if docs else None,
                )
            )
    target = _service_target(root, start_command, make) if start_command else None
    if target:
        entries.append(Entry("service entry", True, f"{target} (from the start command)"))
    else:
        found = find_file(root, _ENTRY_FILES)
        if found is None:
            for name in sorted(e.name for e in listing(root) if is_dir(e))[:200]:
                if name not in SKIP_DIRS and exists(root, f"{name}/__main__.py"):
                    found = f"{name}/__main__.py"
                    break
        if found:
            entries.append(Entry("service entry", True, found, found))
        else:
            entries.append(
                Entry(
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


def replay_command_entries(root: Path, make: Makefile, command: str) -> list[Entry]:
    entries: list[Entry] = []
    for words in _split_command(command):
        head = words[0]
        if head in ("make", "gmake"):
            if any(w in ("-C", "-f", "--directory", "--file") for w in words[1:]):
                continue  # another folder or file: not the root Makefile
            targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            for target in targets or [next(iter(make.rules), "all")]:
                entries.append(make_entry(make, target))
        elif head.startswith("./") or head in ("sh", "bash"):
            script = head if head.startswith("./") else (words[1] if len(words) > 1 else "")
            rel = script.removeprefix("./")
            label = f"./{rel}" if head.startswith("./") else f"{head} {script}"
            if rel and exists(root, rel):
                entries.append(Entry(label, True, "file exists", rel))
            else:
                entries.append(Entry(label, False, f"looked for {rel or 'a script'}"))
        elif re.match(r"^python[0-9.]*$", head):
            match = _PYTHON_TARGET.search(" ".join(words))
            if not match:
                continue
            target = _module_file(root, match.group(1)) if match.group(1) else match.group(2)
            label = " ".join(words[:3])
            if target and exists(root, target):
                entries.append(Entry(label, True, target, target.removeprefix("./")))
            else:
                entries.append(
                    Entry(label, False, f"looked for {match.group(1) or match.group(2)}")
                )
    return entries
