"""docs.entrypoints: the commands the assignment asks for exist in the tree (read only,
never run).
"""

from __future__ import annotations

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
    missing = [e for e in entries if not e.found]
    soft = [e for e in entries if e.found and e.soft]
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
        return CheckOutcome(
            ENTRYPOINTS,
            "warn",
            "found, but not as the brief asks: "
            + "; ".join(f"{e.label} ({e.detail})" for e in soft),
            evidence,
        )
    # An entry the brief only welcomes, absent here, is not reported as found.
    found = ", ".join(e.label for e in entries if not e.optional)
    absent = [e.label for e in entries if e.optional]
    tail = f" ({', '.join(absent)}: none, not required)" if absent else ""
    return CheckOutcome(ENTRYPOINTS, "pass", f"found: {found}{tail}", evidence)
