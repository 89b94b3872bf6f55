"""Resolving declared dependencies to wheels for the sandbox's interpreter, host side."""

from __future__ import annotations

from pathlib import Path

import pytest

from submissions.deps.declared import Declared
from submissions.deps.resolve import ResolveFailed, parse_compiled, resolve, sandbox_platform

INDEX = "https://pypi.org/simple"

COMPILED = """\
markdown-it-py==4.3.0 \\
    --hash=sha256:7aa1511a46c39138de78d9eba92ce47e63124d8003fc98b3a351909e04239efa \\
    --hash=sha256:91a58fa5b72c71a40cf7177250fd767480d7a2bb3ac426ccfb76fb90305fdaaa
tenacity==9.1.2 \\
    --hash=sha256:f77bf36710d8b73a50b2dd155c97b870017ad21afe6ab300326b0371b3b05138
"""


def test_the_compiled_set_is_read_with_its_hashes() -> None:
    pins = parse_compiled(COMPILED)
    assert [(p.name, p.version, len(p.hashes)) for p in pins] == [
        ("markdown-it-py", "4.3.0", 2),
        ("tenacity", "9.1.2", 1),
    ]
    assert all(h.startswith("sha256:") for p in pins for h in p.hashes)


def test_nothing_declared_resolves_to_nothing_without_running_uv(tmp_path: Path) -> None:
    resolved = resolve(Declared(), index_url="http://127.0.0.1:9/none", cache_dir=tmp_path)
    assert resolved.pins == [] and resolved.text == ""


def test_the_platform_is_the_sandboxes() -> None:
    assert sandbox_platform().startswith(("x86_64-manylinux_", "aarch64-manylinux_"))


@pytest.mark.index
def test_a_declared_set_resolves_to_hash_pinned_wheels(tmp_path: Path) -> None:
    declared = Declared(requirements=["tenacity==9.1.2", "rich>=13"])
    resolved = resolve(declared, index_url=INDEX, cache_dir=tmp_path / "cache")
    names = {p.name: p for p in resolved.pins}
    assert names["tenacity"].version == "9.1.2"
    assert "rich" in names and "markdown-it-py" in names  # transitive ones pinned too
    assert all(p.hashes for p in resolved.pins)
    assert len(resolved.key) == 64
    again = resolve(declared, index_url=INDEX, cache_dir=tmp_path / "cache")
    assert again.key == resolved.key  # the same declaration resolves to the same set


@pytest.mark.index
def test_an_unresolvable_set_fails_with_the_index_answer(tmp_path: Path) -> None:
    with pytest.raises(ResolveFailed, match="not found in the package registry"):
        resolve(
            Declared(requirements=["no-such-package-cr-test-0000==1.0"]),
            index_url=INDEX,
            cache_dir=tmp_path,
        )
    # numpy 1.21 has no wheel for Python 3.11, and no sdist is ever built on the host.
    with pytest.raises(ResolveFailed, match="no usable wheels"):
        resolve(Declared(requirements=["numpy==1.21.0"]), index_url=INDEX, cache_dir=tmp_path)


@pytest.mark.index  # uv retries a refused connection for several seconds
def test_an_unreachable_index_fails_with_the_cause(tmp_path: Path) -> None:
    with pytest.raises(ResolveFailed) as info:
        resolve(
            Declared(requirements=["tenacity==9.1.2"]),
            index_url="http://127.0.0.1:9/simple",
            cache_dir=tmp_path,
            timeout=60,
        )
    assert "127.0.0.1" in str(info.value) or "connect" in str(info.value).lower()
