"""A hand-in's own dependencies, installed in the real sandbox and used by its runs (issue 13).

Most tests publish their packages on a loopback index (`tests/stubs/index.py`), so hostile
wheels can be served and nothing depends on PyPI; the ones marked `index` use the public
index, as a real hand-in would.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cassettes_app.checks import catalog as c
from submissions.checks.environment import env_dependencies_installed
from submissions.deps.prepare import Prepared, dependencies
from submissions.models import CheckResult, Job
from submissions.sandbox.slots import sandbox_slot
from submissions.sandbox.types import RunResult
from tests.conftest import assignment_values, ingest_inline
from tests.slow.test_shapes import assert_verdicts, copy_repo, judge
from tests.stubs.index import LocalIndex

pytestmark = [pytest.mark.sandbox]


@pytest.fixture
def deps(settings, tmp_path: Path) -> Iterator[Path]:
    """A private wheel and environment cache where the sandbox uids can traverse."""
    root = Path("/var/tmp/cassette-review-deps-tests") / uuid.uuid4().hex
    root.mkdir(parents=True, mode=0o711)
    root.parent.chmod(0o711)
    settings.DEPS_DIR = root
    settings.DEPS_CACHE_DIR = tmp_path / "deps-cache"
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def index(settings, deps: Path) -> Iterator[LocalIndex]:
    with LocalIndex() as served:
        settings.PACKAGE_INDEX_URL = served.url
        yield served


def _tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="cr-deps-tree-"))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _prepare_and_run(
    files: dict[str, str], command: list[str]
) -> tuple[Prepared, RunResult | None]:
    """Prepare the tree's dependencies in a real slot, then run `command` with them."""
    tree = _tree(files)
    try:
        with sandbox_slot() as slot, dependencies(tree, slot, lambda _: None) as prepared:
            if prepared.blocker:
                return prepared, None
            with slot.workspace(tree) as workspace:
                result = slot.with_site(prepared.site).run(command, workspace=workspace)
            return prepared, result
    finally:
        shutil.rmtree(tree)


SHOW = ["python3", "-c", "import alpha, beta; print(alpha.VERSION, beta.VERSION)"]

UV_LOCK = (
    'version = 1\nrequires-python = ">=3.11"\n\n'
    '[[package]]\nname = "handin"\nversion = "0.1.0"\nsource = { editable = "." }\n'
    'dependencies = [{ name = "alpha" }, { name = "winonly", marker = "sys_platform == \'win32\'" }]\n'
    '[package.dev-dependencies]\ndev = [{ name = "beta" }]\n\n'
    '[[package]]\nname = "alpha"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
    '[[package]]\nname = "beta"\nversion = "2.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
    # On no index at all: asked for, it would fail the install.
    '[[package]]\nname = "winonly"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n'
)


@pytest.mark.parametrize(
    "files",
    [
        {
            "requirements.txt": "alpha==1.0\n-r requirements-test.txt\n",
            "requirements-test.txt": "beta>=2\n",
        },
        {
            "pyproject.toml": '[project]\nname = "h"\ndependencies = ["alpha<2"]\n'
            '[project.optional-dependencies]\ntest = ["beta"]\n'
        },
        {"uv.lock": UV_LOCK},
        {
            "poetry.lock": '[[package]]\nname = "alpha"\nversion = "1.0"\n\n[[package]]\nname = "beta"\nversion = "2.0"\n'
        },
        {
            "pylock.toml": 'lock-version = "1.0"\n[[packages]]\nname = "alpha"\nversion = "1.0"\n[[packages]]\nname = "beta"\nversion = "2.0"\n'
        },
        {
            "Pipfile.lock": json.dumps(
                {
                    "default": {"alpha": {"version": "==1.0"}},
                    "develop": {"beta": {"version": "==2.0"}},
                }
            )
        },
    ],
    ids=["requirements", "pyproject", "uv.lock", "poetry.lock", "pylock.toml", "Pipfile.lock"],
)
def test_each_declaration_style_installs_its_pins_offline(
    index: LocalIndex, files: dict[str, str]
) -> None:
    for version in ("1.0", "2.0"):
        index.add("alpha", version)
        index.add("beta", version)
    prepared, result = _prepare_and_run(files, SHOW)
    assert prepared.state == "installed", prepared.cause
    assert result is not None and result.sandboxed and result.exit_code == 0, result.stderr
    assert result.stdout.decode().split() == ["1.0", "2.0"]
    outcome = env_dependencies_installed(prepared)
    assert outcome.status == "pass" and "alpha==1.0, beta==2.0" in json.dumps(outcome.evidence)


def test_a_lock_on_an_index_with_json_pages_is_looked_up_not_resolved(index: LocalIndex) -> None:
    index.json_api = True
    for version in ("1.0", "2.0"):
        index.add("alpha", version)
        index.add("beta", version)
    prepared, result = _prepare_and_run({"uv.lock": UV_LOCK}, SHOW)
    assert prepared.state == "installed", prepared.cause
    assert result.stdout.decode().split() == ["1.0", "2.0"]
    pages = [h for h in index.server.hits if h["path"].startswith("/simple/")]
    assert pages and all("vnd.pypi.simple.v1+json" in h["headers"].get("Accept", "") for h in pages)
    assert {h["path"] for h in pages} == {"/simple/alpha/", "/simple/beta/"}  # not winonly


def test_the_second_hand_in_with_the_same_set_uses_the_cached_environment(
    index: LocalIndex,
) -> None:
    index.add("alpha", "1.0")
    index.add("beta", "2.0")
    files = {"requirements.txt": "alpha==1.0\nbeta==2.0\n"}
    first, _ = _prepare_and_run(files, SHOW)
    downloads = len(index.downloads())
    second, result = _prepare_and_run(files, SHOW)
    assert not first.env.cached and second.env.cached and second.fetched == []
    assert len(index.downloads()) == downloads  # nothing fetched again
    assert result.stdout.decode().split() == ["1.0", "2.0"]
    assert "from the cache" in env_dependencies_installed(second).summary


def test_a_package_the_index_lacks_fails_with_the_index_answer(index: LocalIndex) -> None:
    prepared, _ = _prepare_and_run({"requirements.txt": "no-such-package-cr==1.0\n"}, SHOW)
    outcome = env_dependencies_installed(prepared)
    assert outcome.status == "fail" and outcome.summary.startswith("resolve:")
    assert "no-such-package-cr" in outcome.summary
    assert prepared.blocker.startswith("dependencies could not be installed (")


def test_a_zip_bomb_is_refused_before_the_install_with_its_size(
    settings, index: LocalIndex
) -> None:
    import zipfile

    settings.DEPS_MAX_UNPACKED_BYTES = 32 * 2**20
    index.add("bomb", "1.0", raw={"bomb/zeros.bin": (zipfile.ZIP_DEFLATED, bytes(200 * 2**20))})
    prepared, result = _prepare_and_run({"requirements.txt": "bomb\n"}, SHOW)
    assert result is None and prepared.state == "failed" and prepared.stage == "fetch"
    assert "unpack to over 32 MiB" in prepared.cause and "bomb-1.0" in prepared.cause
    assert not list((Path(settings.DEPS_DIR) / "envs").glob("*/site"))


PTH_NETWORK = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('{host}', {port}), timeout=2).sendall(b'escaped')\n"
    "    print('PTH-CONNECTED')\n"
    "except OSError as exc:\n"
    "    print('PTH-BLOCKED', type(exc).__name__)\n"
)


def test_a_pth_file_that_reaches_for_the_network_runs_only_in_the_sandbox(
    index: LocalIndex,
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    hook = PTH_NETWORK.format(host="127.0.0.1", port=port)
    index.add("phone-home", "1.0", files={
        "phone_home_hook.py": hook,
        "phone-home.pth": "import phone_home_hook\n",
        "phone_home/__init__.py": "",
    })  # fmt: skip
    try:
        prepared, result = _prepare_and_run(
            {"requirements.txt": "phone-home\n"}, ["python3", "-c", "print('suite ran')"]
        )
    finally:
        stop.set()
        thread.join(2)
        listener.close()
    assert prepared.state == "installed", prepared.cause
    out = result.stdout.decode()
    assert "PTH-BLOCKED" in out and "PTH-CONNECTED" not in out and "suite ran" in out
    assert accepted == []  # the host's loopback is not the sandbox's
    attempts = [e for e in result.audit_events if e.get("event") == "socket.connect"]
    assert attempts, result.audit_events  # seen by the audit hook, so replay would name it


def test_a_hand_ins_sitecustomize_does_not_replace_the_audit_hook(index: LocalIndex) -> None:
    index.add(
        "sneaky", "1.0", files={"sitecustomize.py": "print('THEIRS')\n", "sneaky/__init__.py": ""}
    )
    code = "import socket\ntry:\n    socket.create_connection(('10.9.9.9', 80), timeout=1)\nexcept OSError:\n    pass\n"
    prepared, result = _prepare_and_run({"requirements.txt": "sneaky\n"}, ["python3", "-c", code])
    assert prepared.state == "installed"
    assert "THEIRS" not in result.stdout.decode()
    assert any(e.get("event") == "socket.connect" for e in result.audit_events)


def test_a_package_cannot_replace_the_standard_library_or_the_interpreter(
    index: LocalIndex,
) -> None:
    index.add("evil", "1.0", files={
        "json/__init__.py": "print('HIJACKED-JSON')\n",
        "bin/python3": "#!/bin/sh\necho FAKE-PYTHON\n",
        "evil/__init__.py": "",
    }, executables=frozenset({"bin/python3"}))  # fmt: skip
    code = "import json, sys; print(json.dumps([1]), sys.executable)"
    prepared, result = _prepare_and_run({"requirements.txt": "evil\n"}, ["python3", "-c", code])
    assert prepared.state == "installed", prepared.cause
    assert (prepared.site / "bin" / "python3").exists()  # installed, and yet:
    out = result.stdout.decode()
    assert "[1]" in out and "HIJACKED" not in out and "FAKE-PYTHON" not in out, out


# ------------------------------------------------------------------ through the replay job

RUN_TWICE = {
    "slug": "deps-test",
    "title": "Dependencies (test)",
    "shape": "run-twice",
    "replay_command": "python3 run.py",
    "graded_outputs": ["out/answers.json"],
    "recordings": ["fixtures/*.json"],
}


@pytest.mark.django_db
def test_an_uninstallable_declaration_errors_every_replay_check(index: LocalIndex) -> None:
    files = {
        "run.py": "import alpha\nprint(alpha.VERSION)\n",
        "requirements.txt": "alpha==9.9\n",
        "fixtures/a.json": json.dumps({"text": "a"}),
    }
    index.add("alpha", "1.0")
    submission, checks = ingest_inline(files, assignment_values(RUN_TWICE), candidate="Deps")
    assert checks[c.DEPENDENCIES_INSTALLED].status == "fail"
    for cid in c.REPLAY_CHECKS:
        check: CheckResult = checks[cid]
        assert check.status == "error", (cid, check.summary)
        assert check.summary.startswith("dependencies could not be installed (resolve:")
    assert submission.jobs.get(kind=Job.Kind.REPLAY).state == "failed"


@pytest.mark.index
@pytest.mark.django_db
def test_the_good_cassette_hand_in_with_a_declared_dependency_passes(
    tmp_path: Path, deps: Path
) -> None:
    """The issue's repro: the good cassette solution plus `import tenacity` and a
    requirements.txt. Every check its brief asks for passes; nothing fails."""
    repo = copy_repo("cassette-good", tmp_path)
    init = repo / "triage" / "__init__.py"
    init.write_text("import tenacity  # noqa: F401\n" + init.read_text(encoding="utf-8"))
    (repo / "requirements.txt").write_text("tenacity==9.2.1\n")
    checks = judge(repo, "cassette")
    assert checks[c.DEPENDENCIES_INSTALLED].status == "pass", checks[
        c.DEPENDENCIES_INSTALLED
    ].summary
    assert "tenacity==9.2.1" in json.dumps(checks[c.DEPENDENCIES_INSTALLED].evidence)
    assert_verdicts(
        checks,
        "cassette",
        expect={c.DEPENDENCIES_INSTALLED: "pass", c.OFFLINE_PASS: "pass", c.BYTE_IDENTICAL: "pass",
                c.MISSING_FIXTURE: "pass", c.NO_NETWORK: "pass"},
    )  # fmt: skip


@pytest.mark.index
def test_the_candidates_pins_win_over_the_runtime(deps: Path) -> None:
    """The runtime has pydantic 2; a hand-in pinned to 1.x gets 1.x."""
    show = ["python3", "-c", "import pydantic; print(pydantic.VERSION)"]
    prepared, result = _prepare_and_run({"requirements.txt": "pydantic<2\n"}, show)
    assert prepared.state == "installed", prepared.cause
    assert result.stdout.decode().startswith("1.10"), result.stderr
    bare, plain = _prepare_and_run({}, show)
    assert bare.env is None and plain.stdout.decode().startswith("2.")


# ------------------------------------------------------------------ the service probe


@pytest.mark.django_db
def test_the_probed_service_imports_its_declared_dependency(index: LocalIndex) -> None:
    from tests.submissions.test_service_probe import VALUES, _ingest, _service

    index.add("alpha", "1.0")
    files = _service("good")
    files["app.py"] = "import alpha  # declared below, not in the runtime\n" + files["app.py"]
    files["requirements.txt"] = "alpha==1.0\n"
    job, checks = _ingest(files, assignment_values(VALUES))
    assert checks[c.DEPENDENCIES_INSTALLED].status == "pass"
    assert checks[c.SERVICE_STARTS].status == "pass", checks[c.SERVICE_STARTS].evidence
    assert job.state == Job.State.PASSED


@pytest.mark.django_db
def test_a_service_whose_dependencies_cannot_be_installed_is_not_probed(index: LocalIndex) -> None:
    from tests.submissions.test_service_probe import VALUES, _ingest, _service

    files = _service("good")
    files["requirements.txt"] = "not-on-this-index==1.0\n"
    job, checks = _ingest(files, assignment_values(VALUES))
    assert checks[c.DEPENDENCIES_INSTALLED].status == "fail"
    for cid in c.PROBE_CHECKS:
        assert checks[cid].status == "error", (cid, checks[cid].summary)
        assert checks[cid].summary.startswith("dependencies could not be installed (resolve:")
    assert job.state == Job.State.FAILED


# ------------------------------------------------------------------ the trace re-drive


@pytest.mark.django_db
def test_the_re_driven_stub_runs_with_its_declared_dependency(
    tmp_path: Path, index: LocalIndex
) -> None:
    from tests.submissions.test_trace_job import _values

    index.add("alpha", "1.0")
    repo = copy_repo("shop-trace-good", tmp_path)
    stub = repo / "shop_stub.py"
    source = stub.read_text()
    # After the docstring and `from __future__`: the stub imports a package only the hand-in has.
    head, future, rest = source.partition("from __future__ import annotations\n")
    assert future, "the demo stub starts with a __future__ import"
    stub.write_text(head + future + "import alpha  # noqa: F401\n" + rest)
    (repo / "requirements.txt").write_text("alpha==1.0\n")
    _, checks = ingest_inline(repo, _values(), candidate="Trace deps")
    assert checks[c.DEPENDENCIES_INSTALLED].status == "pass"
    assert checks[c.LIVE_MATCH].status == "pass", (
        checks[c.LIVE_MATCH].summary,
        checks[c.LIVE_MATCH].evidence[:3],
    )
    (repo / "requirements.txt").write_text("alpha==7.0\n")  # not on the index
    _, checks = ingest_inline(repo, _values(), candidate="Trace deps 2")
    assert checks[c.DEPENDENCIES_INSTALLED].status == "fail"
    live = checks[c.LIVE_MATCH]
    assert live.status == "error" and "dependencies could not be installed" in live.summary
