"""The check catalog: every id is computed by one function named after it, where it says."""

from __future__ import annotations

import importlib
import re

from cassettes_app.checks import catalog
from tests.paths import ROOT


def test_every_catalog_id_names_the_function_that_computes_it() -> None:
    for spec in catalog.CATALOG.values():
        module = importlib.import_module(spec.module)
        assert callable(getattr(module, spec.function, None)), f"{spec.module}.{spec.function}"


def test_the_catalog_holds_the_design_ids_and_nothing_else() -> None:
    design = (ROOT.parent / "shared" / "DESIGN.md").read_text(encoding="utf-8")
    ids = set(re.findall(r"^\| `([a-z]+\.[a-z_]+)` \|", design, re.M))
    assert set(catalog.CATALOG) == ids


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
