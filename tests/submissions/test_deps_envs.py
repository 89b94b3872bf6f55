"""The environment cache, the env.dependencies_installed check, and the stages before install."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cassettes_app.checks.catalog import DEPENDENCIES_INSTALLED
from submissions.checks.environment import env_dependencies_installed
from submissions.deps.declared import Declared, Refusal
from submissions.deps.envs import EnvCache, Environment, install_command, install_plan
from submissions.deps.fetch import Fetched
from submissions.deps.prepare import Prepared, _prepare, sandbox_python
from submissions.deps.resolve import Pin, WheelRef


def _build(cache: EnvCache, key: str, size: int) -> Environment:
    with cache.building(key) as build:
        (build / "site" / "pkg").mkdir(parents=True)
        (build / "site" / "pkg" / "blob").write_bytes(b"x" * size)
        return cache.publish(key, build, [f"pkg=={key}"])


def test_a_published_environment_is_found_by_its_key(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=2**30)
    built = _build(cache, "k1", 1000)
    assert not built.cached and built.site.is_dir()
    found = cache.lookup("k1")
    assert found is not None and found.cached and found.packages == ["pkg==k1"]
    assert found.size_bytes >= 1000 and cache.lookup("other") is None
    # Root-owned and read-only to others: the sandbox mounts it, never writes it.
    blob = found.site / "pkg" / "blob"
    assert blob.stat().st_uid == os.geteuid() and blob.stat().st_mode & 0o022 == 0


def test_a_build_that_fails_leaves_nothing_published(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=2**30)
    with pytest.raises(RuntimeError), cache.building("k1") as build:
        (build / "site").mkdir()
        raise RuntimeError("uv failed")
    assert cache.lookup("k1") is None and list((tmp_path / "builds").iterdir()) == []


def test_the_least_recently_used_unheld_environments_go_past_the_cap(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=250_000)
    for i, key in enumerate(("old", "held", "mid", "new")):
        _build(cache, key, 100_000)
        meta = tmp_path / "envs" / key / "meta.json"
        os.utime(meta, (time.time() - 1000 + i, time.time() - 1000 + i))
    with cache.held("held"):
        dropped = cache.evict(keep="new")
    assert dropped == ["old", "mid"]
    assert cache.lookup("held") is not None and cache.lookup("new") is not None
    assert cache.lookup("old") is None and not (tmp_path / "envs" / "old").exists()


def test_a_lookup_counts_as_a_use(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=150_000)
    _build(cache, "a", 100_000)
    time.sleep(0.01)
    _build(cache, "b", 100_000)
    os.utime(tmp_path / "envs" / "a" / "meta.json", (1, 1))
    cache.lookup("a")  # used just now: b is the older one
    assert cache.evict(keep="none") == ["b"]


def test_a_stale_build_folder_of_a_crash_is_swept(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=2**30)
    stale = tmp_path / "builds" / "crashed"
    stale.mkdir(parents=True)
    os.utime(stale, (1, 1))
    _build(cache, "k", 10)
    assert not stale.exists()


def test_the_install_plan_lists_only_this_sets_wheels_with_their_hashes(tmp_path: Path) -> None:
    wheel = tmp_path / "cache" / "x-1-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"wheel")
    ref = WheelRef("x-1-py3-none-any.whl", "https://h/x", 5, "a" * 64)
    plan = install_plan(tmp_path / "build", [Fetched(Pin("x", "1", (ref,)), ref, wheel, True, 5)])
    lines = (plan / "requirements.txt").read_text().splitlines()
    assert lines == [f"/opt/cr-wheels/x-1-py3-none-any.whl --hash=sha256:{'a' * 64}"]
    argv = install_command(Path("/opt/rt"))
    for flag in ("--offline", "--no-index", "--no-deps", "--require-hashes", "--no-config"):
        assert flag in argv
    assert argv[argv.index("--target") + 1] == "/opt/cr-build/site"
    assert argv[argv.index("--python") + 1] == "/opt/rt/bin/python"


def _env(cached: bool = False) -> Environment:
    return Environment(
        "k", Path("/x/site"), ["tenacity==9.2.1", "rich==15.0.0"], 2**20, cached, 0.1
    )


def test_the_check_passes_naming_what_was_installed_and_from_where() -> None:
    prepared = Prepared(
        "installed", Declared("requirements.txt", "requirements", ["tenacity", "rich"]), env=_env()
    )
    outcome = env_dependencies_installed(prepared)
    assert outcome.id == DEPENDENCIES_INSTALLED and outcome.status == "pass"
    assert "2 packages from requirements.txt, fetched and installed" in outcome.summary
    assert any(e.get("packages") == _env().packages for e in outcome.evidence)
    cached = env_dependencies_installed(
        Prepared("installed", Declared("uv.lock", "uv.lock", ["x==1"], True), env=_env(True))
    )
    assert "from the cache" in cached.summary


def test_nothing_declared_is_a_skip_that_says_the_runtime_is_used() -> None:
    outcome = env_dependencies_installed(Prepared())
    assert outcome.status == "skip" and "declares no dependencies" in outcome.summary


@pytest.mark.parametrize(
    ("state", "status"), [("failed", "fail"), ("error", "error")]
)  # fmt: skip
def test_a_failed_install_names_the_stage_and_cause(state: str, status: str) -> None:
    prepared = Prepared(state, Declared("requirements.txt", "requirements", ["numpy==1.21.0"]))
    prepared.stage, prepared.cause = "fetch", "numpy==1.21.0: no wheel for this sandbox's Python"
    outcome = env_dependencies_installed(prepared)
    assert outcome.status == status and outcome.summary.startswith("fetch: numpy==1.21.0")
    assert prepared.blocker == f"dependencies could not be installed (fetch: {prepared.cause})"


def test_a_secret_in_an_index_answer_is_not_shown() -> None:
    prepared = Prepared("error", Declared("requirements.txt", "requirements", ["x"]))
    prepared.stage = "resolve"
    key = "sk-ant-api03-Xk3Jd9sKq2LmPz8RtYvB4nW7cF1gH6eA0uIoQwErTyUi"
    prepared.cause = f"403 from https://alice:{key}@mirror.example/simple"
    outcome = env_dependencies_installed(prepared)
    shown = json.dumps(outcome.evidence) + outcome.summary
    assert key not in shown and key[8:24] not in shown and "mirror.example" in shown


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return tmp_path


def _prepared(tree: Path) -> Prepared:
    prepared = Prepared()
    _prepare(tree, slot=None, note=lambda _: None, prepared=prepared)  # type: ignore[arg-type]
    return prepared


def test_a_refused_line_fails_before_the_index_is_asked(tmp_path: Path, settings) -> None:
    settings.PACKAGE_INDEX_URL = "http://127.0.0.1:9/never-asked"
    tree = _tree(tmp_path, {"requirements.txt": "tenacity\ngit+https://evil.example/x.git\n"})
    prepared = _prepared(tree)
    assert prepared.state == "failed" and prepared.stage == "declare"
    assert "requirements.txt:2" in prepared.cause and prepared.resolved is None


def test_an_ignored_option_is_not_fatal(tmp_path: Path) -> None:
    declared = Declared(
        "requirements.txt",
        "requirements",
        [],
        refused=[Refusal("r.txt", 1, "option --pre ignored")],
    )
    prepared = Prepared(declared=declared)
    assert prepared.blocker is None


@pytest.mark.parametrize(("mode", "warned"), [("warn", True), ("skip", False)])
def test_requires_python_the_sandbox_lacks_warns_or_skips(
    tmp_path: Path, settings, mode: str, warned: bool
) -> None:
    settings.DEPS_PYTHON_MISMATCH = mode
    tree = _tree(
        tmp_path, {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.99"\n'}
    )
    prepared = _prepared(tree)
    said = f"requires Python >=3.99; the sandbox runs {'.'.join(map(str, sandbox_python(str(settings.SANDBOX_RUNTIME))))}"
    assert bool(prepared.warnings) == warned and (said in prepared.warnings[0] if warned else True)
    assert bool(prepared.python_refused) == (not warned)
    outcome = env_dependencies_installed(prepared)
    assert outcome.status == "skip" and said in (outcome.summary + json.dumps(outcome.evidence))


def test_uv_words_for_an_unreachable_index_are_infrastructure_not_a_package_name() -> None:
    from submissions.deps.resolve import infrastructure_answer

    assert infrastructure_answer(
        "error: Request failed after 3 retries\n  Caused by: tcp connect error"
    )
    assert infrastructure_answer("error: Failed to fetch: `https://pypi.org/simple/x/`")
    # A package the hand-in names may contain "connect" or "timeout": still its own fault.
    assert not infrastructure_answer(
        "error: Because pytest-timeout==99 was not found in the package registry and you "
        "require pytest-timeout==99, we can conclude that your requirements are unsatisfiable."
    )
    assert not infrastructure_answer("No solution found: connectorx==0.0.1 has no wheels")


def test_a_link_planted_in_the_build_folder_is_never_followed(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "cache", cap_bytes=2**30)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret").write_text("x")
    victim.chmod(0o700)
    (victim / "secret").chmod(0o600)
    with pytest.raises(Exception, match="no site folder"), cache.building("k") as build:
        (build / "rw").mkdir()
        os.symlink(victim, build / "rw" / "site")  # what a hostile uid would leave behind
        cache.publish("k", build, [])
    assert (victim / "secret").stat().st_mode & 0o777 == 0o600  # not made world-readable
    assert victim.stat().st_mode & 0o777 == 0o700 and cache.lookup("k") is None
    with cache.building("k2") as build:
        (build / "rw" / "site" / "pkg").mkdir(parents=True)
        os.symlink(victim / "secret", build / "rw" / "site" / "pkg" / "link")
        env = cache.publish("k2", build, ["pkg==1"])
    assert (env.site / "pkg" / "link").is_symlink()
    assert (victim / "secret").stat().st_mode & 0o777 == 0o600


def test_an_evicted_environment_never_looks_whole(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path, cap_bytes=1)
    _build(cache, "old", 10)
    os.utime(tmp_path / "envs" / "old" / "meta.json", (1, 1))
    _build(cache, "new", 10)
    assert cache.evict(keep="new") == ["old"]
    assert not (tmp_path / "envs" / "old").exists() and cache.lookup("old") is None
    assert not [p for p in (tmp_path / "builds").iterdir() if p.name.startswith(".trash-")]


def test_a_cache_root_someone_else_could_write_is_refused(tmp_path: Path) -> None:
    from submissions.deps.envs import InstallFailed

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)  # made first by another user
    with pytest.raises(InstallFailed, match="not a folder owned by this worker"):
        EnvCache(shared, cap_bytes=2**30).lookup("k")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(InstallFailed):
        EnvCache(link, cap_bytes=2**30).lookup("k")
