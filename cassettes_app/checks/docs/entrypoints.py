"""docs.entrypoints: the commands the assignment asks for exist in the tree (read only,
never run).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.catalog import ENTRYPOINTS
from cassettes_app.checks.docs.entries import (
    Entry,
    make_entry,
    optional,
    record_cap_entry,
    replay_command_entries,
    run_sh_entries,
    runbook_entries,
    stub_entry,
    test_entry,
)
from cassettes_app.checks.docs.makefile import read_makefile
from cassettes_app.checks.docs.repofiles import find_file

SHAPES = ("cassette", "run-twice", "trace", "ticket-service")


def docs_entrypoints(
    root: Path, shape: str | None, replay_command: str | None = ""
) -> CheckOutcome:
    """Establish that the commands the assignment shape asks for exist in the tree.

    cassette: `make record`, `make test`, `make demo`; run-twice: `./run.sh` handling
    `replay` and `record`, plus a test target; trace: a stub start script and a test target;
    ticket-service: a runbook with start/test/replay commands and the service entry. The
    assignment's replay command (`make test && make demo`, `./run.sh replay`) is checked
    too. Files are only read, never run.
    """
    root = Path(root)
    shape = (shape or "").strip().lower()
    replay_command = replay_command or ""  # assignments without one store None or ""
    if not root.is_dir():
        return CheckOutcome(ENTRYPOINTS, "error", f"the submission tree {root} is not a folder")
    if shape not in SHAPES and not replay_command.strip():
        return skip(ENTRYPOINTS, f"no entrypoints to check for shape {shape or '(none)'!r}")
    make = read_makefile(root)
    entries: list[Entry] = []
    if shape == "cassette":
        entries += [make_entry(make, target) for target in ("record", "test", "demo")]
    elif shape == "run-twice":
        entries += run_sh_entries(root, make, replay_command)
        entries.append(record_cap_entry(root, find_file(root, ("run.sh",))))
        entries.append(optional(test_entry(root, make), "the run-twice brief welcomes tests"))
    elif shape == "trace":
        entries += [stub_entry(root, make), test_entry(root, make)]
    elif shape == "ticket-service":
        entries += runbook_entries(root, make)
    labels = {e.label for e in entries}
    for entry in replay_command_entries(root, make, replay_command):
        if entry.label not in labels:
            labels.add(entry.label)
            entries.append(entry)
    if not entries:
        return skip(ENTRYPOINTS, "the replay command names nothing this check can look for")
    return _outcome(entries)


def _outcome(entries: list[Entry]) -> CheckOutcome:
    """fail when an entry is surely missing; warn when one is weak or unsure; else pass."""
    missing = [e for e in entries if not e.found and not e.unsure]
    soft = [e for e in entries if (e.found and e.soft) or e.unsure]
    evidence = [e.evidence() for e in missing + soft] + [
        e.evidence() for e in entries if e.found and not e.soft
    ]
    if missing:
        return CheckOutcome(
            ENTRYPOINTS,
            "fail",
            "missing: " + ", ".join(e.label for e in missing),
            evidence,
        )
    if soft:
        weak = [e for e in soft if not e.unsure]
        unsure = [e for e in soft if e.unsure]
        parts = []
        if weak:
            parts.append(
                "found, but not as the brief asks: "
                + "; ".join(f"{e.label} ({e.detail})" for e in weak)
            )
        if unsure:
            parts.append(
                "not proven by reading the tree: "
                + "; ".join(f"{e.label} ({e.detail})" for e in unsure)
            )
        return CheckOutcome(ENTRYPOINTS, "warn", "; ".join(parts), evidence)
    # An entry the brief only welcomes, absent here, is not reported as found.
    found = ", ".join(e.label for e in entries if not e.optional)
    absent = [e.label for e in entries if e.optional]
    tail = f" ({', '.join(absent)}: none, not required)" if absent else ""
    return CheckOutcome(ENTRYPOINTS, "pass", f"found: {found}{tail}", evidence)


# --------------------------------------------------------------------- proven by a replay


def proven_commands(succeeded: Sequence[str]) -> list[list[str]]:
    """The simple commands that each exited 0, from whole command lines that exited 0.

    In `a && b && c` every part exited 0; after `;` or a newline only the last part's status
    is the line's; with `||` or a pipe none is known.
    """
    proven: list[list[str]] = []
    for line in succeeded:
        if "||" in line or re.search(r"(?<!\|)\|(?!\|)", line):
            continue
        last = re.split(r"[;\n]", line.strip().rstrip(";"))[-1]
        for part in last.split("&&"):
            words = _command_words(part)
            if words:
                proven.append(words)
    return proven


def _command_words(command: str) -> list[str]:
    """A simple command as words, `VAR=x` prefixes dropped and `sh run.sh`, `bash ./run.sh`
    written as `./run.sh`."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if len(words) > 1 and words[0] in ("sh", "bash", "dash", "zsh"):
        words = [words[1], *words[2:]]
    relative = bool(words) and not words[0].startswith(("/", "./"))
    if relative and ("/" in words[0] or words[0].endswith(".sh")):
        words[0] = f"./{words[0]}"
    if words and words[0] == "gmake":
        words[0] = "make"
    return words


def docs_entrypoints_after_replay(outcome: CheckOutcome, succeeded: Sequence[str]) -> CheckOutcome:
    """docs.entrypoints once a replay ran commands in the sandbox: an entry whose command the
    replay saw exit 0 (`./run.sh replay`, `make demo`) is proven present, whatever the
    reading of the tree said; the verdict is taken again from the entries.

    `outcome` is the static outcome (from `docs_entrypoints`); `succeeded` the command lines
    the replay ran that exited 0 (the assignment's replay command, when run 1 exited 0).
    Only ever upgrades: an entry the replay did not run keeps its reading.
    """
    if outcome.id != ENTRYPOINTS or outcome.status in ("skip", "error"):
        return outcome
    proven = proven_commands(succeeded)
    entries: list[Entry] = []
    changed = False
    for item in outcome.evidence:
        if not isinstance(item.get("entry"), str):
            continue
        entry = _entry_from(item)
        command = _command_words(entry.command) if entry.command else []
        ran = command and any(words[: len(command)] == command for words in proven)
        if ran and (not entry.found or entry.soft or entry.unsure):
            line = " ".join(command)
            changed = True
            entry = Entry(
                entry.label, True, f"the replay ran `{line}`, which exited 0", command=entry.command
            )
        entries.append(entry)
    if not changed:
        return outcome
    upgraded = _outcome(entries)
    return upgraded if _RANK[upgraded.status] >= _RANK[outcome.status] else outcome


_RANK = {"fail": 0, "warn": 1, "pass": 2}


def _entry_from(item: dict) -> Entry:
    """An entry back from its evidence item (as `Entry.evidence` wrote it)."""
    state = item.get("state")
    label = str(item["entry"])
    detail = str(item.get("message", "")).split(" — ", 1)[-1]
    return Entry(
        label,
        state in ("found", "not as asked", "not required"),
        detail,
        item.get("path"),
        item.get("line"),
        soft=state == "not as asked",
        optional=state == "not required",
        unsure=state == "not proven",
        command=item.get("command") if isinstance(item.get("command"), str) else None,
    )
