"""What a hand-in declares it depends on, read from its files (never run, never resolved here).

Sources in order of trust: `uv.lock`, `poetry.lock`, `pylock.toml`, `requirements*.txt`
(with `-r` includes inside the tree), `pyproject.toml` (`[project].dependencies`, the test
and dev extras and dependency groups), `Pipfile.lock`. The first source found is used; the
others are named as ignored. Of a lock, only the entries its own installer would put in
the sandbox are taken: their markers and Python ranges are evaluated for the sandbox's
marker environment (`prepare.marker_environment`), so an entry locked for Windows or for
a browser build (emscripten) is never asked of the index.

Only names from the configured package index are accepted. VCS and URL requirements, index
options (`--index-url`, `--extra-index-url`, `--find-links`), local paths and editable
installs of anything but the hand-in itself are refused, each with a finding naming the
file and line, and never reach the resolver. Files are read with caps on size, lines and
includes: a hostile declaration is a finding, not a hang.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, cast

from packaging.markers import (
    InvalidMarker,
    Marker,
    UndefinedComparison,
    UndefinedEnvironmentName,
    default_environment,
)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cassettes_app.safefiles import open_regular

MAX_FILE_BYTES = 5 * 2**20  # a real lock of a large project is well under this
MAX_REQUIREMENTS = 2000
MAX_INCLUDES = 50
LOCKS = ("uv.lock", "poetry.lock", "pylock.toml")
TEST_GROUPS = ("test", "tests", "testing", "dev")
_REQ_FILE = re.compile(r"^requirements[\w.-]*\.txt$", re.IGNORECASE)
_INDEX_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host")
_INCLUDE_FLAGS = ("--requirement", "--constraint", "-r", "-c")


@dataclass(frozen=True)
class Refusal:
    """A declaration line that is not a name from the package index (a finding)."""

    path: str
    line: int | None
    message: str


@dataclass
class Declared:
    """The requirements a hand-in declares, as `name[extras] specifier; marker` strings."""

    source: str = ""  # the file the requirements come from ("" when none declares any)
    kind: str = ""  # uv.lock | poetry.lock | pylock.toml | requirements | pyproject | Pipfile.lock
    requirements: list[str] = field(default_factory=list)
    locked: bool = False  # every requirement pinned to one version by a lock
    requires_python: str | None = None
    refused: list[Refusal] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # less trusted sources also present
    capped: bool = False  # more than MAX_REQUIREMENTS were declared

    @property
    def declares_anything(self) -> bool:
        return bool(self.requirements or self.refused)


class DeclarationError(ValueError):
    """A declaration file that cannot be read at all (too large, not TOML or JSON)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _read(root: Path, rel: str) -> str | None:
    """A regular file's text under root (no link anywhere on the way), None when absent."""
    try:
        handle = open_regular(root, rel)
    except OSError:
        return None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise DeclarationError(
                rel, f"{size} bytes, over the {MAX_FILE_BYTES}-byte limit for a declaration"
            )
        data = handle.read(MAX_FILE_BYTES + 1)
    return data.decode("utf-8", "replace")


def _toml(root: Path, rel: str) -> dict[str, Any] | None:
    text = _read(root, rel)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError(rel, f"not valid TOML: {exc}") from None


def _index_requirement(text: str, path: str, line: int | None, out: Declared) -> None:
    """Add one PEP 508 requirement if it names a package of the index, else refuse it."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        out.refused.append(Refusal(path, line, f"not a requirement: {text[:120]!r} ({exc})"))
        return
    if req.url:
        out.refused.append(
            Refusal(path, line, f"{req.name} comes from a URL, not the package index: refused")
        )
        return
    if len(out.requirements) >= MAX_REQUIREMENTS:
        if not out.capped:
            out.capped = True
            out.refused.append(
                Refusal(path, line, f"more than {MAX_REQUIREMENTS} requirements: the rest ignored")
            )
        return
    out.requirements.append(str(req))


def _requirements_file(root: Path, rel: str, out: Declared, seen: set[str], depth: int = 0) -> None:
    """Read a requirements file and its `-r` includes (inside the tree, each once)."""
    seen.add(rel)
    text = _read(root, rel)
    if text is None:
        out.refused.append(Refusal(rel, None, "included file not found in the hand-in"))
        return
    for number, line in _logical_lines(text):
        include = next((f for f in _INCLUDE_FLAGS if line.startswith(f)), None)
        if include:
            _include(root, rel, number, line[len(include) :].lstrip(" ="), out, seen, depth)
        elif line.startswith(_INDEX_OPTIONS):
            flag = line.split("=", 1)[0].split(" ", 1)[0]
            out.refused.append(Refusal(rel, number, f"{flag}: only the configured index is used"))
        elif line.startswith(("-e ", "--editable")):
            target = line.split(None, 1)[1] if " " in line else ""
            if target.strip().strip("=") not in (".", "./"):
                out.refused.append(
                    Refusal(rel, number, f"editable install of {target!r}: only the hand-in itself")
                )
        elif line.startswith("-"):
            flag = line.split("=", 1)[0].split(" ", 1)[0]
            out.refused.append(Refusal(rel, number, f"option {flag} ignored"))
        elif line.startswith((".", "/")) or ("://" in line.split(";")[0] and " @ " not in line):
            out.refused.append(Refusal(rel, number, f"{line[:120]!r}: not a name from the index"))
        else:
            # Per-requirement options (--hash, --config-settings) follow the requirement.
            _index_requirement(line.split(" --", 1)[0].strip(), rel, number, out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement line: comments cut, `\\` joined."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        raw = re.split(r"(?:^|\s)#", raw, maxsplit=1)[0]
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line:
            lines.append((start, line))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def _include(
    root: Path, rel: str, number: int, target: str, out: Declared, seen: set[str], depth: int
) -> None:
    """Follow `-r FILE` relative to the including file, refusing what leaves the tree."""
    joined = PurePosixPath(rel).parent / target
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if not parts:
                out.refused.append(Refusal(rel, number, f"-r {target}: outside the hand-in"))
                return
            parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    if not parts or target.startswith("/") or "://" in target:
        out.refused.append(Refusal(rel, number, f"-r {target}: outside the hand-in"))
        return
    included = "/".join(parts)
    if included in seen:
        return  # a loop, or a file included twice: read once
    if depth >= MAX_INCLUDES or len(seen) >= MAX_INCLUDES:
        out.refused.append(Refusal(rel, number, f"more than {MAX_INCLUDES} nested includes"))
        return
    _requirements_file(root, included, out, seen, depth + 1)


def _uv_lock_needed(packages: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, Any]]:
    """The lock's packages this sandbox needs: from the hand-in's own entry along dependency
    edges whose marker holds here (with its test and dev groups). A universal lock also
    names packages for other platforms (pywin32) and other Pythons; those are left out.
    A lock with no entry for the hand-in itself is taken whole."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in packages:
        if isinstance(package, dict) and isinstance(package.get("name"), str):
            by_name.setdefault(package["name"].lower(), []).append(package)
    roots = [p for ps in by_name.values() for p in ps if _is_the_hand_in(p)]
    if not roots:
        return [p for ps in by_name.values() for p in ps if _resolution_holds(p, env)]
    needed: dict[int, dict[str, Any]] = {}
    expanded: set[tuple[int, str | None]] = set()  # (entry, extra) pairs already followed
    todo: list[tuple[dict[str, Any], tuple[str, ...]]] = [(root, TEST_GROUPS) for root in roots]
    while todo:
        package, extras = todo.pop()
        fresh = [e for e in (None, *extras) if (id(package), e) not in expanded]
        if not fresh:
            continue  # a cycle of extras, or an entry reached twice: followed once
        expanded.update((id(package), e) for e in fresh)
        needed[id(package)] = package
        base = None in fresh
        for edge in _edges(
            package, tuple(e for e in fresh if e), base=base, is_root=_is_the_hand_in(package)
        ):
            if not _marker_holds(edge.get("marker"), env):
                continue
            candidates = by_name.get(str(edge.get("name", "")).lower(), [])
            if isinstance(edge.get("version"), str):
                candidates = [c for c in candidates if c.get("version") == edge["version"]]
            candidates = [c for c in candidates if _resolution_holds(c, env)] or candidates
            wanted = edge.get("extra")
            more = (
                tuple(x for x in wanted if isinstance(x, str)) if isinstance(wanted, list) else ()
            )
            for target in candidates[:1]:
                todo.append((target, more))
    return list(needed.values())


def _is_the_hand_in(package: dict[str, Any]) -> bool:
    source = package.get("source") or {}
    return isinstance(source, dict) and (
        source.get("editable") == "." or source.get("virtual") == "."
    )


def _marker_holds(marker: Any, env: dict[str, str], groups: frozenset[str] = frozenset()) -> bool:
    """Whether a lock's marker holds in the sandbox (no extra asked for; `groups` are the
    dependency groups installed, for pylock.toml's markers); one we cannot judge keeps the
    entry, so a doubt installs too much rather than too little."""
    if marker is None or marker == "":
        return True
    if not isinstance(marker, str):
        return True
    try:
        if groups:
            lock_env: dict[str, str | frozenset[str]] = {
                **env,
                "extras": frozenset(),
                "dependency_groups": groups,
            }
            return Marker(marker).evaluate(lock_env, context="lock_file")
        return Marker(marker).evaluate({**env, "extra": ""})
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _python_holds(wanted: Any, env: dict[str, str]) -> bool:
    """Whether a lock entry's Python range (`python-versions`, `requires-python`) admits the
    sandbox's interpreter; a range we cannot read (`*`, Poetry's older `||`) admits it."""
    if not isinstance(wanted, str) or wanted.strip() in ("", "*"):
        return True
    python = env.get("python_full_version", "")
    try:
        return any(SpecifierSet(part).contains(python) for part in wanted.split("||"))
    except InvalidSpecifier:
        return True


def _resolution_holds(package: dict[str, Any], env: dict[str, str]) -> bool:
    """uv: an entry resolved for a fork (`resolution-markers`) is for this sandbox only when
    one of its fork markers holds here."""
    forks = package.get("resolution-markers")
    if not isinstance(forks, list) or not forks:
        return True
    return any(_marker_holds(marker, env) for marker in forks)


def _edges(
    package: dict[str, Any], extras: tuple[str, ...], *, base: bool, is_root: bool
) -> list[dict]:
    """A lock entry's dependency edges (when `base`), with those of the named extras (and,
    for the hand-in itself, of its test and dev groups)."""
    deps = package.get("dependencies") if base else None
    edges = list(deps) if isinstance(deps, list) else []
    for table in ("optional-dependencies", *(("dev-dependencies",) if is_root else ())):
        groups = package.get(table) or {}
        if isinstance(groups, dict):
            for extra in extras:
                group = groups.get(extra)
                edges += group if isinstance(group, list) else []
    return [e for e in edges if isinstance(e, dict)]


def _from_uv_lock(data: dict[str, Any], out: Declared, path: str, env: dict[str, str]) -> None:
    for package in _uv_lock_needed(list(data.get("package") or []), env):
        name, version = package.get("name"), package.get("version")
        source = package.get("source") or {}
        if not isinstance(source, dict) or not isinstance(name, str):
            continue
        if "registry" in source and isinstance(version, str):
            _index_requirement(f"{name}=={version}", path, None, out)
        elif _is_the_hand_in(package):
            continue  # the hand-in itself
        else:
            where = next(iter(source), "unknown")
            out.refused.append(Refusal(path, None, f"{name} comes from {where}, not the index"))


def _from_poetry_lock(
    data: dict[str, Any], out: Declared, path: str, env: dict[str, str], named: set[str]
) -> None:
    packages = [
        p
        for p in data.get("package") or []
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    ]
    for package in _poetry_needed(data, packages, env, named):
        source = package.get("source") or {}
        kind = source.get("type") if isinstance(source, dict) else None
        if kind in (None, "legacy") and not (isinstance(source, dict) and source.get("url")):
            _index_requirement(f"{package['name']}=={package.get('version')}", path, None, out)
        else:
            out.refused.append(
                Refusal(path, None, f"{package['name']} comes from {kind or 'a source'}: refused")
            )


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _poetry_needed(
    data: dict[str, Any], packages: list[dict[str, Any]], env: dict[str, str], named: set[str]
) -> list[dict[str, Any]]:
    """The poetry.lock entries `poetry install` puts in this sandbox. Lock 2.1 (Poetry 2)
    states each entry's `markers` (one, or one per group; absent: everywhere) beside its
    `python-versions`. Older locks keep markers on the dependency edges only, so the graph
    is walked from the project's own dependencies (every name its pyproject lists, and any
    entry nothing else depends on) along the edges whose markers hold here."""
    here = [p for p in packages if _python_holds(p.get("python-versions"), env)]
    metadata = _table(data, "metadata")
    version = re.match(r"^(\d+)\.(\d+)", str(metadata.get("lock-version", "")))
    if (version and (int(version[1]), int(version[2])) >= (2, 1)) or any(
        "markers" in p for p in packages
    ):
        return [p for p in here if _poetry_markers_hold(p.get("markers"), env)]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in here:
        by_name.setdefault(_norm(package["name"]), []).append(package)
    depended = {name for p in packages for name, _ in _poetry_edges(p, (), env, everything=True)}
    todo: list[tuple[str, tuple[str, ...]]] = [
        (name, ()) for name in by_name if name in named or name not in depended
    ]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    needed: dict[int, dict[str, Any]] = {}
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for package in by_name.get(name, []):
            needed[id(package)] = package
            todo += _poetry_edges(package, extras, env)
    return list(needed.values())


def _poetry_markers_hold(markers: Any, env: dict[str, str]) -> bool:
    if isinstance(markers, dict):  # one marker per dependency group: installed when any holds
        return not markers or any(_marker_holds(m, env) for m in markers.values())
    return _marker_holds(markers, env)


def _poetry_edges(
    package: dict[str, Any], extras: tuple[str, ...], env: dict[str, str], everything: bool = False
) -> list[tuple[str, tuple[str, ...]]]:
    """(name, extras) a poetry.lock entry depends on here (all of them when `everything`):
    its `[package.dependencies]` and the entries of the extras asked for."""
    out: list[tuple[str, tuple[str, ...]]] = []
    deps = package.get("dependencies")
    for name, spec in deps.items() if isinstance(deps, dict) else []:
        for one in spec if isinstance(spec, list) else [spec]:
            table = one if isinstance(one, dict) else {}
            if not everything and not (
                _marker_holds(table.get("markers"), env) and _python_holds(table.get("python"), env)
            ):
                continue
            wanted = table.get("extras")
            more = (
                tuple(sorted(e for e in wanted if isinstance(e, str)))
                if isinstance(wanted, list)
                else ()
            )
            out.append((_norm(str(name)), more))
    table = _table(package, "extras")
    for extra in extras:
        for item in table.get(extra) or []:
            if not isinstance(item, str):
                continue
            head, _, marker = item.partition(";")
            name = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", head)
            if name and (everything or _marker_holds(marker.strip() or None, env)):
                out.append((_norm(name[1]), ()))
    return out


def _pyproject_names(pyproject: dict[str, Any]) -> set[str]:
    """Every package name a pyproject lists (PEP 621, dependency groups, Poetry's tables),
    whatever its marker: the roots of an old poetry.lock's graph."""
    names: set[str] = set()
    project = _table(pyproject, "project")
    lists: list[Any] = [project.get("dependencies")]
    for table in (project.get("optional-dependencies"), pyproject.get("dependency-groups")):
        lists += list(table.values()) if isinstance(table, dict) else []
    for items in lists:
        for item in items if isinstance(items, list) else []:
            name = (
                re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", item)
                if isinstance(item, str)
                else None
            )
            if name:
                names.add(_norm(name[1]))
    tool = _table(pyproject, "tool")
    poetry = _table(tool, "poetry")
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    groups = _table(poetry, "group")
    tables += [g.get("dependencies") for g in groups.values() if isinstance(g, dict)]
    for table in tables:
        names |= (
            {_norm(str(n)) for n in table if n != "python"} if isinstance(table, dict) else set()
        )
    return names


def _from_pylock(data: dict[str, Any], out: Declared, path: str, env: dict[str, str]) -> None:
    defaults = data.get("default-groups")
    groups = frozenset(
        [*TEST_GROUPS, *(g for g in defaults if isinstance(g, str))]
        if isinstance(defaults, list)
        else TEST_GROUPS
    )
    for package in data.get("packages") or []:
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        # PEP 751: an installer takes an entry only when its marker and Python range hold.
        if not (
            _marker_holds(package.get("marker"), env, groups)
            and _python_holds(package.get("requires-python"), env)
        ):
            continue
        elsewhere = [k for k in ("vcs", "directory", "archive") if k in package]
        if elsewhere:
            out.refused.append(
                Refusal(path, None, f"{package['name']} comes from a {elsewhere[0]}: refused")
            )
        elif isinstance(package.get("version"), str):
            _index_requirement(f"{package['name']}=={package['version']}", path, None, out)


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """`parent[key]` when it is a table (pyproject's [project], a lock's metadata); empty
    when it is missing or not a table."""
    table = parent.get(key)
    return table if isinstance(table, dict) else {}


def _from_pyproject(data: dict[str, Any], out: Declared, path: str) -> None:
    project = _table(data, "project")
    lists: list[Any] = [project.get("dependencies") or []]
    extras = project.get("optional-dependencies") or {}
    groups = data.get("dependency-groups") or {}
    for table in (extras, groups):
        if isinstance(table, dict):
            lists += [table.get(name) or [] for name in TEST_GROUPS]
    for items in lists:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str):
                _index_requirement(item, path, None, out)


def _from_pipfile_lock(text: str, out: Declared, path: str, env: dict[str, str]) -> None:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DeclarationError(path, f"not valid JSON: {exc}") from None
    for section in ("default", "develop"):
        packages = data.get(section) if isinstance(data, dict) else None
        for name, spec in (packages or {}).items() if isinstance(packages, dict) else []:
            if not isinstance(spec, dict) or not _marker_holds(spec.get("markers"), env):
                continue  # pipenv installs an entry only where its markers hold
            if any(k in spec for k in ("git", "path", "file", "editable")):
                out.refused.append(Refusal(path, None, f"{name} is not from the index: refused"))
            elif isinstance(spec.get("version"), str):
                _index_requirement(f"{name}{spec['version']}", path, None, out)


def _requires_python(root: Path, out: Declared) -> None:
    pyproject = _toml(root, "pyproject.toml") if (root / "pyproject.toml").exists() else None
    project = (pyproject or {}).get("project")
    wanted = project.get("requires-python") if isinstance(project, dict) else None
    if not wanted:
        version = (_read(root, ".python-version") or "").strip().splitlines()
        wanted = f"=={version[0]}.*" if version and re.fullmatch(r"3\.\d+", version[0]) else None
        if version and re.fullmatch(r"3\.\d+\.\d+", version[0]):
            wanted = f"=={version[0]}"
    if wanted:
        try:
            SpecifierSet(wanted)
        except InvalidSpecifier:
            out.refused.append(Refusal("pyproject.toml", None, f"requires-python {wanted!r}"))
            return
        out.requires_python = wanted


def declared_dependencies(root: Path, marker_env: dict[str, str] | None = None) -> Declared:
    """Read the hand-in's most trusted declaration. Raises DeclarationError for a file that
    cannot be read at all; every refused line is in `refused`. `marker_env` is the sandbox's
    marker environment (PEP 508; by default this process's), which decides which of a
    lock's entries its own installer would put here: uv's, Poetry's, pylock.toml's and
    Pipfile.lock's markers and Python ranges are evaluated for it."""
    root = Path(root)
    # packaging's Environment is a TypedDict whose every field is a str.
    env = dict(marker_env or cast("dict[str, str]", default_environment()))
    out = Declared()
    present = [name for name in LOCKS if (root / name).is_file()]
    requirement_files = sorted(
        entry.name
        for entry in os.scandir(root)
        if entry.is_file(follow_symlinks=False) and _REQ_FILE.match(entry.name)
    )
    pyproject = _toml(root, "pyproject.toml") if (root / "pyproject.toml").is_file() else None
    has_pyproject_deps = pyproject is not None and bool(
        _table(pyproject, "project").get("dependencies")
        or _table(pyproject, "project").get("optional-dependencies")
        or pyproject.get("dependency-groups")
    )
    sources = present + (["requirements"] if requirement_files else [])
    sources += ["pyproject.toml"] if has_pyproject_deps else []
    sources += ["Pipfile.lock"] if (root / "Pipfile.lock").is_file() else []
    if not sources:
        _requires_python(root, out)
        return out
    chosen, out.ignored = sources[0], sources[1:]
    if chosen == "requirements":
        out.kind, out.source = "requirements", ", ".join(requirement_files)
        seen: set[str] = set()
        for rel in requirement_files:
            if rel not in seen:
                _requirements_file(root, rel, out, seen)
    elif chosen == "pyproject.toml":
        out.kind = out.source = "pyproject.toml"
        _from_pyproject(pyproject or {}, out, chosen)
    elif chosen == "Pipfile.lock":
        out.kind = out.source = chosen
        _from_pipfile_lock(_read(root, chosen) or "", out, chosen, env)
    else:
        out.kind = out.source = chosen
        data = _toml(root, chosen) or {}
        if chosen == "uv.lock":
            _from_uv_lock(data, out, chosen, env)
        elif chosen == "poetry.lock":
            _from_poetry_lock(data, out, chosen, env, _pyproject_names(pyproject or {}))
        else:
            _from_pylock(data, out, chosen, env)
        out.locked = True
    _requires_python(root, out)
    return out
