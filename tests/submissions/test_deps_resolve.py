"""Resolving declared dependencies to wheels for the sandbox's interpreter, host side."""

from __future__ import annotations

from pathlib import Path

import pytest

from submissions.deps.declared import Declared, declared_dependencies
from submissions.deps.resolve import (
    Resolved,
    ResolveFailed,
    parse_pylock,
    resolve,
    sandbox_platform,
)
from tests.paths import ROOT

INDEX = "https://pypi.org/simple"

# uv pip compile --format pylock.toml output, as uv 0.13.9 wrote it for this machine.
PYLOCK = """\
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11.2"

[[packages]]
name = "pydantic"
version = "1.10.27"
wheels = [
    { url = "https://files.pythonhosted.org/packages/3a/f2/ea39bab50b02f46467a9c9dbdcdd6ba59f9b73a000747323d08e588a6274/pydantic-1.10.27-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", upload-time = 2026-10-29T15:35:47Z, size = 2888724, hashes = { sha256 = "76b9dee80c3c3406fadd3a704166caee782e9dd6582d5a0cbc63df1003dfe102" } },
    { url = "https://files.pythonhosted.org/packages/3f/6b/47ebfcc96c4fab8bd0a37f448d94389bdd05fddc92d5485f9419ef9b19de/pydantic-1.10.27-py3-none-any.whl", upload-time = 2026-10-29T15:36:41Z, size = 167324, hashes = { sha256 = "d714c3df0db634a6720abdc204d7b3bfc6c62d4ef7b4f9dcd64b37c29187a058" } },
]

[[packages]]
name = "tenacity"
version = "9.2.1"
wheels = [{ url = "https://files.pythonhosted.org/packages/d6/26/1ff2b0721ac66a3ec5b1402b333110b352ab0a8724052ac279a7b82d40c4/tenacity-9.2.1-py3-none-any.whl", upload-time = 2026-10-07T12:13:00Z, size = 32310, hashes = { sha256 = "9e56f17539296baab7beabb08b92f6ee3d7be92d8be72d763360677c2ad6580e" } }]
"""


def test_the_lock_is_read_with_each_wheels_url_size_and_hash() -> None:
    pins = parse_pylock(PYLOCK)
    assert [(p.name, p.version, len(p.wheels)) for p in pins] == [
        ("pydantic", "1.10.27", 2),
        ("tenacity", "9.2.1", 1),
    ]
    wheel = pins[1].wheels[0]
    assert wheel.filename == "tenacity-9.2.1-py3-none-any.whl"
    assert wheel.size == 32310 and len(wheel.sha256) == 64
    assert pins[1].hashes == (f"sha256:{wheel.sha256}",)


def test_an_environment_is_cached_by_the_wheels_it_gets_and_the_interpreter() -> None:
    from pathlib import Path

    from submissions.deps.prepare import environment_key

    runtime, py = Path("/opt/rt"), (3, 11, 2)
    reworded = "# a header uv may write\n" + PYLOCK.replace('created-by = "uv"', 'created-by = "x"')
    key = environment_key(Resolved(parse_pylock(PYLOCK)), py, runtime)
    assert environment_key(Resolved(parse_pylock(reworded)), py, runtime) == key
    bumped = PYLOCK.replace('version = "9.2.1"', 'version = "9.2.0"').replace(
        "9e56f175", "0e56f175"
    )
    assert environment_key(Resolved(parse_pylock(bumped)), py, runtime) != key
    assert environment_key(Resolved(parse_pylock(PYLOCK)), (3, 12, 1), runtime) != key
    assert environment_key(Resolved(parse_pylock(PYLOCK)), py, Path("/opt/other")) != key


@pytest.mark.parametrize(
    "text",
    [
        "not toml [",
        '[[packages]]\nversion = "1"\n',
        '[[packages]]\nname = "x"\n',
    ],
)
def test_an_odd_lock_is_refused_not_trusted(text: str) -> None:
    with pytest.raises(ResolveFailed):
        parse_pylock(text)


def test_wheels_without_a_sha256_or_a_wheel_name_are_dropped() -> None:
    text = (
        '[[packages]]\nname = "x"\nversion = "1"\nwheels = [\n'
        '{ url = "https://h/x-1.tar.gz", hashes = { sha256 = "' + "a" * 64 + '" } },\n'
        '{ url = "https://h/x-1-py3-none-any.whl", hashes = { md5 = "abc" } },\n'
        '{ url = "https://h/x-1-py3-none-any.whl", hashes = { sha256 = "' + "b" * 64 + '" } },\n'
        "]\n"
    )
    (pin,) = parse_pylock(text)
    assert [w.sha256 for w in pin.wheels] == ["b" * 64]


def test_nothing_declared_resolves_to_nothing_without_running_uv(tmp_path: Path) -> None:
    resolved = resolve(Declared(), index_url="http://127.0.0.1:9/none", cache_dir=tmp_path)
    assert resolved.pins == []


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
    assert all(w.url.startswith("https://") for p in resolved.pins for w in p.wheels)
    again = resolve(declared, index_url=INDEX, cache_dir=tmp_path / "cache")
    assert again.pins == resolved.pins  # the same declaration resolves to the same set


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


@pytest.mark.index
def test_a_poetry_lock_with_windows_only_entries_resolves_for_this_sandbox(tmp_path: Path) -> None:
    """pywin32 (locked for Windows only) has no Linux wheel: asked for, it failed the hand-in."""
    declared = declared_dependencies(ROOT / "tests/fixtures/handins/lock-poetry-platform-markers")
    resolved = resolve(declared, index_url=INDEX, cache_dir=tmp_path)
    names = {p.name for p in resolved.pins}
    assert "portalocker" in names and "pytest" in names
    assert "pywin32" not in names and "colorama" not in names
