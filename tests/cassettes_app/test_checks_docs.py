"""docs.entrypoints and docs.replay_notes on built trees and the demo cohort."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from cassettes_app.checks.docs.entries import runbook_entries
from cassettes_app.checks.docs.entrypoints import docs_entrypoints, docs_entrypoints_after_replay
from cassettes_app.checks.docs.makefile import make_targets, read_makefile
from cassettes_app.checks.docs.note_fields import replay_note_fields
from cassettes_app.checks.docs.replay_notes import docs_replay_notes
from tests.paths import DEMO_REPOS, ROOT

DEMO = DEMO_REPOS
VOLATILE = ["user", "request_id", "id", "created"]


def tree(root: Path, files: dict[str, str | bytes], executable: tuple[str, ...] = ()) -> Path:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    for name in executable:
        (root / name).chmod(0o755)
    return root


def messages(outcome: Any) -> str:
    return "\n".join(item["message"] for item in outcome.evidence)


CASSETTE_MAKEFILE = """\
PYTHON ?= python
MODE := replay
export FOO::=bar
.PHONY: test demo record

test:
\tCASSETTE_MODE=replay $(PYTHON) -m pytest
demo record: deps
\t$(PYTHON) -m triage
"""


# --------------------------------------------------------------------------- Makefile parsing


def test_make_targets_parses_rules_phony_and_skips_assignments() -> None:
    text = (
        "VAR := 1\nOTHER ::= 2\nX = a:b\nY ?= c\n"
        "build test: deps ; echo\n\tnot-a-rule: x\n"
        "a::\n\techo\n%.o: %.c\n$(OUT): x\n.PHONY: lint \\\n  fmt\n"
        "define BLOCK\nhidden: x\nendef\n"
        "check: CFLAGS := -O2   # target-specific variable\n"
        "# comment: no\n"
    )
    rules, phony = make_targets(text)
    assert set(rules) == {"build", "test", "a", "check"}
    assert rules["build"] == 5 and rules["test"] == 5
    assert set(phony) == {"lint", "fmt"}


# --------------------------------------------------------------------------- entrypoints


def test_cassette_entrypoints_pass(tmp_path: Path) -> None:
    root = tree(tmp_path, {"Makefile": CASSETTE_MAKEFILE})
    outcome = docs_entrypoints(root, "cassette", "make test && make demo")
    assert outcome.status == "pass", outcome.evidence
    assert outcome.summary == "found: make record, make test, make demo"
    assert {
        "message": "make demo: found — rule `demo:`",
        "path": "Makefile",
        "line": 8,
        "entry": "make demo",
        "state": "found",
        "command": "make demo",
    } in outcome.evidence


def test_missing_make_demo_fails_naming_it(tmp_path: Path) -> None:
    root = tree(tmp_path, {"Makefile": "test:\n\tpytest\nrecord:\n\tpython -m x\n"})
    outcome = docs_entrypoints(root, "cassette", "make test && make demo")
    assert outcome.status == "fail"
    assert outcome.summary == "missing: make demo"
    assert "looked for a `demo:` rule or .PHONY entry; targets found: record, test" in messages(
        outcome
    )


def test_phony_only_target_warns(tmp_path: Path) -> None:
    root = tree(tmp_path, {"Makefile": ".PHONY: demo\ntest:\n\tx\nrecord:\n\tx\n"})
    outcome = docs_entrypoints(root, "cassette")
    assert outcome.status == "warn"
    assert "declared in .PHONY but no `demo:` rule" in messages(outcome)


def test_no_makefile_fails_for_each_target(tmp_path: Path) -> None:
    outcome = docs_entrypoints(tmp_path, "cassette")
    assert outcome.status == "fail"
    assert outcome.summary == "missing: make record, make test, make demo"


def test_run_twice_entrypoints(tmp_path: Path) -> None:
    run_sh = (
        '#!/bin/sh\ncase "$1" in\n  replay|record) exec python -m app "$1" --max-calls 20 ;;\n'
        "esac\n"
    )
    root = tree(tmp_path, {"run.sh": run_sh, "Makefile": "test:\n\tpytest\n"}, ("run.sh",))
    outcome = docs_entrypoints(root, "run-twice", "./run.sh replay")
    assert outcome.status == "pass", outcome.evidence
    assert "./run.sh replay, ./run.sh record, record capped, test target" in outcome.summary


def test_run_twice_mode_only_in_comment_and_not_executable_fails(tmp_path: Path) -> None:
    run_sh = "#!/bin/sh\n# ./run.sh replay|record\npython3 main.py\n"
    root = tree(tmp_path, {"run.sh": run_sh, "main.py": "print('replay')\n"})
    outcome = docs_entrypoints(root, "run-twice")
    assert outcome.status == "fail"
    assert outcome.summary == "missing: ./run.sh, ./run.sh replay, ./run.sh record"
    assert "not executable and nothing runs it with sh/bash" in messages(outcome)


def test_run_twice_needs_no_test_suite_the_brief_only_welcomes_one(tmp_path: Path) -> None:
    run_sh = '#!/bin/sh\ncase "$1" in\n  replay) python3 main.py ;;\n  record) python3 main.py --record ;;\nesac\n'
    root = tree(tmp_path, {"run.sh": run_sh, "main.py": "MAX_CALLS = 20\nprint('ok')\n"})
    (root / "run.sh").chmod(0o755)
    outcome = docs_entrypoints(root, "run-twice")
    assert outcome.status == "pass", outcome.evidence
    assert "test target: not required" in messages(outcome)
    assert outcome.summary == (
        "found: ./run.sh, ./run.sh replay, ./run.sh record, record capped"
        " (test target: none, not required)"
    )


def test_run_sh_forwarding_its_argument_and_invoked_with_bash(tmp_path: Path) -> None:
    run_sh = 'python3 answer.py "${1:-replay}"\n'
    files = {
        "run.sh": run_sh,
        "answer.py": 'import sys\nMAX_CALLS = 5\nif sys.argv[1] == "record":\n    pass\n',
        "Makefile": "replay:\n\tbash run.sh replay\n",
        "pytest.ini": "[pytest]\n",
        "tests/test_x.py": "",
    }
    outcome = docs_entrypoints(tree(tmp_path, files), "run-twice")
    assert outcome.status == "pass", outcome.evidence
    text = messages(outcome)
    assert "passes its argument to answer.py, which handles 'record'" in text
    assert "invoked with sh" in text
    assert "pytest (pytest.ini and a tests folder)" in text


def test_trace_entrypoints(tmp_path: Path) -> None:
    root = tree(tmp_path, {"stub/shop_stub.py": "", "Makefile": "test:\n\tpytest\n"})
    outcome = docs_entrypoints(root, "trace", "make test")
    assert outcome.status == "pass", outcome.evidence
    assert "stub start script: found — stub/shop_stub.py" in messages(outcome)
    (root / "stub/shop_stub.py").unlink()
    outcome = docs_entrypoints(root, "trace", "make test")
    assert outcome.status == "fail" and outcome.summary == "missing: stub start script"


RUNBOOK = """\
# Runbook

## Start the service

    PORT=8000 python server.py

## Tests
Run `make test` (offline).

Replay the recorded answers with `python replay.py`.
"""


def test_ticket_service_entrypoints(tmp_path: Path) -> None:
    root = tree(tmp_path, {"RUNBOOK.md": RUNBOOK, "server.py": "", "replay.py": ""})
    outcome = docs_entrypoints(root, "ticket-service")
    assert outcome.status == "pass", outcome.evidence
    text = messages(outcome)
    assert "runbook start: found — `PORT=8000 python server.py`" in text
    assert "runbook test: found — `make test`" in text
    assert "runbook replay: found — `python replay.py`" in text
    assert "service entry: found — server.py (from the start command)" in text


def test_ticket_service_without_replay_or_entry_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path, {"README.md": "# Svc\n\n## Start\n\n    python gone.py\n\n## Test\n`pytest -q`\n"}
    )
    outcome = docs_entrypoints(root, "ticket-service")
    assert outcome.status == "fail"
    # A runbook that words no replay step is an unsure reading; the missing entry is sure.
    assert outcome.summary == "missing: service entry"
    assert "runbook replay: not proven — looked for a `replay` heading" in messages(outcome)


def test_replay_command_entries_are_checked(tmp_path: Path) -> None:
    root = tree(tmp_path, {"Makefile": "test:\n\tx\n", "tool.py": ""})
    outcome = docs_entrypoints(root, "", "make test && ./go.sh && python tool.py --x")
    assert outcome.status == "fail"
    assert outcome.summary == "missing: ./go.sh"
    assert docs_entrypoints(root, "", "").status == "skip"


def test_demo_run_twice_flawed_record_has_no_cap() -> None:
    outcome = docs_entrypoints(DEMO / "run-twice-flawed", "run-twice", "./run.sh replay")
    assert outcome.status == "warn"
    assert "record capped (no max-calls bound found" in outcome.summary


@pytest.mark.parametrize(
    ("repo", "shape", "command"),
    [
        ("cassette-good", "cassette", "make test && make demo"),
        ("run-twice-good", "run-twice", "./run.sh replay"),
        ("shop-trace-good", "trace", "make test"),
        ("ticket-service-good", "ticket-service", "make test && make replay"),
        # The flawed repos' entrypoints are fine too (their flaws are elsewhere), but for
        # run-twice-flawed's record, which has no bound on its model calls (a warning).
        ("cassette-flawed", "cassette", "make test && make demo"),
        ("shop-trace-flawed", "trace", "make test"),
        ("ticket-service-flawed", "ticket-service", "make test && make replay"),
    ],
)
def test_demo_entrypoints_pass(repo: str, shape: str, command: str) -> None:
    outcome = docs_entrypoints(DEMO / repo, shape, command)
    assert outcome.status == "pass", outcome.evidence


def test_demo_tree_without_make_demo_fails(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(DEMO / "cassette-good", root)
    makefile = root / "Makefile"
    makefile.write_text(makefile.read_text().replace("demo:", "show:").replace(" demo", ""))
    outcome = docs_entrypoints(root, "cassette", "make test && make demo")
    assert outcome.status == "fail"
    assert outcome.summary == "missing: make demo"


def test_huge_and_binary_makefiles_do_not_raise(tmp_path: Path) -> None:
    big = "x" * 5_000_000 + "\n"  # 5 MB without a newline for most of it
    root = tree(tmp_path, {"Makefile": "test:\n\tpytest\n" + big + "demo:\n"})
    outcome = docs_entrypoints(root, "cassette")
    assert outcome.status == "fail"  # demo: sits past the 1 MB read
    assert "first 1 MB read" in messages(outcome)
    (tmp_path / "Makefile").write_bytes(b"te\x00st:\n\xff\xfe\x00demo:\n\trm\n" + os.urandom(4096))
    outcome = docs_entrypoints(tmp_path, "cassette")
    assert outcome.status in ("fail", "pass")
    json.dumps(outcome.as_dict())


def test_symlinked_makefile_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("test:\ndemo:\nrecord:\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "Makefile").symlink_to(outside)
    assert docs_entrypoints(root, "cassette").status == "fail"


def test_missing_tree_is_an_error(tmp_path: Path) -> None:
    assert docs_entrypoints(tmp_path / "nope", "cassette").status == "error"


# --------------------------------------------------------------------------- replay notes


def test_replay_notes_pass_for_demo_cassette_good() -> None:
    outcome = docs_replay_notes(DEMO / "cassette-good", volatile_fields=VOLATILE, shape="cassette")
    assert outcome.status == "pass", outcome.evidence
    assert outcome.summary == "REPLAY.md names `user`, `request_id`, `id`, `created` as dropped"
    assert [e["line"] for e in outcome.evidence] == [10, 11, 12, 13]


def test_replay_notes_fail_when_keys_keep_a_dropped_field(tmp_path: Path) -> None:
    note = "# Replay\n\nNormalised fields (dropped before hashing): `user`, `request_id`, `id`, `created`.\n"
    root = tree(tmp_path, {"REPLAY.md": note})
    outcome = docs_replay_notes(root, volatile_fields=VOLATILE, key_findings={"kept": ["created"]})
    assert outcome.status == "fail"
    assert {
        "message": "REPLAY.md says `created` is dropped but the keys keep it",
        "path": "REPLAY.md",
        "line": 3,
    } in outcome.evidence
    assert docs_replay_notes(root, volatile_fields=VOLATILE).status == "pass"


def test_replay_notes_read_per_cassette_key_entries() -> None:
    entries = [
        {"path": "cassettes/a.json", "matched": True, "volatile_present": ["user", "created"]},
        {
            "path": "cassettes/ae90.json",
            "matched": False,
            "kept_fields": ["created"],
            "also_dropped": [],
        },
    ]
    outcome = docs_replay_notes(
        DEMO / "cassette-flawed", volatile_fields=VOLATILE, key_findings=entries
    )
    assert outcome.status == "fail"
    assert "says `created` is dropped but the keys keep it (cassettes/ae90.json)" in outcome.summary


def test_replay_notes_warn_on_fields_the_note_leaves_out(tmp_path: Path) -> None:
    root = tree(tmp_path, {"REPLAY.md": "We drop `user` before hashing.\n"})
    outcome = docs_replay_notes(
        root, volatile_fields=VOLATILE, key_findings={"also_dropped": ["seed"]}
    )
    assert outcome.status == "warn"
    text = messages(outcome)
    assert "the keys also drop `seed`, which REPLAY.md does not name" in text
    assert "does not name `created`, which the assignment lists as volatile" in text


def test_replay_notes_missing_for_cassette_fails(tmp_path: Path) -> None:
    outcome = docs_replay_notes(tmp_path, volatile_fields=VOLATILE, shape="cassette")
    assert outcome.status == "fail"
    assert "no REPLAY.md" in outcome.summary
    tree(tmp_path, {"REPLAY.md": "# Replay\n\nKeys are sha256 of the request.\n"})
    outcome = docs_replay_notes(tmp_path, volatile_fields=VOLATILE, shape="cassette")
    assert outcome.status == "fail" and "names no normalised request fields" in outcome.summary


def test_replay_notes_skip_without_cassettes(tmp_path: Path) -> None:
    assert docs_replay_notes(tmp_path, volatile_fields=[], shape="run-twice").status == "skip"
    assert (
        docs_replay_notes(tmp_path, volatile_fields=VOLATILE, shape="ticket-service").status
        == "skip"
    )
    # A runbook that documents the key is read for the other shapes.
    outcome = docs_replay_notes(
        DEMO / "ticket-service-good", volatile_fields=VOLATILE, shape="ticket-service"
    )
    assert outcome.status == "pass" and outcome.summary.startswith("RUNBOOK.md names")


@pytest.mark.parametrize(
    ("text", "dropped", "kept"),
    [
        (
            "The fields `user` and `id` are dropped. `created` is not dropped.",
            ["user", "id"],
            ["created"],
        ),
        ("We drop `user`; `created` is kept.", ["user"], ["created"]),
        (
            "## Volatile fields\n\n- user\n- `seed` — random per call\n\n## Other\n\n- `model`\n",
            ["user", "seed"],
            [],
        ),
        (
            "| field | handling |\n|---|---|\n| `user` | dropped |\n| `created` | kept |\n",
            ["user"],
            ["created"],
        ),
        (
            "`request` is the payload as sent (volatile fields included; they are only ignored for the key).",
            [],
            [],
        ),
        (
            "Drop these:\n1. `user`\n2. `request_id` (see `X-Request-Id`)\n\nThen hash.",
            ["user", "request_id"],
            [],
        ),
        ("```\ndropped: `user`\n```\n", [], []),
        # A reason or a contrast after the names says nothing of them.
        (
            "We ignore `user` and `created` when hashing, because they differ between runs "
            "and do not change the answer.",
            ["user", "created"],
            [],
        ),
        (
            "Volatile fields (`user`, `id`) are excluded, since they don't matter.",
            ["user", "id"],
            [],
        ),
        ("Before hashing we drop `user` and keep everything else as sent.", ["user"], []),
        ("We drop `user`, while nested ids like `id` are kept.", ["user"], ["id"]),
        # Negated names stay kept.
        ("We never drop `created`, because the replay compares it.", [], ["created"]),
        ("`user` is not ignored since the stub checks it.", [], ["user"]),
    ],
)
def test_replay_note_fields(text: str, dropped: list[str], kept: list[str]) -> None:
    notes = replay_note_fields(text)
    assert list(notes.dropped) == dropped
    assert list(notes.kept) == kept


def test_replay_notes_hostile_file(tmp_path: Path) -> None:
    tree(tmp_path, {"REPLAY.md": b"\xff\xfe`user` dropped\x00 " + b"`" * 1_100_000})
    outcome = docs_replay_notes(tmp_path, volatile_fields=VOLATILE)
    assert outcome.status in ("pass", "warn", "fail")
    json.dumps(outcome.as_dict())


def _run_twice_tree(tmp_path: Path, main_py: str) -> Path:
    run_sh = '#!/bin/sh\ncase "$1" in\n  replay|record) exec python3 main.py "$1" ;;\nesac\n'
    root = tree(tmp_path, {"run.sh": run_sh, "main.py": main_py})
    (root / "run.sh").chmod(0o755)
    return root


@pytest.mark.parametrize(
    "bound",
    [
        "MAX_CALLS = 20\n",
        "parser.add_argument('--max-calls', type=int, default=20)\n",
        "parser.add_argument('--limit', type=int, default=20)\n",
        "RECORD_CAP = 20\n",
        "call_budget = 20\n",
    ],
)
def test_run_twice_record_is_capped_by_a_bound_the_reviewer_can_find(
    tmp_path: Path, bound: str
) -> None:
    root = _run_twice_tree(tmp_path, "import sys\n" + bound + "print('replay', 'record')\n")
    outcome = docs_entrypoints(root, "run-twice")
    assert outcome.status == "pass", outcome.evidence
    assert "record capped: found" in messages(outcome)


def test_run_twice_record_without_a_cap_warns(tmp_path: Path) -> None:
    root = _run_twice_tree(tmp_path, "import sys\nprint('replay', 'record')\n")
    outcome = docs_entrypoints(root, "run-twice")
    assert outcome.status == "warn"
    assert outcome.summary.startswith("found, but not as the brief asks: record capped (no max")


# --------------------------------------------------------------- readings of real hand-ins

HANDINS = ROOT / "tests" / "fixtures" / "handins"


def test_run_sh_forwarding_its_arguments_to_argparse_choices_is_followed() -> None:
    """run.sh runs `"${PYTHON:-python3}" "$here/src/answer.py" "$@"`; answer.py's argparse
    takes `choices=("replay", "record")` and caps record with a MAX_LIVE_CALLS constant."""
    outcome = docs_entrypoints(HANDINS / "docs-run-twice-forwarded", "run-twice", "./run.sh replay")
    assert outcome.status == "pass", outcome.evidence
    text = messages(outcome)
    assert "./run.sh replay: found — run.sh passes its argument to src/answer.py" in text
    assert "./run.sh record: found — run.sh passes its argument to src/answer.py" in text
    assert "record capped: found — a bound on model calls: `MAX_LIVE_CALLS`" in text


def test_a_runbook_with_bold_labelled_items_gives_each_step() -> None:
    """`1. **Start a recording** (...)` with its command in a fenced block inside the item,
    then `2. **Test:** ...` and `3. **Replay:** ...`."""
    root = HANDINS / "docs-run-twice-forwarded"
    steps = {e.label: e for e in runbook_entries(root, read_makefile(root))}
    assert steps["runbook start"].found and steps["runbook start"].line == 10
    assert "./run.sh record" in steps["runbook start"].detail
    assert steps["runbook test"].detail.startswith("`./run.sh replay && git diff")
    assert steps["runbook replay"].detail == "`./run.sh replay`"
    assert steps["runbook replay"].line == 14


def test_arguments_passed_where_the_check_cannot_read_are_a_warning(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"run.sh": 'exec node cli.js "$@"\n', "cli.js": "", "main.py": "MAX_CALLS = 3\n"},
        ("run.sh",),
    )
    outcome = docs_entrypoints(root, "run-twice", "./run.sh replay")
    assert outcome.status == "warn", outcome.evidence
    assert "./run.sh replay: not proven — run.sh passes its arguments on" in messages(outcome)
    assert "also passes them to cli.js" in messages(outcome)
    # A run.sh that reads no argument at all surely handles no mode.
    (root / "run.sh").write_text("exec node cli.js\n")
    assert docs_entrypoints(root, "run-twice", "./run.sh replay").status == "fail"


def test_a_cap_is_a_named_constant_the_code_compares_against(tmp_path: Path) -> None:
    run_sh = 'case "$1" in replay|record) python3 go.py "$1" ;; esac\n'
    go = "MODEL_REQUEST_CEILING: int = 6\n\ndef spend(n):\n    return n < MODEL_REQUEST_CEILING\n"
    root = tree(tmp_path, {"run.sh": run_sh, "go.py": go}, ("run.sh",))
    outcome = docs_entrypoints(root, "run-twice", "./run.sh replay")
    assert outcome.status == "pass", outcome.evidence
    assert "`MODEL_REQUEST_CEILING`, compared against" in messages(outcome)
    (root / "go.py").write_text("MODEL_REQUEST_CEILING = 6\n")  # never compared: not a bound
    assert docs_entrypoints(root, "run-twice").status == "warn"


def test_a_replay_that_ran_an_entry_proves_it(tmp_path: Path) -> None:
    root = tree(tmp_path, {"run.sh": 'exec node cli.js "$@"\n', "main.py": "MAX_CALLS = 3\n"})
    (root / "run.sh").chmod(0o755)
    static = docs_entrypoints(root, "run-twice", "./run.sh replay")
    assert static.status == "warn"
    after = docs_entrypoints_after_replay(static, ["./run.sh replay"])
    text = messages(after)
    assert "./run.sh replay: found — the replay ran `./run.sh replay`, which exited 0" in text
    assert after.status == "warn"  # record is never run by a replay: still unsure
    assert "./run.sh record: not proven" in text
    # A fail the replay disproves: make demo defined in an included makefile is unsure, and
    # a missing one the replay ran is found.
    make = tree(tmp_path / "m", {"Makefile": "test:\n\tpytest\nrecord:\n\tx\n"})
    failed = docs_entrypoints(make, "cassette", "make test && make demo")
    assert failed.status == "fail"
    passed = docs_entrypoints_after_replay(failed, ["CASSETTE_MODE=replay make test && make demo"])
    assert passed.status == "pass" and "make demo" in passed.summary
    # Only a command whose exit status is known proves anything; nothing is downgraded.
    assert docs_entrypoints_after_replay(failed, ["make demo || true"]) is failed
    assert docs_entrypoints_after_replay(failed, ["make demo; make test"]) is failed
    assert docs_entrypoints_after_replay(failed, []) is failed


def test_vcrpy_hand_in_notes_are_judged_by_its_matchers_and_filters(tmp_path: Path) -> None:
    """pytest-recording with `vcr_config` (match_on method/path/body, filter_headers
    Authorization): the notes say so, and the brief's `user, request_id, id, created` is not
    asked of them."""
    root = HANDINS / "docs-vcrpy-matchers"
    outcome = docs_replay_notes(root, volatile_fields=VOLATILE, shape="cassette")
    assert outcome.status == "pass", outcome.evidence
    assert outcome.summary == (
        "REPLAY.md says what the vcrpy harness matches on (method, path, body); "
        "filters authorization"
    )
    assert "the vcrpy harness (tests/conftest.py:6)" in messages(outcome)
    assert "user" not in messages(outcome)
    # Notes that leave the filter out are a warning; notes that say nothing of it, a fail.
    copy = tmp_path / "h"
    shutil.copytree(root, copy)
    note = (copy / "REPLAY.md").read_text()
    (copy / "REPLAY.md").write_text(note.replace("`Authorization`", "credential"))
    warned = docs_replay_notes(copy, volatile_fields=VOLATILE, shape="cassette")
    assert warned.status == "warn" and warned.summary == "REPLAY.md leaves out `authorization`"
    (copy / "REPLAY.md").write_text("# Replay\n\nRun `make test`.\n")
    assert docs_replay_notes(copy, volatile_fields=VOLATILE, shape="cassette").status == "fail"


def test_nock_hand_in_notes_are_judged_by_what_after_record_drops() -> None:
    outcome = docs_replay_notes(
        HANDINS / "docs-nock-back", volatile_fields=VOLATILE, shape="cassette"
    )
    assert outcome.status == "pass", outcome.evidence
    text = messages(outcome)
    assert "the nock harness (test/triage.test.js) matches on method, path, body" in text
    assert "filters reqheaders, date, x-request-id, openai-organization (hooks: afterRecord)" in (
        text
    )
