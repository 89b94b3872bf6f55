"""The recordings app's rooms stay small and its imports run one way, with no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = "cassettes_app"
MAX_FUNCTION_LINES = 100
# Still over the limit, to be split next; none may grow, and no other may join them.
KNOWN_LONG = {
    "cassettes_app.checks.trace.trace_tool_calls_reach_stub": 155,
    "cassettes_app.checks.trace.trace_no_invented_ids": 132,
    "cassettes_app.checks.ledger.ledger_consistent": 189,
    "cassettes_app.checks.docs.docs_replay_notes": 140,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _app_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / APP).rglob("*.py") if "migrations" not in p.parts}


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every app module this one imports, at any level (functions, TYPE_CHECKING included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # `from package import module` imports the module, not only the package.
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cassettes_app_has_no_import_cycle() -> None:
    modules = _app_modules()
    graph = {name: _imports(path, name, set(modules)) for name, path in modules.items()}
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_function_in_cassettes_app_is_over_100_lines() -> None:
    long = []
    for name, path in _app_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                where = f"{name}.{node.name}"
                if size > max(MAX_FUNCTION_LINES, KNOWN_LONG.get(where, 0)):
                    long.append(f"{where}: {size} lines")
    assert long == []
