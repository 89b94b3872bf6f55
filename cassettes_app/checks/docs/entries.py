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
from cassettes_app.checks.docs.runsh import forwarded_modes, module_file


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
    # Not found, but the reading could not settle it (arguments passed to a script that
    # could not be followed, a runbook worded otherwise): a warning, never a fail.
    unsure: bool = False
    command: str | None = None  # the command line this entry is, when it is one

    @property
    def state(self) -> str:
        if self.optional:
            return "not required"
        if self.soft:
            return "not as asked"
        if self.unsure:
            return "not proven"
        return "found" if self.found else "missing"

    def evidence(self) -> dict[str, Any]:
        state = self.state
        item: dict[str, Any] = {"message": f"{self.label}: {state} — {self.detail}"}
        # What the entry is, as fields: a replay that ran the command proves it later.
        item["entry"], item["state"] = self.label, state
        if self.command:
            item["command"] = self.command
        if self.path:
            item["path"] = self.path
        if self.line:
            item["line"] = self.line
        return item


def make_entry(make: Makefile, target: str) -> Entry:
    label = f"make {target}"
    if make.path is None:
        return Entry(
            label,
            False,
            "looked for a Makefile at the repository root; there is none",
            command=label,
        )
    if target in make.rules:
        return Entry(label, True, f"rule `{target}:`", make.path, make.rules[target], command=label)
    if target in make.phony:
        return Entry(
            label,
            True,
            f"declared in .PHONY but no `{target}:` rule, so `make {target}` does nothing",
            make.path,
            make.phony[target],
            soft=True,
            command=label,
        )
    known = ", ".join(sorted(make.rules)[:15]) or "none"
    cut = " (first 1 MB read)" if make.truncated else ""
    # A Makefile that includes others may define the rule there: unsure, not missing.
    included = " (it includes other makefiles, not read)" if make.includes else ""
    return Entry(
        label,
        False,
        f"looked for a `{target}:` rule or .PHONY entry; targets found: {known}{cut}{included}",
        make.path,
        command=label,
        unsure=bool(make.includes),
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


def run_sh_entries(root: Path, make: Makefile, replay_command: str) -> list[Entry]:
    rel = find_file(root, ("run.sh",))
    if rel is None:
        return [
            Entry(
                "./run.sh", False, "looked for run.sh at the repository root", command="./run.sh"
            ),
            Entry("./run.sh replay", False, "no run.sh", command="./run.sh replay"),
            Entry("./run.sh record", False, "no run.sh", command="./run.sh record"),
        ]
    entries: list[Entry] = [_run_sh_itself(root, make, replay_command, rel)]
    modes = forwarded_modes(root, rel, ("replay", "record"))
    for mode in ("replay", "record"):
        label = f"./run.sh {mode}"
        where = modes.found.get(mode)
        if where and where[0] == rel:
            detail = f"run.sh names the `{mode}` mode"
            entries.append(Entry(label, True, detail, rel, where[1], command=label))
        elif where:
            detail = f"run.sh passes its argument to {where[0]}, which handles {mode!r}"
            entries.append(Entry(label, True, detail, where[0], where[1], command=label))
        elif not modes.reads_args:
            detail = f"looked for `{mode}` in a case/if of run.sh, which reads no argument"
            entries.append(Entry(label, False, detail, rel, command=label))
        else:
            # It reads its arguments, but where they lead could not be read to the end: an
            # unsure reading, never a missing mode.
            followed = ", ".join(modes.followed) or "no script of the tree"
            unread = f"; also passes them to {', '.join(modes.unread[:3])}" if modes.unread else ""
            detail = (
                f"run.sh passes its arguments on; looked for `{mode}` in its case/if and in "
                f"the argument parsing (choices, sub-commands, comparisons, match) of "
                f"{followed}{unread}"
            )
            entries.append(Entry(label, False, detail, rel, command=label, unsure=True))
    return entries


def _run_sh_itself(root: Path, make: Makefile, replay_command: str, rel: str) -> Entry:
    """run.sh is executable, or something the hand-in documents runs it with sh/bash."""
    if is_executable(root, rel):
        return Entry("./run.sh", True, "executable", rel, command="./run.sh")
    callers = [make.text, replay_command]
    readme = find_file(root, README_NAMES)
    if readme:
        callers.append(read_text(root, readme)[0] or "")
    invoked = re.compile(r"\b(?:ba|z|da)?sh\s+(?:\./)?run\.sh\b")
    if any(invoked.search(text) for text in callers if text):
        return Entry(
            "./run.sh", True, "not executable, but invoked with sh", rel, command="./run.sh"
        )
    detail = "run.sh is not executable and nothing runs it with sh/bash"
    return Entry("./run.sh", False, detail, rel, command="./run.sh")


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


# A module constant that bounds calls: its name says so, it holds a number, and the code
# compares against it (`if calls >= MAX_LIVE_CALLS:`, `[ "$n" -ge "$CALL_CEILING" ]`).
_CAP_CONSTANT = re.compile(
    r"^(?:export\s+)?([A-Z][A-Z0-9_]*)\s*(?::\s*[\w\[\]]+\s*)?=\s*\(?\d[\d_]*\)?\s*(?:#.*)?$",
    re.M,
)


_COMPARE = r"(?:[<>]=?|==|-(?:ge|gt|le|lt|eq))"


_CAP_WORDS = frozenset(
    {"CALL", "CALLS", "REQUEST", "REQUESTS", "BUDGET", "CAP", "LIMIT", "QUOTA", "CEILING"}
)


def _cap_constant(text: str) -> tuple[str, int] | None:
    """(name, line) of a module constant bounding calls that the code compares against."""
    for match in _CAP_CONSTANT.finditer(text):
        name = match.group(1)
        if not _CAP_WORDS & set(name.split("_")):
            continue
        ref = rf"(?:\b{name}\b|\$\{{?{name}\}}?)"
        compared = rf"{_COMPARE}\s*[\"']?{ref}|{ref}[\"']?\s*{_COMPARE}"
        if re.search(compared, text):
            return name, text[: match.start()].count("\n") + 1
    return None


def record_cap_entry(root: Path, run_sh: str | None) -> Entry:
    """run-twice: `record` must be capped, by a max-calls bound the reviewer can find."""
    label = "record capped"
    candidates = ([run_sh] if run_sh else []) + [p for p in _code_files(root) if p != run_sh]
    texts = [(rel, read_text(root, rel)[0] or "") for rel in candidates]
    for rel, text in texts:
        hit = _RECORD_CAP.search(text)
        if hit:
            line = text[: hit.start()].count("\n") + 1
            return Entry(label, True, f"a bound on model calls: `{hit.group(0)}`", rel, line)
    for rel, text in texts:
        constant = _cap_constant(text)
        if constant:
            detail = f"a bound on model calls: `{constant[0]}`, compared against"
            return Entry(label, True, detail, rel, constant[1])
    return Entry(
        label,
        True,
        "no max-calls bound found (MAX_CALLS, --max-calls, --limit, a record cap, or a "
        "constant named for calls/requests/budget/cap/limit that the code compares against) "
        "in run.sh or the scripts of the tree",
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
        target = module_file(root, match.group(1)) if match.group(1) else match.group(2)
        if target and exists(root, target):
            return target.removeprefix("./")
    served = re.search(r"\b(?:uvicorn|gunicorn|hypercorn)\s+(?:-\S+\s+)*([\w.]+):\w+", command)
    if served:
        found = module_file(root, served.group(1))
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
            # A runbook is prose: one that words the step otherwise is an unsure reading.
            entries.append(
                Entry(
                    label,
                    False,
                    f"looked for a `{step}` heading, bold label or line with a command in {looked}",
                    docs[0][0] if docs else None,
                    unsure=bool(docs),
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
                entries.append(Entry(label, True, "file exists", rel, command=label))
            else:
                detail = f"looked for {rel or 'a script'}"
                entries.append(Entry(label, False, detail, command=label))
        elif re.match(r"^python[0-9.]*$", head):
            match = _PYTHON_TARGET.search(" ".join(words))
            if not match:
                continue
            runs = module_file(root, match.group(1)) if match.group(1) else match.group(2)
            label = " ".join(words[:3])
            if runs and exists(root, runs):
                rel = runs.removeprefix("./")
                entries.append(Entry(label, True, runs, rel, command=label))
            else:
                detail = f"looked for {match.group(1) or match.group(2)}"
                entries.append(Entry(label, False, detail, command=label))
    return entries
