"""Can this sandbox run this suite: a hand-in's ecosystems, read from its files and command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from submissions.deps import ecosystems
from submissions.deps.ecosystems import hand_in_ecosystems as found
from submissions.deps.ecosystems import programs_run, unmet_need
from tests.paths import ROOT

TS_HANDIN = ROOT / "tests" / "fixtures" / "handins" / "ts-nock-vitest"
ONLY_PYTHON = "installs Python dependencies only"


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_typescript_hand_in_needs_its_npm_dependencies() -> None:
    assert found(TS_HANDIN) == {"Node.js": ("package.json", "package-lock.json")}
    unmet = unmet_need(TS_HANDIN, "npm test")
    assert unmet is not None and unmet.program == "npm"
    needs = "npm dependencies (package.json, package-lock.json)"
    assert unmet.reason() == f"not run: the suite needs {needs} and this sandbox {ONLY_PYTHON}"
    assert unmet.reason("the service").startswith("not run: the service needs npm")
    assert unmet.declared() == f"declares {needs}; this sandbox {ONLY_PYTHON}"


@pytest.mark.parametrize(
    "command", ["make test", "./run.sh", "bash run.sh", "CI=1 npx vitest run", "cd web && yarn"]
)
def test_the_command_is_followed_into_make_targets_and_scripts(
    tmp_path: Path, command: str
) -> None:
    root = tree(
        tmp_path,
        {
            "package.json": json.dumps({"devDependencies": {"vitest": "^4.1.12"}}),
            "Makefile": "lint:\n\tnpx prettier --check .\n\ntest: build\n\t@echo testing\n\n\t-true\n"
            "build:\n\t$(MAKE) deps\ndeps:\n\tnpm ci\n",
            "run.sh": "#!/bin/sh\nset -e\nnpm test\n",
        },
    )
    unmet = unmet_need(root, command)
    assert unmet is not None and unmet.files == ("package.json",) and unmet.dependencies


def test_a_python_hand_in_with_a_tooling_package_json_runs(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "package.json": json.dumps({"devDependencies": {"prettier": "^3.3.0"}}),
            "package-lock.json": "{}",
            "requirements.txt": "httpx==0.28.1\n",
            "Makefile": "fmt:\n\tnpx prettier --write .\ntest:\n\tpython -m pytest -q\n"
            "demo:\n\tpython -m triage\n",
        },
    )
    assert set(found(root)) == {"Python", "Node.js"}
    assert programs_run(root, "make test && make demo") == ["make", "python", "make", "python"]
    assert unmet_need(root, "make test && make demo") is None
    assert unmet_need(root, "python -m pytest") is None
    assert unmet_need(root, "make fmt") is not None  # what the tooling target would need
    assert programs_run(tree(root, {"Makefile": "test:\n\techo a\n\n\tnpm test\n"}), "make") == [
        "make",
        "echo",
        "npm",
    ]


def test_a_go_module_needs_the_go_toolchain_and_its_modules(tmp_path: Path, monkeypatch) -> None:
    root = tree(
        tmp_path,
        {
            "go.mod": "module example.com/triage\n\ngo 1.22\n\nrequire github.com/x/y v1.2.3\n",
            "go.sum": "",
            "main_test.go": "package main\n",
        },
    )
    assert found(root) == {"Go": ("go.mod", "go.sum")}
    monkeypatch.setattr(ecosystems, "sandbox_program", lambda name: name != "go")
    unmet = unmet_need(root, "go test ./...")
    assert unmet is not None and unmet.dependencies
    assert (
        unmet.reason()
        == "not run: the suite needs Go modules (go.mod, go.sum) and this sandbox has no `go`"
    )


def test_a_program_the_host_lacks_is_unmet_even_without_dependencies(
    tmp_path: Path, monkeypatch
) -> None:
    root = tree(tmp_path, {"go.mod": "module example.com/triage\n\ngo 1.22\n"})
    monkeypatch.setattr(ecosystems, "sandbox_program", lambda name: False)
    unmet = unmet_need(root, "go test ./...")
    assert unmet is not None and not unmet.dependencies
    assert (
        unmet.declared()
        == "needs the Go toolchain (go.mod); this sandbox has no `go`: nothing installed"
    )
    monkeypatch.setattr(ecosystems, "sandbox_program", lambda name: True)
    assert unmet_need(root, "go test ./...") is None  # a go with nothing to fetch runs


def test_node_with_no_declared_packages_runs_on_the_hosts_node(tmp_path: Path, monkeypatch) -> None:
    root = tree(tmp_path, {"package.json": json.dumps({"name": "x", "type": "module"})})
    monkeypatch.setattr(ecosystems, "sandbox_program", lambda name: True)
    assert unmet_need(root, "node test.mjs") is None


def test_a_program_counts_only_from_the_sandboxes_usr(tmp_path: Path, monkeypatch) -> None:
    tool = tmp_path / "bin" / "go"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setattr(ecosystems, "SYSTEM_PATH", str(tool.parent))
    assert not ecosystems.sandbox_program("go")  # not under /usr: not mounted in the sandbox
    monkeypatch.setattr(ecosystems, "SYSTEM_PATH", "/usr/bin:/bin")
    assert ecosystems.sandbox_program("sh")


def test_a_hostile_command_or_makefile_is_read_not_run(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "Makefile": "test: test\n\t$(MAKE) test\n" + "x" * 200_000,
            "loop.sh": "sh loop.sh\n",
        },
    )
    assert unmet_need(root, "make test; sh loop.sh; echo 'unbalanced") is None
    assert unmet_need(root, "cat ../../etc/passwd; sh ../outside.sh") is None
