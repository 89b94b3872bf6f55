"""Assignments as YAML files: shape presets, validation, and an idempotent apply."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from cassettes_app.analysis.sources import is_source, text_fingerprints
from cassettes_app.checks.rules import RuleError, validate_overrides
from cassettes_app.config import DEFAULT_ID_PATTERN, AnalysisConfig
from submissions.checks.similarity import code_similarity_again
from submissions.models import Assignment, Submission

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PRESETS: dict[str, dict[str, Any]] = {
    "cassette": {
        "replay_command": "make test && make demo",
        "graded_outputs": ["out/answers.json"],
        "recordings": ["cassettes/**/*.json"],
        "traces": [],
        "ledgers": [],
        "volatile_fields": ["user", "request_id", "id", "created"],
        "stale_after_days": 42,
        "rubric": "cassette",
    },
    "run-twice": {
        "replay_command": "./run.sh replay",
        "graded_outputs": ["out/answers.json"],
        "recordings": ["fixtures/**/*.json"],
        "traces": [],
        "ledgers": [],
        "volatile_fields": [],
        "stale_after_days": 42,
        "rubric": "run-twice",
    },
    "trace": {
        "replay_command": "make test",
        "graded_outputs": [],
        "recordings": ["cassettes/**/*.json"],
        "traces": ["replay.jsonl"],
        "ledgers": [],
        "volatile_fields": ["user", "request_id", "id", "created"],
        "stale_after_days": 42,
        "id_pattern": DEFAULT_ID_PATTERN,
        "rubric": "trace",
    },
    "ticket-service": {
        "replay_command": "make test",
        "graded_outputs": [],
        "recordings": ["cassettes/**/*.json"],
        "traces": [],
        "ledgers": ["ledger.jsonl"],
        "volatile_fields": [],
        "stale_after_days": 42,
        "service_start_command": "python app.py",
        "service_port": 8000,
        "service_request": {"method": "POST", "path": "/extract", "field": "line"},
        "rubric": "ticket-service",
    },
}

# YAML key → model field, where they differ.
_FIELD_FOR_KEY = {
    "recordings": "recording_globs",
    "traces": "trace_globs",
    "ledgers": "ledger_globs",
}
_STR_KEYS = {
    "title",
    "replay_command",
    "expected_model",
    "id_pattern",
    "stub_start_command",
    "service_start_command",
    "record_command",
    "rubric",
}
_LIST_KEYS = {
    "graded_outputs",
    "graded_fields",
    "recordings",
    "traces",
    "ledgers",
    "volatile_fields",
}
# `assignments/new/` is the new-assignment page, so no assignment may be called that.
RESERVED_SLUGS = frozenset({"new"})
_ALLOWED = {
    "slug",
    "shape",
    "stale_after_days",
    "service_port",
    "service_request",
    "record_env",
    "ticket_schema",
    "starter_files",
    "checks",
    "reference",
}
ALLOWED_KEYS = frozenset(_ALLOWED | _STR_KEYS | _LIST_KEYS)


class AssignmentError(ValueError):
    """A bad assignment file; the message names the key."""


def _fail(key: str, message: str) -> AssignmentError:
    return AssignmentError(f"{key}: {message}")


# What a record pass's sandbox variable may hold: the relay's base URL (with the API's
# base path, as OpenAI's SDK wants it), its origin alone (as Anthropic's SDK wants it), or
# the placeholder key (never the real one).
RECORD_ENV_VALUES = ("base_url", "origin", "key")
DEFAULT_RECORD_ENV = {
    "MODEL_BASE_URL": "base_url",
    "OPENAI_BASE_URL": "base_url",
    "ANTHROPIC_BASE_URL": "origin",
    "MODEL_API_KEY": "key",
    "OPENAI_API_KEY": "key",
    "ANTHROPIC_API_KEY": "key",
}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _record_env(raw: Any) -> dict[str, str]:
    """`record_env`: sandbox variable name -> base_url | origin | key."""
    if raw is None:
        return dict(DEFAULT_RECORD_ENV)
    if not isinstance(raw, dict) or not raw:
        raise _fail("record_env", "must be a mapping of variable names to base_url, origin or key")
    for name, value in raw.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise _fail("record_env", f"{name!r} is not an environment variable name")
        if value not in RECORD_ENV_VALUES:
            raise _fail(f"record_env.{name}", f"must be one of {', '.join(RECORD_ENV_VALUES)}")
    return dict(raw)


def assignment_values(data: Any, *, base_dir: Path | None = None) -> dict[str, Any]:
    """Validate an assignment mapping and return model field values (preset filled in)."""
    if not isinstance(data, dict):
        raise AssignmentError("the file must hold a mapping of keys to values")
    unknown = sorted(str(k) for k in data if k not in ALLOWED_KEYS)
    if unknown:
        raise _fail(unknown[0], f"unknown key (allowed: {', '.join(sorted(ALLOWED_KEYS))})")
    for key in ("slug", "title"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise _fail(key, "required, a non-empty string")
    try:
        validate_slug(data["slug"])
    except ValidationError:
        raise _fail("slug", "letters, digits, hyphens and underscores only") from None
    if data["slug"] in RESERVED_SLUGS:
        raise _fail("slug", f"{data['slug']!r} is reserved (it names a page)")
    shape = data.get("shape", "cassette")
    if shape not in PRESETS:
        raise _fail("shape", f"must be one of {', '.join(PRESETS)}, got {shape!r}")
    merged: dict[str, Any] = {**PRESETS[shape], **data, "shape": shape}

    values: dict[str, Any] = {"slug": merged["slug"], "shape": shape}
    for key in _STR_KEYS:
        value = merged.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise _fail(key, f"must be a string, got {type(value).__name__}")
        values[key] = value.strip()
    for key in _LIST_KEYS:
        value = merged.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise _fail(key, "must be a list of non-empty strings")
        values[_FIELD_FOR_KEY.get(key, key)] = value
    days = merged.get("stale_after_days", 42)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
        raise _fail(
            "stale_after_days", f"must be a whole number of days from 1 to 3650, got {days!r}"
        )
    values["stale_after_days"] = days
    port = merged.get("service_port")
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
    ):
        raise _fail("service_port", f"must be a port number from 1 to 65535, got {port!r}")
    values["service_port"] = port
    request = merged.get("service_request") or {}
    if not isinstance(request, dict) or not set(request) <= {"method", "path", "field"}:
        raise _fail("service_request", "must be a mapping with method, path and field")
    if request and not str(request.get("path", "")).startswith("/"):
        raise _fail("service_request", "path must start with /")
    values["service_request"] = request
    values["record_env"] = _record_env(merged.get("record_env"))
    if "reference" in merged:  # absent: left as it is (manage.py assignment_reference sets it)
        values.update(_reference(merged["reference"]))
    try:
        re.compile(values["id_pattern"] or DEFAULT_ID_PATTERN)
    except re.error as exc:
        raise _fail("id_pattern", f"not a valid regular expression: {exc}") from None
    values["id_pattern"] = values["id_pattern"] or DEFAULT_ID_PATTERN
    values["ticket_schema"] = _load_schema(merged.get("ticket_schema"), base_dir)
    values["starter_fingerprints"] = _starter_fingerprints(merged.get("starter_files"), base_dir)
    try:
        values["check_rules"] = validate_overrides(merged.get("checks"))
    except RuleError as exc:
        raise AssignmentError(str(exc)) from None
    return values


def _reference(raw: Any) -> dict[str, Any]:
    """`reference: {candidate: NAME, every_days: N}`: the spot-checked reference hand-in."""
    if raw is None:  # `reference: null` clears it
        return {"reference_candidate": "", "reference_submission": None, "spot_check_every_days": 0}
    if not isinstance(raw, dict) or not set(raw) <= {"candidate", "every_days"}:
        raise _fail("reference", "must be a mapping with candidate and every_days")
    name = raw.get("candidate")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _fail("reference.candidate", "must be the name of the reference's candidate")
    days = raw.get("every_days", 7)
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= 365:
        raise _fail("reference.every_days", f"must be 0 (never) to 365 days, got {days!r}")
    return {"reference_candidate": name.strip(), "spot_check_every_days": days}


def _load_schema(value: Any, base_dir: Path | None) -> dict | None:
    """A JSON Schema given inline or as a path relative to the assignment file."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        schema = value
    elif isinstance(value, str):
        if base_dir is None:
            raise _fail("ticket_schema", "a path needs the assignment file's folder")
        path = (base_dir / value).resolve()
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise _fail("ticket_schema", f"file not found: {value}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise _fail("ticket_schema", f"not valid JSON: {exc}") from None
    else:
        raise _fail("ticket_schema", "must be a path or a mapping")
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise _fail("ticket_schema", f"not a valid JSON Schema: {exc.message}") from None
    return schema


# The brief's starter code is small: what is read of it, in all, and fingerprints kept.
STARTER_MAX_BYTES = 4 * 1024 * 1024
STARTER_MAX_FINGERPRINTS = 200_000


def _starter_fingerprints(value: Any, base_dir: Path | None) -> list[int]:
    """The fingerprints of the brief's starter code, which `cohort.code_similarity` never
    counts. Each entry is a path relative to the assignment file (a source file, or a
    folder whose source files all count) or a pasted snippet `{name: cassette.py, text: ...}`
    (the name's extension picks the tokenizer)."""
    if value is None or value == []:
        return []
    if not isinstance(value, list):
        raise _fail("starter_files", "must be a list of paths or {name, text} snippets")
    texts: list[tuple[str, str]] = []
    budget = STARTER_MAX_BYTES
    for entry in value:
        if isinstance(entry, dict):
            name, text = entry.get("name"), entry.get("text")
            if set(entry) != {"name", "text"} or not isinstance(name, str) or not name.strip():
                raise _fail("starter_files", "a snippet is a mapping with a name and a text")
            if not isinstance(text, str):
                raise _fail("starter_files", f"{name}: text must be a string")
            texts.append((name, text))
            budget -= len(text.encode("utf-8"))
        elif isinstance(entry, str) and entry.strip():
            if base_dir is None:
                raise _fail("starter_files", "a path needs the assignment file's folder")
            for rel, data in _starter_read(base_dir, entry, budget):
                budget -= len(data)
                texts.append((rel, data.decode("utf-8", "replace")))
        else:
            raise _fail("starter_files", f"not a path or a snippet: {entry!r}")
        if budget < 0:
            raise _fail("starter_files", f"more than {STARTER_MAX_BYTES // 1024 // 1024} MiB")
    hashes = {h for rel, text in texts for h, _, _ in text_fingerprints(rel, text)}
    return sorted(hashes)[:STARTER_MAX_FINGERPRINTS]


def _starter_read(base_dir: Path, entry: str, budget: int) -> list[tuple[str, bytes]]:
    """A starter path's source files and their bytes (a file, or a folder's source files)."""
    path = (base_dir / entry).resolve()
    if path.is_dir():
        found = sorted(
            p for p in path.rglob("*") if p.is_file() and is_source(str(p.relative_to(path)))
        )
    elif path.is_file():
        found = [path]
    else:
        raise _fail("starter_files", f"file not found: {entry}")
    out = []
    for file in found:
        try:
            with file.open("rb") as handle:
                data = handle.read(budget + 1)
        except OSError as exc:
            raise _fail("starter_files", f"cannot read {entry}: {exc.strerror}") from None
        budget -= len(data)
        if budget < 0:
            raise _fail("starter_files", f"more than {STARTER_MAX_BYTES // 1024 // 1024} MiB")
        out.append((file.name, data))
    return out


def load_assignment_file(path: Path) -> dict[str, Any]:
    """Read and validate an assignment YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AssignmentError(f"cannot read {path}: {exc}") from None
    if len(text) > 1_000_000:
        raise AssignmentError("the assignment file is larger than 1 MB")
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader, chosen above
    except yaml.YAMLError as exc:
        raise AssignmentError(f"not valid YAML: {exc}") from None
    return assignment_values(data, base_dir=path.parent)


def assignment_apply(*, values: dict[str, Any]) -> tuple[Assignment, bool]:
    """Create or update an assignment; returns (assignment, changed)."""
    with transaction.atomic():
        assignment = Assignment.objects.select_for_update().filter(slug=values["slug"]).first()
        if assignment is None:
            return Assignment.objects.create(**values), True
        changed = [k for k, v in values.items() if getattr(assignment, k) != v]
        if changed:
            for key in changed:
                setattr(assignment, key, values[key])
            assignment.save(update_fields=[*changed, "updated"])
    if "starter_fingerprints" in changed:
        # What counts as the candidates' own code changed: the cohort is judged again.
        code_similarity_again(assignment)
    return assignment, bool(changed)


def analysis_config(submission: Submission) -> AnalysisConfig:
    """The assignment's settings as the pure analyser and its static checks take them."""
    a = submission.assignment
    return AnalysisConfig(
        shape=a.shape,
        recording_globs=tuple(a.recording_globs),
        trace_globs=tuple(a.trace_globs),
        ledger_globs=tuple(a.ledger_globs),
        volatile_fields=tuple(a.volatile_fields),
        stale_after_days=a.stale_after_days,
        expected_model=a.expected_model,
        id_pattern=a.id_pattern or DEFAULT_ID_PATTERN,
        replay_command=a.replay_command,
        now=submission.created,
    )
