"""The project's own wiring: compose file, layout, import direction, CI script."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT


def parse(path: Path) -> ast.Module:
    """ast.parse, once more on CPython 3.11's "AST constructor recursion depth mismatch"
    (gh-106905): its recursion counter is shared by threads, so a module compiled at the
    same moment in another thread (a test's server thread importing lazily) can trip it."""
    text = path.read_text(encoding="utf-8")
    try:
        return ast.parse(text, filename=str(path))
    except SystemError:
        return ast.parse(text, filename=str(path))


def test_compose_describes_the_four_services_with_health_checks() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {
        "web", "worker", "beat", "redis", "postgres", "demo", "minio", "minio-bucket"
    }  # fmt: skip
    for name, service in services.items():
        one_shot = service.get("restart") == "no"  # a job that exits (the bucket's creation)
        assert one_shot or "healthcheck" in service, name
    assert "gunicorn" in " ".join(services["web"]["command"])
    assert services["worker"]["command"][:4] == ["celery", "-A", "reviewer", "worker"]
    # One scheduler for the deployment: no worker runs beat, one service does.
    assert "-B" not in services["worker"]["command"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "reviewer", "beat"]
    assert services["web"]["volumes"] == services["worker"]["volumes"]  # shared data volume


def test_the_s3_profile_adds_an_object_store_and_the_apps_read_its_settings() -> None:
    """`docker compose up` alone keeps the shared volume; `--profile s3` adds MinIO and its
    bucket, and every app service passes the S3_* settings through."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["minio"]["profiles"] == services["minio-bucket"]["profiles"] == ["s3"]
    bucket_after = services["minio-bucket"]["depends_on"]["minio"]["condition"]
    assert bucket_after == "service_healthy"
    names = ("STORAGE_BACKEND", "S3_BUCKET", "S3_ENDPOINT_URL", "S3_REGION", "S3_ACCESS_KEY_ID",
             "S3_SECRET_ACCESS_KEY", "S3_ADDRESSING_STYLE")  # fmt: skip
    for name in ("web", "worker", "beat"):
        assert set(names) <= set(services[name]["environment"]), name
    env = dict(
        line.split("=", 1)
        for line in (ROOT / "deploy" / "minio.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env["STORAGE_BACKEND"] == "s3" and env["S3_ENDPOINT_URL"] == "http://minio:9000"
    assert env["S3_ADDRESSING_STYLE"] == "path"  # MinIO serves buckets by path


def test_no_service_is_privileged_and_the_worker_gets_only_what_bubblewrap_needs() -> None:
    """Candidate code runs in the worker: a privileged container would make any sandbox
    escape root on the host."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        assert not service.get("privileged"), name
        assert "SYS_ADMIN" not in service.get("cap_add", []), name
        assert not service.get("devices"), name
    worker = compose["services"]["worker"]
    assert worker["cap_drop"] == ["ALL"]
    assert set(worker["cap_add"]) <= {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID",
                                      "SETPCAP", "KILL"}  # fmt: skip
    options = worker["security_opt"]
    profile_ref = next(o for o in options if o.startswith("seccomp="))
    assert "seccomp=unconfined" not in options and "systempaths=unconfined" in options
    profile = json.loads((ROOT / profile_ref.split("=", 1)[1]).read_text())
    blocked = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO"
               for n in rule["names"]}  # fmt: skip
    assert {"kexec_load", "init_module", "bpf", "ptrace", "keyctl", "io_uring_setup"} <= blocked
    # bubblewrap's own calls stay allowed: it builds the sandbox from them.
    assert not blocked & {"clone", "clone3", "unshare", "mount", "pivot_root", "setns", "umount2"}


def test_the_public_demo_is_one_container_in_512_mb_on_the_embedded_default() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    demo = compose["services"]["demo"]
    assert demo["profiles"] == ["demo"]  # `docker compose up` alone starts the full stack
    assert demo["mem_limit"] == "512m"
    assert "DATABASE_URL" not in demo["environment"] and "REDIS_URL" not in demo["environment"]
    assert "depends_on" not in demo
    script = ROOT / demo["command"][0]
    assert script.is_file() and script.stat().st_mode & 0o111
    text = script.read_text()
    assert "DEMO_MODE=1" in text and "seed_demo" in text and "unset DATABASE_URL REDIS_URL" in text
    assert demo["security_opt"] == compose["services"]["worker"]["security_opt"]


def test_the_image_builds_the_sandbox_with_the_hosts_script() -> None:
    build = (ROOT / "Dockerfile").read_text()
    steps = [line for line in build.splitlines() if line.startswith("RUN ")]
    assert any("scripts/sandbox-setup.sh" in step for step in steps)
    assert build.index("COPY . .") < build.index("scripts/sandbox-setup.sh")
    assert (ROOT / "scripts" / "sandbox-setup.sh").stat().st_mode & 0o111
    makefile = (ROOT / "Makefile").read_text()
    assert "scripts/sandbox-setup.sh" in makefile  # the same script `make sandbox-runtime` runs


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


APPS = ("reviewer", "submissions", "cassettes_app")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every import between the apps' modules, wherever it stands: module level, inside a
    function, or under TYPE_CHECKING (each would close a cycle at run time or for a reader)."""
    modules = {
        _module_name(path): path
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
                # `from pkg import module` imports the module, not just the package.
                targets += [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def _app_imports(app: str, graph: dict[str, set[str]]) -> set[str]:
    return {
        t.split(".")[0]
        for name, targets in graph.items()
        if name.split(".")[0] == app
        for t in targets
    }


def test_imports_run_one_way() -> None:
    graph = import_graph()
    assert "reviewer" not in _app_imports("submissions", graph)
    assert not {"reviewer", "submissions"} & _app_imports("cassettes_app", graph)


def test_no_import_cycle_between_modules() -> None:
    assert import_cycles(import_graph()) == []


# The ground floor of cassettes_app: the parsed vocabulary and the small shared rules
# every part of every app may import. It imports nothing of the app above it.
GROUND_FLOOR = frozenset(
    {
        "cassettes_app.parsed",
        "cassettes_app.headers",
        "cassettes_app.text",
        "cassettes_app.safefiles",
        "cassettes_app.jsonvalues",
        "cassettes_app.limits",
        "cassettes_app.safeload",
    }
)


def test_the_cassettes_app_ground_floor_imports_nothing_above_it() -> None:
    graph = import_graph()
    below = GROUND_FLOOR | {"cassettes_app", "cassettes_app.providers.common"}
    upward = {m: sorted(graph[m] - below) for m in GROUND_FLOOR if graph[m] - below}
    assert upward == {}
    # Bodies are decoded for the parsers, so they sit below formats/.
    assert [t for t in graph["cassettes_app.bodies"] if t.startswith("cassettes_app.formats")] == []


# The import plan inside each app, top tier first: a module imports its own tier and the
# tiers below it, never one above (a function-level import counts too). Every module is
# placed by the longest prefix that names it, so a new module must be placed here.
TIERS: dict[str, list[tuple[str, ...]]] = {
    "reviewer": [
        # entry points: URLs and views, commands, tags, admin, app wiring
        ("reviewer.urls", "reviewer.views", "reviewer.management", "reviewer.templatetags",
         "reviewer.admin", "reviewer.apps", "reviewer.wsgi", "reviewer.asgi",
         "reviewer.context", "reviewer.middleware", "reviewer.tasks"),
        ("reviewer.ops",),  # the demo cohort, queue health
        ("reviewer.cohort",),  # the hiring lead's view
        ("reviewer.review",),  # one reviewer's desk
        ("reviewer.models", "reviewer.fragments", "reviewer.auth", "reviewer.settings",
         "reviewer.env", "reviewer.celery", "reviewer.broker"),
    ],
    "submissions": [
        ("submissions.apps", "submissions.admin", "submissions.tasks",
         "submissions.management", "submissions.forms"),
        # the job runner: kind -> handler, claim and execute, run inline, run again
        ("submissions.jobs.engine", "submissions.jobs.registry", "submissions.jobs.inline",
         "submissions.jobs.rerun"),
        ("submissions.runs",),  # one thin handler per job kind
        ("submissions.checks", "submissions.intake", "submissions.recordings", "submissions.runfiles",
         "submissions.assignments", "submissions.conversations", "submissions.selectors"),
        ("submissions.sandbox", "submissions.deps", "submissions.net"),
        ("submissions.jobs",),  # what a handler sees, job states, the queue
        ("submissions.models", "submissions.blobs", "submissions.redact", "submissions.roles",
         "submissions.sealed", "submissions.pgtext"),
    ],
    "cassettes_app": [
        ("cassettes_app.pairing", "cassettes_app.diff", "cassettes_app.apps",
         "cassettes_app.management"),
        ("cassettes_app.analysis",),
        ("cassettes_app.checks", "cassettes_app.keys", "cassettes_app.hops",
         "cassettes_app.response_ids", "cassettes_app.fingerprints"),
        ("cassettes_app.formats",),
        ("cassettes_app.bodies", "cassettes_app.threads", "cassettes_app.secrets"),
        ("cassettes_app.providers",),
        ("cassettes_app.providers.common", "cassettes_app.config", *sorted(GROUND_FLOOR)),
    ],
}  # fmt: skip


def tier_of(module: str) -> tuple[str, int] | None:
    """(app, tier index) of a module by its longest matching prefix, or None."""
    app = module.split(".")[0]
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(TIERS.get(app, [])):
        for prefix in prefixes:
            named = module == prefix or module.startswith(prefix + ".")
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return (app, best[1]) if best else None


def test_every_module_has_a_place_in_the_import_plan() -> None:
    unplaced = [m for m in import_graph() if m not in APPS and tier_of(m) is None]
    assert unplaced == []


def test_no_module_imports_one_above_it_in_its_app() -> None:
    upward = []
    for module, targets in import_graph().items():
        here = tier_of(module)
        for target in targets:
            there = tier_of(target)
            if here and there and here[0] == there[0] and there[1] < here[1]:
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == []


MAX_FUNCTION_LINES = 100


def test_no_function_in_the_apps_is_over_100_lines() -> None:
    long = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(parse(path)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    size = node.end_lineno - node.lineno + 1
                    where = f"{_module_name(path)}.{node.name}"
                    if size > MAX_FUNCTION_LINES:
                        long.append(f"{where}: {size} lines")
    assert long == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme_top = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "make test" in ci and "make test" in readme_top
    assert shutil.which("bash")


def test_make_runs_pytest_with_the_test_settings() -> None:
    """The Makefile exports reviewer.settings for manage.py; pytest must still get the tests'
    settings, whose SQLite test database is a file the worker tests' processes can open."""
    makefile = (ROOT / "Makefile").read_text()
    recipes = [line for line in makefile.splitlines() if line.startswith("\t")]
    assert [line for line in recipes if "-m pytest" in line] == []  # all go through $(PYTEST)
    assert sum("$(PYTEST)" in line for line in recipes) == 3  # test, test-fast, test-sandbox
    assert "PYTEST := DJANGO_SETTINGS_MODULE=tests.settings " in makefile


@pytest.mark.django_db
def test_the_worker_says_at_start_which_sandbox_layer_is_missing(monkeypatch, caplog) -> None:
    from reviewer import celery as worker

    seen = {}

    def problems(*, probe: bool = False) -> list[str]:
        seen["probe"] = probe
        return ["bwrap cannot start as uid 64000: No permissions to create a new namespace"]

    monkeypatch.setattr("submissions.sandbox.slots.sandbox_problems", problems)
    with caplog.at_level("ERROR"):
        worker._reconcile_at_start()
    assert seen["probe"] is True  # a real sandbox is started, not only files looked at
    assert "sandbox unavailable: bwrap cannot start as uid 64000" in caplog.text


def test_lead_only_pages_have_one_door() -> None:
    """Every lead-only view goes through `reviewer/views/access.py`: a sixth copy of the
    check would be one more place to forget it."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "reviewer" / "views").glob("*.py")
        if path.name != "access.py" and "is_hiring_lead(" in path.read_text()
    ]
    assert offenders == []


def test_views_import_no_other_view() -> None:
    """A view module imports its doors (`access`) and the domain, never another screen."""
    graph = import_graph()
    offenders = [
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("reviewer.views.")
        for target in targets
        if target.startswith("reviewer.views.") and target != "reviewer.views.access"
    ]
    assert offenders == []


def test_no_test_reads_outside_the_repository() -> None:
    """A clone of this repository alone must pass `make test`: no test reaches for the
    design folder beside it (or anything else above the root)."""
    # Either separator, and ROOT's parent by any spelling: the patterns are built here so this
    # guard does not itself name the folder it forbids.
    outside = re.compile(r"ROOT\.parent\b|\.\.[/\\]" + "sha" + r"red\b")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if outside.search(path.read_text())
    ]
    assert offenders == []


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    """mypy runs in `make lint` and CI; an ignore is a claim the checker is wrong, so it says
    which error (`[code]`) and why, on its own line."""
    bare = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if "type: ignore" in line and not re.search(
                    r"# type: ignore\[[\w,-]+\]\s+#\s*\S", line
                ):
                    bare.append(f"{path.relative_to(ROOT)}:{number}")
    assert bare == []


def test_lint_and_ci_run_mypy_over_the_three_apps() -> None:
    makefile = (ROOT / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy reviewer submissions cassettes_app" in lint
    assert ".venv/bin/mypy reviewer submissions cassettes_app" in (ROOT / ".ci" / "run").read_text()


def test_reviewer_keeps_plumbing_at_its_top_and_two_packages() -> None:
    """reviewer/ holds the project's plumbing directly, the desk in review/ and the lead's
    view in cohort/ (ops/ for the demo and health): at most 16 modules at its top."""
    top = sorted(p.name for p in (ROOT / "reviewer").glob("*.py"))
    assert len(top) <= 16, top
    for package in ("review", "cohort", "ops", "views"):
        assert (ROOT / "reviewer" / package / "__init__.py").is_file()
