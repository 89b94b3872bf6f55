"""docs.replay_notes: REPLAY.md (or the runbook) names the normalised request fields,
and they agree with the assignment's volatile fields and with the recomputed keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cassettes_app.checks import CheckOutcome, skip
from cassettes_app.checks.catalog import REPLAY_NOTES
from cassettes_app.checks.docs.harness import Harness, detect_harness
from cassettes_app.checks.docs.note_fields import Notes, replay_note_fields
from cassettes_app.checks.docs.repofiles import find_file, read_text
from cassettes_app.checks.docs.runbook import README_NAMES, RUNBOOK_NAMES


def _key_facts(
    key_findings: Any,
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    """(kept, dropped, also_dropped): field → cassette paths, from either form of findings.

    Accepts the summary form {"kept": [...], "dropped": [...], "also_dropped": [...]}
    (values lists of names, or name → paths) and the per-cassette list form
    [{"path", "matched", "kept_fields", "also_dropped", "volatile_present"}, ...].
    """
    kept: dict[str, list[str]] = {}
    dropped: dict[str, list[str]] = {}
    also: dict[str, list[str]] = {}

    def put(target: dict[str, list[str]], names: Any, where: str | None = None) -> None:
        if isinstance(names, Mapping):
            for name, paths in names.items():
                listed = [str(p) for p in paths] if isinstance(paths, list | tuple) else []
                target.setdefault(str(name), []).extend(listed[:5])
        elif isinstance(names, list | tuple | set | frozenset):
            for name in names:
                if isinstance(name, str):
                    paths = target.setdefault(name, [])
                    if where and len(paths) < 5:
                        paths.append(where)

    if key_findings is None:
        return kept, dropped, also
    if isinstance(key_findings, Mapping):
        put(kept, key_findings.get("kept"))
        put(dropped, key_findings.get("dropped"))
        put(also, key_findings.get("also_dropped"))
        entries = key_findings.get("entries")
        if isinstance(entries, list) and not (kept or dropped or also):
            return _key_facts(entries)
        return kept, dropped, also
    if isinstance(key_findings, list | tuple):
        for entry in key_findings:
            if not isinstance(entry, Mapping):
                continue
            where = entry.get("path") if isinstance(entry.get("path"), str) else None
            if entry.get("matched"):
                put(dropped, entry.get("volatile_present"), where)
            else:
                put(kept, entry.get("kept_fields"), where)
                put(also, entry.get("also_dropped"), where)
        return kept, dropped, also
    # A KeyReport-like object.
    for name, target in (("kept", kept), ("dropped", dropped), ("also_dropped", also)):
        put(target, getattr(key_findings, name, None))
    return kept, dropped, also


def _paths(paths: list[str]) -> str:
    return f" ({', '.join(paths[:3])})" if paths else ""


def docs_replay_notes(
    root: Path,
    *,
    volatile_fields: Sequence[str] = (),
    key_findings: Any = None,
    shape: str | None = "cassette",
) -> CheckOutcome:
    """Establish that REPLAY.md (or the runbook) names the normalised request fields and
    that they agree with the assignment's volatile fields and with the recomputed keys.

    A hand-in on a matcher-based library (vcrpy, pytest-recording, nock) has no dropped
    fields: its notes must say what its harness matches requests on and what it filters,
    as its own configuration shows (`_harness_notes`); the brief's field list is not asked.

    `key_findings` is what `cassettes.keys_match` derived ({"kept": [...], "dropped":
    [...]}, or its per-cassette entries): a field the note calls dropped but the keys keep
    is a fail. The cassette shape requires REPLAY.md; trace and ticket-service notes are
    optional (skip when absent); run-twice fixtures have no request to normalise (skip).
    """
    root = Path(root)
    shape = (shape or "").strip().lower()
    if shape == "run-twice":
        return skip(REPLAY_NOTES, "run-twice fixtures are keyed by their text; no request fields")
    if not root.is_dir():
        return CheckOutcome(REPLAY_NOTES, "error", f"the submission tree {root} is not a folder")
    volatile = [v for v in volatile_fields if isinstance(v, str)]
    keys = _KeyFacts(*_key_facts(key_findings))
    vocabulary = set(volatile) | set(keys.kept) | set(keys.dropped) | set(keys.also)

    replay_md, sources = _note_sources(root, shape)
    if not sources:
        if shape == "cassette":
            return CheckOutcome(
                REPLAY_NOTES,
                "fail",
                "no REPLAY.md: the cassette task asks for one naming the normalised fields",
                [{"message": "looked for REPLAY.md at the root and in docs/"}],
            )
        return skip(REPLAY_NOTES, "no REPLAY.md, runbook or README to read")

    harness = detect_harness(root)
    if harness.kind:
        return _harness_notes(root, sources, harness)
    source, notes, truncated = _read_notes(root, sources, replay_md, vocabulary)
    if not notes.dropped:
        if shape == "cassette" or replay_md:
            return CheckOutcome(
                REPLAY_NOTES,
                "fail",
                f"{source} names no normalised request fields",
                [
                    {
                        "message": "looked for backticked names or list items near "
                        "'dropped', 'ignored', 'normalised', 'volatile', 'stripped'"
                        + (" (first 1 MB read)" if truncated else ""),
                        "path": source,
                    }
                ],
            )
        return skip(REPLAY_NOTES, "no replay notes naming normalised fields (optional here)")
    return _notes_outcome(source, notes, keys, volatile, vocabulary)


@dataclass(slots=True)
class _KeyFacts:
    """What the recomputed keys show: field → cassette paths, as `_key_facts` returns it."""

    kept: dict[str, list[str]]
    dropped: dict[str, list[str]]
    also: dict[str, list[str]]


def _note_sources(root: Path, shape: str) -> tuple[str | None, list[str]]:
    """REPLAY.md (if any), and the files to read for notes: it first, then runbook, README.

    Only the cassette shape insists on REPLAY.md; the others may keep notes elsewhere.
    """
    replay_md = find_file(root, ("REPLAY.md", "REPLAY", "REPLAY.txt", "REPLAY.rst"), ("", "docs"))
    sources = [replay_md] if replay_md else []
    if shape != "cassette":
        for names in (RUNBOOK_NAMES, README_NAMES):
            found = find_file(root, names, ("", "docs"))
            if found:
                sources.append(found)
    return replay_md, sources


def _read_notes(
    root: Path, sources: list[str], replay_md: str | None, vocabulary: set[str]
) -> tuple[str, Notes, bool]:
    """(source, notes, truncated): the first source that names dropped fields, else REPLAY.md."""
    source = sources[0]
    notes = Notes()
    truncated = False
    for candidate in sources:
        text, cut = read_text(root, candidate)
        found_notes = replay_note_fields(text or "", vocabulary)
        if found_notes.dropped or candidate == replay_md:
            source, notes, truncated = candidate, found_notes, cut
            if found_notes.dropped:
                break
    return source, notes, truncated


def _key_disagreements(source: str, notes: Notes, keys: _KeyFacts) -> list[dict[str, Any]]:
    """Fails: fields the note calls dropped that the keys keep, or kept that they drop."""
    fails: list[dict[str, Any]] = []
    for name, line in notes.dropped.items():
        if name in keys.kept:
            fails.append(
                {
                    "message": f"{source} says `{name}` is dropped but the keys keep it"
                    f"{_paths(keys.kept[name])}",
                    "path": source,
                    "line": line,
                }
            )
    for name, line in notes.kept.items():
        if name in keys.dropped or name in keys.also:
            paths = keys.dropped.get(name) or keys.also.get(name) or []
            fails.append(
                {
                    "message": f"{source} says `{name}` is kept but the keys drop it"
                    f"{_paths(paths)}",
                    "path": source,
                    "line": line,
                }
            )
    return fails


def _unnamed_fields(
    source: str, notes: Notes, keys: _KeyFacts, volatile: list[str]
) -> list[dict[str, Any]]:
    """Warns: fields the keys also drop, or the assignment calls volatile, the note omits."""
    warns: list[dict[str, Any]] = []
    for name, paths in keys.also.items():
        if name not in notes.dropped:
            warns.append(
                {
                    "message": f"the keys also drop `{name}`{_paths(paths)}, which {source} "
                    "does not name",
                    "path": source,
                }
            )
    for name in volatile:
        if name not in notes.dropped and name not in keys.kept:
            warns.append(
                {
                    "message": f"{source} does not name `{name}`, which the assignment lists "
                    "as volatile",
                    "path": source,
                }
            )
    return warns


def _named_fields(
    source: str, notes: Notes, volatile: list[str], vocabulary: set[str]
) -> list[dict[str, Any]]:
    """Evidence of each field the note drops, and of those the assignment does not list."""
    named = [
        {"message": f"names `{name}` as dropped", "path": source, "line": line}
        for name, line in notes.dropped.items()
    ]
    extra = [n for n in notes.dropped if n not in volatile and n not in vocabulary]
    if extra:
        named.append(
            {
                "message": f"{source} also drops {', '.join(f'`{n}`' for n in extra[:10])}, "
                "which the assignment does not list",
                "path": source,
            }
        )
    return named


def _notes_outcome(
    source: str, notes: Notes, keys: _KeyFacts, volatile: list[str], vocabulary: set[str]
) -> CheckOutcome:
    """fail when the note disagrees with the keys, warn when it omits a field, else pass."""
    fails = _key_disagreements(source, notes, keys)
    warns = _unnamed_fields(source, notes, keys, volatile)
    named = _named_fields(source, notes, volatile, vocabulary)
    listed = ", ".join(f"`{n}`" for n in notes.dropped)
    if fails:
        return CheckOutcome(
            REPLAY_NOTES,
            "fail",
            f"{source} disagrees with the recomputed keys: "
            + "; ".join(f["message"].removeprefix(f"{source} ") for f in fails[:3]),
            fails + warns + named,
        )
    if warns:
        return CheckOutcome(
            REPLAY_NOTES,
            "warn",
            f"{source} names {listed}, which does not match the volatile fields",
            warns + named,
        )
    return CheckOutcome(REPLAY_NOTES, "pass", f"{source} names {listed} as dropped", named)


def _names(text: str, name: str) -> bool:
    """Whether a note names `name` (case-insensitive, as a word; `uri` also as URL)."""
    words = [name, "url"] if name == "uri" else [name]
    return any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text, re.I) for w in words)


def _harness_notes(root: Path, sources: list[str], harness: Harness) -> CheckOutcome:
    """pass when the notes say what the harness matches on and name what it filters; warn
    when they say part of it; fail when they say none of it."""
    source, text = sources[0], ""
    for candidate in sources:
        read = read_text(root, candidate)[0] or ""
        if re.search(r"\bmatch", read, re.I):
            source, text = candidate, read
            break
        if candidate == sources[0]:
            text = read
    matched = [m for m in harness.match_on if _names(text, m.removeprefix("header "))]
    says_match = bool(re.search(r"\bmatch", text, re.I)) and bool(matched)
    unnamed = [f for f in harness.filtered if not _names(text, f)]
    where = f"{harness.path}:{harness.line}" if harness.line else harness.path
    setup = (
        f"the {harness.kind} harness ({where}) matches on {', '.join(harness.match_on)}"
        + (f" and filters {', '.join(harness.filtered)}" if harness.filtered else "")
        + (f" (hooks: {', '.join(harness.hooks)})" if harness.hooks else "")
    )
    evidence: list[dict[str, Any]] = [{"message": setup, "path": harness.path}]
    if says_match:
        evidence.append({"message": f"names the matchers {', '.join(matched)}", "path": source})
    else:
        evidence.append(
            {"message": f"{source} does not say what requests are matched on", "path": source}
        )
    evidence += [
        {"message": f"{source} does not name `{name}`, which the harness filters", "path": source}
        for name in unnamed
    ]
    named_filters = [f for f in harness.filtered if f not in unnamed]
    if says_match and not unnamed:
        filters = f"; filters {', '.join(named_filters)}" if named_filters else ""
        summary = (
            f"{source} says what the {harness.kind} harness matches on "
            f"({', '.join(matched)}){filters}"
        )
        return CheckOutcome(REPLAY_NOTES, "pass", summary, evidence)
    if says_match or named_filters:
        missing = ["what requests are matched on"] if not says_match else []
        missing += [f"`{n}`" for n in unnamed]
        return CheckOutcome(
            REPLAY_NOTES, "warn", f"{source} leaves out {', '.join(missing)}", evidence
        )
    return CheckOutcome(
        REPLAY_NOTES,
        "fail",
        f"{source} says neither what the {harness.kind} harness matches requests on nor what "
        "it filters",
        evidence,
    )
