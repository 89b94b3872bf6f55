"""The check catalog: every id is computed by one function named after it, where it says."""

from __future__ import annotations

import ast
import importlib
import re

from cassettes_app.checks import catalog
from tests.paths import ROOT

# The check catalog of the design contract (DESIGN.md, "Check catalog"), copied here so a
# clone of this repository alone holds it: a new id is added here and in the catalog together.
DESIGN_IDS = {
    "cassettes.fresh",
    "cassettes.keys_match",
    # Planned in DESIGN.md ("Planned with this round's issues"), built with issue #29.
    "cassettes.live_spot_check",
    "cassettes.model_metadata",
    "cassettes.no_secrets",
    "cassettes.per_turn",
    "cassettes.provenance",  # planned in DESIGN.md with #28; built with its second step
    "cassettes.pruned",
    # Planned in DESIGN.md ("Planned with this round's issues"), built with issue #30.
    "cohort.recordings_unique",
    # Planned in DESIGN.md ("Planned with this round's issues"), built with issue #30.
    "cohort.code_similarity",
    "docs.entrypoints",
    "docs.replay_notes",
    "env.dependencies_installed",
    "ledger.consistent",
    "replay.byte_identical",
    "replay.missing_fixture_fails_loudly",
    "replay.no_network_attempts",
    "replay.offline_pass",
    "replay.recordings_used",
    "service.caches",
    "service.degrades_gracefully",
    "service.schema_valid",
    "service.starts",
    "trace.idempotency_enforced",
    "trace.idempotency_keys_logged",
    "trace.live_match",
    "trace.no_invented_ids",
    "trace.stub_hops_present",
    "trace.tool_calls_reach_stub",
}


def test_every_catalog_id_names_the_function_that_computes_it() -> None:
    for spec in catalog.CATALOG.values():
        module = importlib.import_module(spec.module)
        assert callable(getattr(module, spec.function, None)), f"{spec.module}.{spec.function}"


def _outcomes_given(path) -> set[str]:
    """The catalog ids a module gives an outcome: `CheckOutcome(ID, ...)` or `skip(ID, ...)`."""
    names = {k: v for k, v in vars(catalog).items() if isinstance(v, str) and v in catalog.CATALOG}
    given = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            func = node.func.id if isinstance(node.func, ast.Name) else None
            if func in ("CheckOutcome", "skip") and node.args[0].id in names:
                given.add(names[node.args[0].id])
    return given


def test_every_module_that_gives_an_id_an_outcome_is_in_the_catalog() -> None:
    unlisted = []
    for app in ("reviewer", "submissions", "cassettes_app"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for check_id in _outcomes_given(path):
                spec = catalog.CATALOG[check_id]
                if module not in (spec.module, *spec.also):
                    unlisted.append(f"{check_id} in {module}")
    assert unlisted == []
    for spec in catalog.CATALOG.values():
        for module in spec.also:
            assert spec.id in _outcomes_given(ROOT / (module.replace(".", "/") + ".py"))


def test_the_catalog_holds_the_design_ids_and_nothing_else() -> None:
    assert set(catalog.CATALOG) == DESIGN_IDS


def test_app_code_names_checks_through_the_catalog_not_literals() -> None:
    ids = "|".join(re.escape(i) for i in catalog.CATALOG)
    literal = re.compile(rf"[\"'](?:{ids})[\"']")
    offenders = []
    for app in ("reviewer", "submissions", "cassettes_app"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or path.name == "catalog.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if literal.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == []


def test_an_unknown_id_is_titled_by_itself() -> None:
    assert catalog.title(catalog.OFFLINE_PASS) == "Replay passes offline"
    assert catalog.title("nope.unknown") == "nope.unknown"
