"""Can this sandbox run this suite? The hand-in's ecosystems, and what the sandbox provides.

The sandbox provides Python: the runtime built by scripts/sandbox-setup.sh and, installed
from the hand-in's Python declarations, its own packages (the rest of `submissions.deps`).
Of every other ecosystem it has at most the program itself: the host's /usr is mounted
read-only (SYSTEM_PATH), so a /usr/bin/node runs, but with the network off and no install
step for them, npm packages, Go modules, crates, gems and Maven/Gradle artifacts are never
fetched. A suite that needs one of those (or a program the host lacks) cannot be judged
here: its runs are not started, and each check says what it needs, from which files.

The need is read from the files the hand-in declares and the programs the command runs:
`npm test`, `npx vitest`, `go test ./...`, and through `make TARGET` (that target's recipe
and its prerequisites) or a script the command runs (`./run.sh`, `bash test.sh`). A Python
hand-in that keeps a package.json for its tooling (prettier) still runs: its command runs
Python. Nothing here runs candidate code; files are read with caps and no links followed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cassettes_app.safefiles import open_regular
from submissions.sandbox.types import SYSTEM_PATH

MAX_SCRIPT_BYTES = 64 * 1024  # a Makefile or a run script; more is not read
MAX_DEPTH = 4  # make -> script -> make ...: how far the command is followed


@dataclass(frozen=True)
class Ecosystem:
    """A language toolchain: the files that declare it and the programs that need it."""

    name: str  # "npm dependencies" as the checks say it
    toolchain: str  # "Node.js"
    runtime: str  # the program the sandbox must have
    files: tuple[str, ...]  # declaring files, at the hand-in's top
    programs: tuple[str, ...]  # a command running one of these needs this ecosystem


PYTHON = Ecosystem(
    "Python dependencies",
    "Python",
    "python3",
    (
        "pyproject.toml",
        "uv.lock",
        "poetry.lock",
        "pylock.toml",
        "requirements.txt",
        "Pipfile",
        "Pipfile.lock",
        "setup.py",
        "setup.cfg",
    ),
    ("python", "python3", "pytest", "uv", "poetry", "pipenv", "tox", "nox"),
)
NPM = Ecosystem(
    "npm dependencies",
    "Node.js",
    "node",
    ("package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "bun.lock"),
    ("node", "npm", "npx", "yarn", "pnpm", "bun", "vitest", "jest", "mocha", "tsx", "ts-node"),
)
GO = Ecosystem("Go modules", "Go", "go", ("go.mod", "go.sum"), ("go",))
CARGO = Ecosystem("Rust crates", "Rust", "cargo", ("Cargo.toml", "Cargo.lock"), ("cargo",))
RUBY = Ecosystem(
    "Ruby gems",
    "Ruby",
    "ruby",
    ("Gemfile", "Gemfile.lock"),
    ("ruby", "bundle", "bundler", "rake", "rspec"),
)
JVM = Ecosystem(
    "Maven/Gradle dependencies",
    "Java",
    "java",
    ("pom.xml", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"),
    ("mvn", "mvnw", "gradle", "gradlew", "java"),
)
ECOSYSTEMS = (PYTHON, NPM, GO, CARGO, RUBY, JVM)


# ---- what the sandbox provides --------------------------------------------------------


def sandbox_program(name: str) -> bool:
    """Whether `name` runs inside the sandbox: found on its system PATH, its real file under
    /usr (the host's /usr is mounted read-only; /etc/alternatives links resolve there)."""
    for folder in SYSTEM_PATH.split(":"):
        candidate = os.path.join(folder, name)
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.path.isfile(real) and os.access(real, os.X_OK):
            return True
    return False


# ---- what the hand-in declares --------------------------------------------------------


def _text(tree: Path, rel: str) -> str | None:
    """A regular file's text under the tree (capped, no link followed), None when absent."""
    try:
        handle = open_regular(tree, rel)
    except OSError:
        return None
    with handle:
        return handle.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")


def declaring_files(tree: Path, ecosystem: Ecosystem) -> tuple[str, ...]:
    """The ecosystem's files present at the hand-in's top, in the table's order."""
    found = [name for name in ecosystem.files if (tree / name).is_file()]
    if ecosystem is PYTHON:
        found += sorted(
            e.name
            for e in os.scandir(tree)
            if e.is_file(follow_symlinks=False)
            and re.fullmatch(r"requirements[\w.-]+\.txt", e.name, re.IGNORECASE)
        )
    return tuple(found)


def _npm_declares(tree: Path, files: tuple[str, ...]) -> bool:
    if any(name != "package.json" for name in files):
        return True  # a lock file
    try:
        data = json.loads(_text(tree, "package.json") or "{}")
    except ValueError:
        return True  # unreadable: npm would not get far either
    tables = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
    return isinstance(data, dict) and any(data.get(t) for t in tables)


def _cargo_declares(tree: Path, files: tuple[str, ...]) -> bool:
    try:
        data = tomllib.loads(_text(tree, "Cargo.toml") or "")
    except tomllib.TOMLDecodeError:
        return True
    tables = ("dependencies", "dev-dependencies", "build-dependencies")
    return any(data.get(t) for t in tables)


def declares_dependencies(tree: Path, ecosystem: Ecosystem, files: tuple[str, ...]) -> bool:
    """Whether the files ask for packages of the ecosystem (which this sandbox never fetches)."""
    if not files:
        return False
    if ecosystem is NPM:
        return _npm_declares(tree, files)
    if ecosystem is GO:
        return bool(re.search(r"^\s*require\b", _text(tree, "go.mod") or "", re.MULTILINE))
    if ecosystem is CARGO:
        return _cargo_declares(tree, files)
    if ecosystem is RUBY:
        return "Gemfile.lock" in files or bool(
            re.search(r"^\s*gem\s", _text(tree, "Gemfile") or "", re.MULTILINE)
        )
    return ecosystem is JVM  # Maven and Gradle fetch their plugins even for an empty build


def hand_in_ecosystems(tree: Path) -> dict[str, tuple[str, ...]]:
    """Each ecosystem the hand-in's files declare, by toolchain, with its files."""
    tree = Path(tree)
    found = {e.toolchain: declaring_files(tree, e) for e in ECOSYSTEMS}
    return {name: files for name, files in found.items() if files}


# ---- what the command runs ------------------------------------------------------------

_SEPARATORS = re.compile(r"&&|\|\||[;|&\n]|\$\(|`|\(|\)")
_WRAPPERS = {"env", "exec", "time", "nice", "nohup", "command", "xvfb-run"}
_SHELLS = {"sh", "bash", "dash", "zsh"}
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=True)
    except ValueError:
        return segment.split()


def _simple_command(segment: str) -> list[str]:
    """A simple command's words, from the program on (env settings and wrappers off)."""
    words = _words(segment)
    while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in _WRAPPERS):
        words = words[1:]
    return words


def _script(words: list[str]) -> str:
    """The hand-in's script a command runs (`./run.sh`, `bash test.sh`), "" when none."""
    program = os.path.basename(words[0])
    path = words[1] if program in _SHELLS and len(words) > 1 else words[0]
    if program not in _SHELLS and not path.startswith("./"):
        return ""
    rel = os.path.normpath(path)
    return "" if rel.startswith(("..", "/")) else rel


def _recipes(tree: Path, targets: list[str], seen: set[str]) -> list[str]:
    """The recipe lines of make `targets` (the first target when none) and their prerequisites."""
    text = next((t for name in _MAKEFILES if (t := _text(tree, name)) is not None), None)
    if text is None:
        return []
    rules: dict[str, tuple[list[str], list[str]]] = {}
    order: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue  # a blank line inside a recipe does not end it
        if line.startswith("\t"):
            for name in current:
                rules[name][1].append(line.strip().lstrip("@-+"))
            continue
        match = re.match(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)\s*([^=#]*)", line)
        current = []
        if match and not line.lstrip().startswith(("export ", "#")):
            prerequisites = match.group(2).split(";")[0].split()
            for name in match.group(1).split():
                rules.setdefault(name, ([], []))[0].extend(prerequisites)
                current.append(name)
                if not name.startswith("."):
                    order.append(name)
    todo = list(targets) or order[:1]
    lines: list[str] = []
    while todo:
        name = todo.pop(0)
        if name in seen or name not in rules:
            continue
        seen.add(name)
        prerequisites, recipe = rules[name]
        todo = prerequisites + todo
        lines += recipe
    return lines


def programs_run(
    tree: Path, command: str, depth: int = 0, seen: set[str] | None = None
) -> list[str]:
    """The programs `command` runs, followed into make targets and the hand-in's scripts."""
    seen = set() if seen is None else seen
    programs: list[str] = []
    for segment in _SEPARATORS.split(command):
        words = _simple_command(segment)
        if not words:
            continue
        program = os.path.basename(words[0])
        programs.append(program)
        if depth >= MAX_DEPTH:
            continue
        nested: list[str] = []
        if program in ("make", "gmake"):
            targets = [a for a in words[1:] if not a.startswith("-") and "=" not in a]
            nested = _recipes(tree, targets, seen)
        elif (script := _script(words)) and script not in seen:
            seen.add(script)
            body = _text(tree, script) or ""
            nested = [line for line in body.splitlines() if not line.startswith("#!")]
        for line in nested:
            programs += programs_run(tree, line.replace("$(MAKE)", "make"), depth + 1, seen)
    return programs


# ---- the verdict ------------------------------------------------------------------------


@dataclass(frozen=True)
class Unmet:
    """What a suite needs that this sandbox cannot provide."""

    ecosystem: Ecosystem
    files: tuple[str, ...]  # the hand-in's declaring files
    dependencies: bool  # it declares the ecosystem's packages
    program: str  # the program of the command that needs it

    def _needs(self) -> str:
        what = (
            self.ecosystem.name
            if self.dependencies
            else f"the {self.ecosystem.toolchain} toolchain"
        )
        return f"{what} ({', '.join(self.files)})" if self.files else what

    def _lacks(self) -> str:
        if not sandbox_program(self.ecosystem.runtime):
            return f"has no `{self.ecosystem.runtime}`"
        return "installs Python dependencies only"

    def reason(self, who: str = "the suite") -> str:
        """Why the runs were not started, naming the toolchain and the declaring files."""
        return f"not run: {who} needs {self._needs()} and this sandbox {self._lacks()}"

    def declared(self) -> str:
        """What env.dependencies_installed says of the hand-in's declarations."""
        if self.dependencies:
            return f"declares {self._needs()}; this sandbox installs Python dependencies only"
        return f"needs {self._needs()}; this sandbox {self._lacks()}: nothing installed"


def unmet_need(tree: Path, command: str) -> Unmet | None:
    """What `command`, run in the hand-in's tree, needs that this sandbox cannot provide."""
    tree = Path(tree)
    programs = set(programs_run(tree, command))
    for ecosystem in ECOSYSTEMS:
        if ecosystem is PYTHON:
            continue  # what the sandbox provides
        program = next((p for p in ecosystem.programs if p in programs), None)
        if program is None:
            continue
        files = declaring_files(tree, ecosystem)
        dependencies = declares_dependencies(tree, ecosystem, files)
        if dependencies or not sandbox_program(ecosystem.runtime):
            return Unmet(ecosystem, files, dependencies, program)
    return None
