"""The `cassettes.*` checks: pure functions over compact per-recording facts."""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import (
    FRESH,
    KEYS_MATCH,
    MODEL_METADATA,
    NO_SECRETS,
    PER_TURN,
    PRUNED,
)
from cassettes_app.config import AnalysisConfig
from cassettes_app.keys import BRIEF_SCHEME, NO_VARIANT
from cassettes_app.secrets import LEAK, SESSION_COOKIE, SecretHit

__all__ = [
    "FUTURE_GRACE",
    "KeyEntry",
    "KeyReport",
    "RecordingFacts",
    "cassettes_fresh",
    "cassettes_keys_match",
    "cassettes_model_metadata",
    "cassettes_no_secrets",
    "cassettes_per_turn",
    "cassettes_pruned",
    "key_report",
    "parse_time",
]

# A recording a few minutes "after" the upload is a candidate's clock drift, not a forgery.
FUTURE_GRACE = dt.timedelta(minutes=10)
VCR_NO_TIME = "VCR.py cassettes carry no recording time"
NO_TIME_EVIDENCE = "no response Date header, no `created` in the body, no time field"
_VCR_FORMATS = {"vcr"}
_LARGEST = 5


@dataclass(frozen=True, slots=True)
class RecordingFacts:
    """What the checks need to know about one recording, without its bodies."""

    path: str
    format: str = "cassette_json"
    key: str | None = None  # as stored in the file
    recomputed_key: str | None = None  # None: no JSON-object request to recompute from
    key_labels: tuple[str, ...] = ()  # explain_mismatch labels when the keys differ
    kept_fields: tuple[str, ...] = ()  # volatile fields whose keeping reproduces the key
    also_dropped: tuple[str, ...] = ()  # other top-level fields whose dropping reproduces it
    volatile_present: tuple[str, ...] = ()  # volatile fields at the request's top level
    key_schemes: tuple[tuple[str, str], ...] = ()  # (scheme, key under it): keys.scheme_keys
    key_line: int | None = None  # the line of the stored key in the file
    canonical: str | None = None  # the canonical request recomputed, when the key differs
    model: str | None = None  # the recording's own model field (else the payload's)
    model_source: str | None = None  # where `model` was read ("the response's `model`")
    served_models: tuple[str, ...] = ()  # every model the payloads name, served one first
    recorded_at: str | None = None  # as written (or derived: see time_source)
    time_source: str | None = None  # the evidence of the time ("the response Date header")
    oldest: dt.datetime | None = None  # earliest readable recording time (aware UTC)
    newest: dt.datetime | None = None  # latest readable recording time (aware UTC)
    size: int = 0  # bytes of the file holding it
    sha256: str = ""
    interactions: int = 0
    embedded_turns: int = 0  # entries of the file's own `turns` list (one file, many turns)

    @property
    def key_checked(self) -> bool:
        """True when a stored key could be compared with a recomputed one."""
        return self.key is not None and self.recomputed_key is not None

    @property
    def key_matches(self) -> bool:
        """True when the stored key equals the recomputed one."""
        return self.key_checked and self.key == self.recomputed_key


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One stored key compared with its recomputation."""

    path: str
    stored_key: str
    recomputed_key: str
    matched: bool
    labels: tuple[str, ...] = ()
    kept_fields: tuple[str, ...] = ()
    also_dropped: tuple[str, ...] = ()
    volatile_present: tuple[str, ...] = ()
    line: int | None = None  # of the stored key in the file
    canonical: str | None = None  # the canonical request the key was recomputed from

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "path": self.path,
            "stored_key": self.stored_key,
            "recomputed_key": self.recomputed_key,
            "matched": self.matched,
            "labels": list(self.labels),
            "kept_fields": list(self.kept_fields),
            "also_dropped": list(self.also_dropped),
            "volatile_present": list(self.volatile_present),
        }


@dataclass(slots=True)
class KeyReport:
    """What `cassettes.keys_match` found, in the form `docs.replay_notes` compares with REPLAY.md.

    `dropped`: volatile fields seen at a request's top level whose key matched with them
    dropped (the data shows the candidate drops them). `kept`: volatile fields whose keeping
    reproduces a mismatched key. `also_dropped`: fields outside the list whose dropping does.
    """

    entries: list[KeyEntry] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    also_dropped: list[str] = field(default_factory=list)
    scheme: str | None = None  # the key scheme the entries were recomputed with
    tried: list[str] = field(default_factory=list)  # the schemes tried, when inferred
    unresolved: int = 0  # keys no scheme could be inferred for (none reproduces most)

    @property
    def matched(self) -> list[KeyEntry]:
        """Entries whose key matched."""
        return [e for e in self.entries if e.matched]

    @property
    def mismatched(self) -> list[KeyEntry]:
        """Entries whose key did not match."""
        return [e for e in self.entries if not e.matched]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "entries": [e.as_dict() for e in self.entries],
            "dropped": list(self.dropped),
            "kept": list(self.kept),
            "also_dropped": list(self.also_dropped),
            "scheme": self.scheme,
        }


def key_report(facts: Iterable[RecordingFacts], *, infer: bool = False) -> KeyReport:
    """Per-cassette key comparison plus which volatile fields the data says are dropped or kept.

    `infer`: the brief only shows a sample key, so the hand-in's own scheme is the one that
    reproduces most stored keys (`inferred_key_report`); else the brief's scheme is the rule.
    """
    if infer:
        return inferred_key_report(list(facts))
    report = KeyReport(scheme=BRIEF_SCHEME)
    dropped: dict[str, None] = {}
    kept: dict[str, None] = {}
    also: dict[str, None] = {}
    for f in facts:
        if not f.key_checked:
            continue
        assert f.key is not None and f.recomputed_key is not None
        entry = KeyEntry(
            path=f.path,
            stored_key=f.key,
            recomputed_key=f.recomputed_key,
            matched=f.key_matches,
            labels=f.key_labels,
            kept_fields=f.kept_fields,
            also_dropped=f.also_dropped,
            volatile_present=f.volatile_present,
            line=f.key_line,
            canonical=f.canonical,
        )
        report.entries.append(entry)
        if entry.matched:
            dropped.update(dict.fromkeys(f.volatile_present))
        else:
            kept.update(dict.fromkeys(f.kept_fields))
            also.update(dict.fromkeys(f.also_dropped))
    report.dropped = list(dropped)
    report.kept = list(kept)
    report.also_dropped = list(also)
    return report


def inferred_key_report(facts: list[RecordingFacts]) -> KeyReport:
    """The scheme that reproduces most stored keys is the hand-in's own; the keys it does
    not reproduce are hand edits. None reproducing most: `unresolved`, with what was tried.
    Under the brief's scheme the volatile-field findings are kept as `key_report` keeps them.
    """
    keyed = [f for f in facts if f.key and f.key_schemes]
    report = KeyReport()
    tally: dict[str, int] = {}
    for f in keyed:
        stored = (f.key or "").strip().lower()
        for label, key in f.key_schemes:
            tally[label] = tally.get(label, 0) + (key == stored)
    report.tried = list(tally)
    best = max(tally, key=tally.__getitem__, default=None)  # ties: the first tried
    if best is None or 2 * tally[best] <= len(keyed):
        report.unresolved = len(keyed)
        return report
    report.scheme = best
    brief = best == BRIEF_SCHEME
    for f in keyed:
        recomputed = dict(f.key_schemes).get(best, "")
        matched = recomputed == (f.key or "").strip().lower()
        report.entries.append(
            KeyEntry(
                path=f.path,
                stored_key=f.key or "",
                recomputed_key=recomputed,
                matched=matched,
                labels=f.key_labels if brief and not matched else (),
                kept_fields=f.kept_fields if brief else (),
                also_dropped=f.also_dropped if brief else (),
                volatile_present=f.volatile_present if brief else (),
                line=f.key_line,
                canonical=f.canonical if brief else None,
            )
        )
    if brief:
        report.dropped = list(dict.fromkeys(v for e in report.matched for v in e.volatile_present))
        report.kept = list(dict.fromkeys(v for e in report.mismatched for v in e.kept_fields))
        report.also_dropped = list(
            dict.fromkeys(v for e in report.mismatched for v in e.also_dropped)
        )
    return report


# --------------------------------------------------------------------------- times

_EPOCH = re.compile(r"\d{9,11}(?:\.\d+)?")


def parse_time(raw: Any) -> dt.datetime | None:
    """An aware UTC datetime from ISO-8601, epoch seconds or an HTTP date (a response's
    Date header copied as it was: "Fri, 20 Nov 2026 10:00:00 GMT"); None when unreadable."""
    if isinstance(raw, dt.datetime):
        value = raw
    elif isinstance(raw, str) and raw.strip():
        text = raw.strip()
        if _EPOCH.fullmatch(text):
            try:
                return dt.datetime.fromtimestamp(float(text), tz=dt.UTC)
            except (OverflowError, OSError, ValueError):
                return None
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            http = _http_date(text)
            if http is None:
                return None
            value = http
    else:
        return None
    if value.tzinfo is None:
        # Recorders that write naive times (VCR, some HAR tools) mean UTC in practice.
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


# An RFC 9110 HTTP date: "Sun, 06 Nov 1994 08:49:37 GMT" (the day name may be left out).
_HTTP_DATE = re.compile(
    r"(?:[A-Z][a-z]{2}, )?\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} (?:GMT|UTC|[+-]\d{4})"
)


def _http_date(text: str) -> dt.datetime | None:
    if len(text) > 40 or not _HTTP_DATE.fullmatch(text):
        return None
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _age_days(now: dt.datetime, when: dt.datetime) -> int:
    return (now - when).days


def source_notes(
    facts: Sequence[RecordingFacts], *, times: bool = True, models: bool = True
) -> list[dict[str, Any]]:
    """Evidence naming where the recording times and models were read, one line per source
    ("recorded_at from the response Date header (2 recordings)")."""
    notes: list[dict[str, Any]] = []
    for wanted, field_name, label in (
        (times, "time_source", "recorded_at"),
        (models, "model_source", "model"),
    ):
        if not wanted:
            continue
        by_source: dict[str, list[str]] = {}
        for f in facts:
            source = getattr(f, field_name)
            if source:
                by_source.setdefault(source, []).append(f.path)
        for source, paths in by_source.items():
            notes.append(
                {
                    "message": f"{label} from {source} ({counted(len(paths), 'recording')})",
                    "source": source,
                    "paths": paths[:20],
                    "info": True,
                }
            )
    return notes


def _no_time_why(f: RecordingFacts, default: str) -> str:
    if f.format in _VCR_FORMATS:
        return f"{VCR_NO_TIME} ({NO_TIME_EVIDENCE})"
    return default


# --------------------------------------------------------------------------- checks


def cassettes_keys_match(facts: Sequence[RecordingFacts], config: AnalysisConfig) -> CheckOutcome:
    """Establishes that each stored key equals the key recomputed from its canonical request.

    The cassette brief prescribes the key; the others only show a sample, so there the
    hand-in's own scheme is inferred (`inferred_key_report`) and named in the evidence.
    """
    check = KEYS_MATCH
    infer = config.shape != "cassette"
    report = key_report(facts, infer=infer)
    if report.unresolved:
        tried = "; ".join(report.tried)
        return CheckOutcome(
            check,
            "warn",
            f"no key scheme reproduces most of the {report.unresolved} stored keys, so which "
            "keys were edited cannot be told",
            [{"message": f"tried: {label}", "scheme": label} for label in report.tried]
            + [{"message": f"schemes tried: {tried}"}],
        )
    if not report.entries:
        keyed_elsewhere = [f for f in facts if f.key is not None]
        reason = (
            "no recording carries a key recomputable from a JSON request"
            if keyed_elsewhere
            else "no recording carries a stored key (VCR.py, HAR and fixture files have none)"
        )
        return skip(check, reason)
    volatile = ", ".join(f"`{v}`" for v in config.volatile_fields) or "no fields"
    how = (
        f"with {volatile} dropped"
        if report.scheme == BRIEF_SCHEME
        else f"as {report.scheme} (the hand-in's own scheme)"
    )
    bad = report.mismatched
    if not bad:
        evidence: list[dict[str, Any]] = [
            {"message": f"{len(report.entries)} keys recomputed {how}", "scheme": report.scheme}
        ]
        if report.dropped:
            shown = ", ".join(f"`{v}`" for v in report.dropped)
            evidence.append({"message": f"requests carry {shown}; keys match with them dropped"})
        return CheckOutcome(check, "pass", f"all {len(report.entries)} stored keys match", evidence)
    evidence = []
    for entry in bad:
        why = "; ".join(entry.labels) if entry.labels else NO_VARIANT
        item: dict[str, Any] = {
            "message": f"stored key {entry.stored_key} != recomputed "
            f"{entry.recomputed_key or '(not computable)'}: {why}",
            "path": entry.path,
            "stored_key": entry.stored_key,
            "recomputed_key": entry.recomputed_key,
            "explanations": list(entry.labels),
        }
        if entry.line is not None:
            item["line"] = entry.line
        if entry.canonical is not None:
            # What the key was recomputed from, to set beside the stored request by eye:
            # a hand edit shows as a changed value, another normalisation as a changed form.
            item["canonical"] = entry.canonical
        evidence.append(item)
    summary = (
        f"{len(bad)} of {len(report.entries)} stored keys do not match their canonical request"
    )
    if infer and report.scheme != BRIEF_SCHEME:
        summary = (
            f"{len(bad)} of {len(report.entries)} stored keys do not match the hand-in's own "
            f"scheme ({report.scheme}), which reproduces the others"
        )
    return CheckOutcome(check, "fail", summary, evidence)


def _no_credentials(placeholders: list[SecretHit], cookies: list[SecretHit]) -> CheckOutcome:
    """The pass, with what was found that is not a credential: placeholders, and session
    cookies a provider's edge set (low severity: they identify a CDN session, not an account)."""
    notes = []
    evidence: list[dict[str, Any]] = []
    if placeholders:
        files = len({h.path for h in placeholders})
        notes.append(
            f"{counted(len(placeholders), 'redacted placeholder')} in {counted(files, 'file')}"
        )
        evidence += [
            {
                "message": f"redacted placeholder ({h.rule}, {h.context})",
                "path": h.path,
                "line": h.line,
            }
            for h in placeholders[:20]
        ]
    if cookies:
        names = sorted({h.context.rsplit(" ", 1)[-1].strip("()") for h in cookies})
        notes.append(
            f"{counted(len(cookies), 'session cookie')} kept in the recordings "
            f"({', '.join(names[:5])}; low severity, not credentials)"
        )
        evidence += [
            {
                "message": f"session cookie kept in the recording ({h.context}): {h.redacted}",
                "path": h.path,
                "line": h.line,
                "severity": "low",
            }
            for h in cookies[:20]
        ]
    if not notes:
        return CheckOutcome(NO_SECRETS, "pass", "no credentials found")
    return CheckOutcome(NO_SECRETS, "pass", "no credentials; " + "; ".join(notes), evidence)


def cassettes_no_secrets(hits: Iterable[SecretHit]) -> CheckOutcome:
    """Establishes that no credential sits in recordings, traces, logs or repo files."""
    check = NO_SECRETS
    leaks: list[SecretHit] = []
    placeholders: list[SecretHit] = []
    cookies: list[SecretHit] = []
    for hit in hits:
        if hit.rule == SESSION_COOKIE:
            (cookies if hit.status == LEAK else placeholders).append(hit)
        else:
            (leaks if hit.status == LEAK else placeholders).append(hit)
    if not leaks:
        return _no_credentials(placeholders, cookies)
    leaks.sort(key=lambda h: (h.path, h.line or 0, h.rule))
    evidence = [
        {
            "message": f"{h.rule} in {h.context}: {h.redacted}",
            "path": h.path,
            "line": h.line,
            "rule": h.rule,
            "context": h.context,
            "redacted": h.redacted,
        }
        for h in leaks
    ]
    files = len({h.path for h in leaks})
    summary = f"{counted(len(leaks), 'credential')} in {counted(files, 'file')}"
    return CheckOutcome(check, "fail", summary, evidence)


# The format of a recording no reader knows (matched by the recording globs all the same).
UNKNOWN_SHAPE = "unknown"


def cassettes_model_metadata(facts: Sequence[RecordingFacts]) -> CheckOutcome:
    """Establishes that every recording names its model and its recording time."""
    check = MODEL_METADATA
    if not facts:
        return skip(check, "no recordings")
    evidence: list[dict[str, Any]] = []
    no_model = [f for f in facts if not f.model]
    no_time = [f for f in facts if not f.recorded_at and f.oldest is None]
    bad_time = [f for f in facts if f.recorded_at and f.oldest is None]
    for f in no_model:
        where = (
            " where this tool looked (a shape it does not read)"
            if f.format == UNKNOWN_SHAPE
            else ""
        )
        evidence.append({"message": f"names no model{where}", "path": f.path})
    for f in no_time:
        why = _no_time_why(f, "no recording time")
        evidence.append({"message": f"age unknown: {why}", "path": f.path})
    for f in bad_time:
        evidence.append(
            {"message": f"recording time {f.recorded_at!r} is not a date", "path": f.path}
        )
    evidence += source_notes(facts)
    # A file of a shape no reader knows may keep its model where this tool does not look:
    # not finding it there is a warning, never a flaw found.
    if [f for f in no_model if f.format != UNKNOWN_SHAPE]:
        return CheckOutcome(
            check, "fail", f"{len(no_model)} of {len(facts)} recordings name no model", evidence
        )
    if no_model:
        return CheckOutcome(
            check,
            "warn",
            f"{len(no_model)} of {len(facts)} recordings, of a shape this tool does not read, "
            "name no model where it looked",
            evidence,
        )
    if no_time or bad_time:
        vcr = all(f.format in _VCR_FORMATS for f in no_time) and no_time and not bad_time
        summary = f"{len(no_time) + len(bad_time)} of {len(facts)} recordings have no readable time"
        if vcr:
            summary += f" ({VCR_NO_TIME})"
        return CheckOutcome(check, "warn", summary, evidence)
    return CheckOutcome(
        check,
        "pass",
        f"all {len(facts)} recordings name their model and recording time",
        evidence,
    )


# A model name's snapshot (a date: -2024-07-18, -20241022, -0613) or alias (-latest, and
# Anthropic's -0: claude-sonnet-4-0) suffix; what is left is the model's family.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")
_ALIAS = re.compile(r"-(?:latest|0)$")


def _family(name: str) -> tuple[str, str | None]:
    """(family, snapshot): the snapshot is None for a name that points at whatever snapshot
    its provider serves (gpt-4o-mini, claude-3-5-haiku-latest)."""
    if found := _SNAPSHOT.search(name):
        return name[: found.start()], found.group()
    return _ALIAS.sub("", name), None


def _model_ok(seen: str, expected: str) -> bool:
    """Same model, or the same family where one side names no snapshot: an alias and the
    snapshot it served (gpt-4o-mini and gpt-4o-mini-2024-07-18, either way round;
    claude-3-5-haiku-latest and -20241022). Two different snapshots are two models."""
    if seen == expected:
        return True
    seen_family, seen_snapshot = _family(seen)
    expected_family, expected_snapshot = _family(expected)
    return seen_family == expected_family and (seen_snapshot is None or expected_snapshot is None)


def cassettes_fresh(facts: Sequence[RecordingFacts], config: AnalysisConfig) -> CheckOutcome:
    """Establishes that recordings are young enough, not dated after upload, of the right model."""
    check = FRESH
    if not facts:
        return skip(check, "no recordings")
    now = config.now
    limit = dt.timedelta(days=config.stale_after_days)
    fails: list[dict[str, Any]] = []
    warns: list[dict[str, Any]] = []
    unknown = 0
    # The run-twice brief keeps fixtures to the response text ({"text": ...}) and puts
    # volatile data in the run log: a fixture without a recording time is what it asks for.
    untimed_ok = config.shape == "run-twice"
    untimed = 0
    for f in facts:
        if f.oldest is None and untimed_ok:
            untimed += 1
        elif f.oldest is None:
            unknown += 1
            why = _no_time_why(f, "no readable recording time")
            # Never guessed from file times: an archive's mtimes say nothing about recording.
            warns.append({"message": f"age unknown: {why}", "path": f.path})
        else:
            age = now - f.oldest
            if age > limit:
                fails.append(
                    {
                        "message": f"recorded {f.oldest:%Y-%m-%d}, {_age_days(now, f.oldest)} "
                        f"days before upload (limit {config.stale_after_days})",
                        "path": f.path,
                        "age_days": _age_days(now, f.oldest),
                    }
                )
            newest = f.newest or f.oldest
            if newest > now + FUTURE_GRACE:
                fails.append(
                    {
                        "message": f"dated {newest:%Y-%m-%dT%H:%M:%SZ}, after the upload "
                        f"({now:%Y-%m-%dT%H:%M:%SZ})",
                        "path": f.path,
                    }
                )
        if config.expected_model:
            wrong = [
                m
                for m in dict.fromkeys((f.model, *f.served_models))
                if m and not _model_ok(m, config.expected_model)
            ]
            if wrong:
                warns.append(
                    {
                        "message": f"model {', '.join(wrong)}, expected {config.expected_model}",
                        "path": f.path,
                        "models": wrong,
                    }
                )
    evidence = fails + warns
    other_model = sum(1 for e in warns if "models" in e)
    if fails:
        stale = sum(1 for e in fails if "age_days" in e)
        future = len(fails) - stale
        parts = []
        if stale:
            parts.append(f"{stale} older than {config.stale_after_days} days")
        if future:
            parts.append(f"{future} dated after upload")
        if other_model:
            parts.append(f"{other_model} with another model")
        return CheckOutcome(check, "fail", "; ".join(parts), evidence)
    if warns:
        parts = []
        if unknown:
            parts.append(f"age unknown for {unknown} of {len(facts)} recordings")
        if other_model:
            parts.append(f"{other_model} recorded with another model than {config.expected_model}")
        return CheckOutcome(check, "warn", "; ".join(parts), evidence)
    timed = [f.oldest for f in facts if f.oldest is not None]
    if not timed:
        return skip(
            check,
            f"none of the {len(facts)} run-twice fixtures carries a recording time (the brief "
            "keeps them to the response text), so their age cannot be judged",
        )
    noun = "dated recordings" if untimed else "recordings"
    summary = (
        f"all {len(timed)} {noun} younger than {config.stale_after_days} days "
        f"(oldest {_age_days(now, min(timed))} days)"
    )
    if untimed:
        summary += f"; {untimed} run-twice fixtures carry no recording time (none is asked for)"
    return CheckOutcome(check, "pass", summary, source_notes(facts, models=False))


def _request_identity(f: RecordingFacts) -> str | None:
    """What makes two recordings the same one: the stored key, else the key recomputed from
    the request; None when the file has neither (a run-twice fixture of response text only,
    which only its own name identifies)."""
    return f.key or f.recomputed_key or None


def _joined_groups(paths: list[str], overlapping: list[list[str]]) -> list[list[str]]:
    """Union of groups that share a file (one file can carry several keys): each result
    group keeps one file, the rest are duplicates."""
    parent = {p: p for p in paths}

    def find(p: str) -> str:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for members in overlapping:
        for other in members[1:]:
            a, b = find(members[0]), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(find(path), []).append(path)
    return [members for members in groups.values() if len(members) > 1]


def _equal_responses_note(
    files: dict[str, RecordingFacts], dupes: list[list[str]]
) -> list[dict[str, Any]]:
    """Files with identical bytes that are not duplicates (different keys, or no key)."""
    in_dupes = {p for members in dupes for p in members}
    by_sha: dict[str, list[str]] = {}
    for path in sorted(files):
        if files[path].sha256 and path not in in_dupes:
            by_sha.setdefault(files[path].sha256, []).append(path)
    return [
        {
            "message": f"identical content under different keys (not duplicates): "
            f"{', '.join(members)}",
            "paths": members,
            "info": True,
        }
        for members in by_sha.values()
        if len(members) > 1
    ]


def cassettes_pruned(facts: Sequence[RecordingFacts], config: AnalysisConfig) -> CheckOutcome:
    """Establishes that no request is recorded twice (per key) and the total is under cap.

    Several files for one key are duplicates (reruns left behind). Equal responses under
    different keys are not: two prompts may well get the same answer, so they are named
    as information only.
    """
    check = PRUNED
    files: dict[str, RecordingFacts] = {}
    for f in facts:
        files.setdefault(f.path, f)  # one file can hold several recordings (HAR, agent logs)
    if not files:
        return skip(check, "no recordings")
    by_key: dict[str, list[str]] = {}
    for f in facts:
        identity = _request_identity(f)
        if identity:
            members = by_key.setdefault(identity, [])
            if f.path not in members:
                members.append(f.path)
    dupes = _joined_groups(sorted(files), [m for m in by_key.values() if len(m) > 1])

    evidence: list[dict[str, Any]] = []
    saved = 0
    for members in dupes:
        # Keep the shallowest copy: `cassettes/x.json` is the one replay reads, not `archive/`.
        members.sort(key=lambda p: (p.count("/"), p))
        keep = members[0]
        extra = sum(files[p].size for p in members[1:])
        saved += extra
        same_bytes = len({files[p].sha256 for p in members}) == 1
        how = "same key, identical content" if same_bytes else "same key"
        keys = sorted({key for p in members if (key := files[p].key)})
        evidence.append(
            {
                "message": f"{how}: {', '.join(members)}"
                + (f" (key {', '.join(keys)})" if keys else "")
                + f"; pruning all but {keep} saves {extra} bytes",
                "path": members[1],
                "paths": members,
                "bytes_saved": extra,
            }
        )
    evidence += _equal_responses_note(files, dupes)
    total = sum(f.size for f in files.values())
    over = total > config.max_recordings_bytes
    if over:
        evidence.append(
            {
                "message": f"recordings total {total} bytes, over the "
                f"{config.max_recordings_bytes}-byte limit"
            }
        )
    for f in sorted(files.values(), key=lambda f: (-f.size, f.path))[:_LARGEST]:
        evidence.append({"message": f"{f.size} bytes", "path": f.path, "size": f.size})
    if dupes or over:
        parts = []
        if dupes:
            n = sum(len(m) - 1 for m in dupes)
            parts.append(f"{counted(n, 'duplicate recording')} ({saved} bytes to prune)")
        if over:
            parts.append(f"{total} bytes in recordings, over {config.max_recordings_bytes}")
        return CheckOutcome(check, "fail", "; ".join(parts), evidence)
    return CheckOutcome(
        check, "pass", f"{len(files)} recording files, no duplicates, {total} bytes", evidence
    )


def cassettes_per_turn(blobs: Iterable[Any], facts: Sequence[RecordingFacts]) -> CheckOutcome:
    """Establishes that conversations are stored one turn per recording, not as one blob."""
    # `blobs` are threads.multi_turn_blobs refs: (path, interaction index) pairs.
    check = PER_TURN
    if not facts:
        return skip(check, "no recordings")
    evidence: list[dict[str, Any]] = []
    flagged: set[str] = set()
    for f in facts:
        if f.embedded_turns:
            flagged.add(f.path)
            evidence.append(
                {
                    "message": f"one file holds {f.embedded_turns + 1} model turns "
                    f"({f.embedded_turns} under its own `turns` key)",
                    "path": f.path,
                }
            )
    for ref in blobs:
        path, index = ref if isinstance(ref, tuple) and len(ref) == 2 else (str(ref), None)
        flagged.add(str(path))
        where = f" (interaction {index})" if index is not None else ""
        evidence.append(
            {
                "message": f"request{where} carries several earlier model turns that no "
                "other recording holds",
                "path": str(path),
                "interaction": index,
            }
        )
    if flagged:
        names = ", ".join(sorted(flagged)[:5]) + (" …" if len(flagged) > 5 else "")
        summary = f"{counted(len(flagged), 'recording')} holding several turns: {names}"
        return CheckOutcome(check, "fail", summary, evidence)
    return CheckOutcome(
        check, "pass", f"no recording among {len(facts)} holds a conversation as one blob"
    )
