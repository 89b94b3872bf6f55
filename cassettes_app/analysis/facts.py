"""The compact facts of one recording, as the cassette checks read them (pure: any process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cassettes_app.bodies import ascii_json
from cassettes_app.checks.cassettes import UNKNOWN_SHAPE, RecordingFacts, parse_time
from cassettes_app.config import AnalysisConfig
from cassettes_app.formats.base import OWN_FIELD as OWN_TIME
from cassettes_app.formats.base import find_model
from cassettes_app.keys import (
    DEFAULT_KEY_LENGTH,
    canonical_request,
    is_key_shape,
    key_line,
    mismatch_variants,
    recompute_key,
    scheme_keys,
)
from cassettes_app.parsed import ParsedRecording
from cassettes_app.text import clipped

OWN_MODEL = "the recording's own `model` field"

# Characters of a recomputed canonical request kept in the evidence of a key that differs.
CANONICAL_CHARS = 4_000


def recording_facts(
    config: AnalysisConfig,
    rel: str,
    size: int,
    sha: str,
    rec: ParsedRecording,
    load_doc: Callable[[], Any],
    data: bytes | None = None,
) -> RecordingFacts:
    """Compact facts of one recording: key comparison, model, times, size."""
    volatile = tuple(config.volatile_fields)
    first = rec.interactions[0] if rec.interactions else None
    payload = first.request_body.json if first is not None else None
    recomputed = None
    canonical = None
    labels: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    # Only the cassette task's {key, request, ...} files are keyed by the canonical request.
    if rec.format == "cassette_json" and rec.key is not None and isinstance(payload, dict):
        shaped = is_key_shape(rec.key)
        length = len(rec.key) if shaped else DEFAULT_KEY_LENGTH
        present = tuple(v for v in volatile if v in payload)
        try:
            ascii_likely = data is not None and ascii_json(data)
            recomputed = recompute_key(payload, volatile, length, ascii_likely=ascii_likely)
        except (TypeError, ValueError, RecursionError):
            recomputed = None
        if recomputed is not None and recomputed != rec.key:
            canonical = clipped(canonical_request(payload, volatile), CANONICAL_CHARS)
            if not shaped:
                labels = ("stored key is not 8-64 hex digits, so no sha256 prefix",)
            else:
                doc = load_doc()
                variants = mismatch_variants(
                    payload, rec.key, volatile, doc if isinstance(doc, dict) else None
                )
                labels = tuple(v.label for v in variants)
                kept = tuple(
                    dict.fromkeys(
                        f for v in variants if v.kind in ("kept", "all_kept") for f in v.fields
                    )
                )
                also = tuple(
                    dict.fromkeys(f for v in variants if v.kind == "dropped" for f in v.fields)
                )
    schemes: tuple[tuple[str, str], ...] = ()
    if rec.key is not None and config.shape != "cassette":
        # The brief only shows a sample key: every scheme a hand-in may use is tried.
        doc = load_doc()
        schemes = scheme_keys(rec.key, payload, doc if isinstance(doc, dict) else None, volatile)
    embedded = 0
    if "turns" in rec.meta.get("extra_fields", ()):
        doc = load_doc()
        turns = doc.get("turns") if isinstance(doc, dict) else None
        embedded = len(turns) if isinstance(turns, list) else 1
    served = [rec.meta.get("payload_model"), *rec.meta.get("models", ())]
    raw_times = _raw_times(rec)
    times = [t for t in (parse_time(r) for r in dict.fromkeys(raw_times) if r) if t]
    return RecordingFacts(
        path=rel,
        format=rec.format,
        key=rec.key,
        recomputed_key=recomputed,
        key_labels=labels,
        kept_fields=kept,
        also_dropped=also,
        volatile_present=present,
        key_schemes=schemes,
        key_line=key_line(data, rec.key) if rec.key is not None else None,
        canonical=canonical,
        model=rec.model,
        model_source=rec.meta.get("model_source") or (OWN_MODEL if rec.model else None),
        served_models=tuple(dict.fromkeys(m for m in served if isinstance(m, str) and m)),
        recorded_at=own_time(rec),
        time_source=rec.meta.get("time_source") or (OWN_TIME if rec.recorded_at else None),
        oldest=min(times) if times else None,
        newest=max(times) if times else None,
        size=size,
        sha256=sha,
        interactions=len(rec.interactions),
        embedded_turns=embedded,
    )


def _raw_times(rec: ParsedRecording) -> list[str | None]:
    return [
        rec.recorded_at,
        *(i.recorded_at for i in rec.interactions),
        *rec.meta.get("times", ()),
    ]


def own_time(rec: ParsedRecording) -> str | None:
    """A recording's own time as the analysis reads it: its field, else the first time its
    interactions or payloads carry (a Date header, a `created`)."""
    return rec.recorded_at or next((r for r in _raw_times(rec) if r), None)


# A recording time at the top of a file of a shape no reader knows, in the usual spellings.
_TIME_FIELDS = ("recorded_at", "recordedAt", "created_at", "createdAt", "created", "timestamp")


def unknown_shape_facts(rel: str, size: int, sha: str, doc: Any) -> RecordingFacts:
    """The facts of a recording no reader knows: its model where a payload keeps one (any
    usual nesting), its time from a top-level time field; the rest unknown."""
    found = find_model(doc) if isinstance(doc, dict) else None
    raw = next(
        (doc[k] for k in _TIME_FIELDS if isinstance(doc, dict) and doc.get(k) is not None), None
    )
    when = parse_time(raw)
    return RecordingFacts(
        path=rel,
        format=UNKNOWN_SHAPE,
        model=found[0] if found else None,
        model_source=f"the file's `{found[1]}`" if found else None,
        recorded_at=str(raw) if raw is not None else None,
        time_source="a top-level time field" if when else None,
        oldest=when,
        newest=when,
        size=size,
        sha256=sha,
    )
