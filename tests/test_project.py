"""The project's own wiring: compose file, layout, import direction, CI script."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_describes_the_four_services_with_health_checks() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "redis", "postgres"}
    for name, service in services.items():
        assert "healthcheck" in service, name
    assert "gunicorn" in " ".join(services["web"]["command"])
    assert services["worker"]["command"][:4] == ["celery", "-A", "reviewer", "worker"]
    assert services["web"]["volumes"] == services["worker"]["volumes"]  # shared data volume


def test_every_command_compose_names_exists_in_the_project() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    app_services = [compose["services"][name] for name in ("web", "worker")]
    text = " ".join(
        " ".join(s["command"]) + " " + " ".join(s["healthcheck"]["test"]) for s in app_services
    )
    requirements = (ROOT / "requirements.txt").read_text().lower()
    for tool in ("gunicorn", "celery"):
        assert tool in text and tool in requirements
    assert "reviewer.wsgi:application" in text
    assert (ROOT / "reviewer" / "wsgi.py").is_file()
    assert (ROOT / "reviewer" / "celery.py").is_file()
    commands_dir = {
        p.stem for p in ROOT.glob("*/management/commands/*.py") if not p.stem.startswith("_")
    }
    import django.core.management as core

    builtin = set(core.get_commands())
    for word in text.split():
        if word in {"migrate", "collectstatic"}:
            assert word in builtin or word in commands_dir
    build = (ROOT / "Dockerfile").read_text()
    assert "requirements.txt" in build and "bubblewrap" in build


def test_layout_matches_the_product_card() -> None:
    for path in [
        "manage.py",
        "reviewer",
        "submissions",
        "cassettes_app",
        "templates",
        "static",
        "tests",
        "docker-compose.yml",
        "README.md",
        "Makefile",
        "pyproject.toml",
        ".ci/run",
    ]:
        assert (ROOT / path).exists(), path


def _imports(package: str) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def test_imports_run_one_way() -> None:
    assert "reviewer" not in _imports("submissions")
    assert not {"reviewer", "submissions"} & _imports("cassettes_app")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme_top = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "make test" in ci and "make test" in readme_top
    assert shutil.which("bash")
