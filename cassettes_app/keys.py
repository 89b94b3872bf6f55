"""The cassette task's canonical request key, and why a stored key might not match it."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from cassettes_app.jsonvalues import compact_json

__all__ = [
    "DEFAULT_KEY_LENGTH",
    "NO_VARIANT",
    "Variant",
    "canonical_request",
    "drop_everywhere",
    "explain_mismatch",
    "is_key_shape",
    "mismatch_variants",
    "recompute_key",
]

DEFAULT_KEY_LENGTH = 16
MIN_KEY_LENGTH = 8
MAX_KEY_LENGTH = 64
NO_VARIANT = "hand-edited or another normalisation"

_HEX = re.compile(r"[0-9a-fA-F]{8,64}")

_KEY_FIELD = re.compile(rb'"key"\s*:\s*"')


def _drop_top(payload: Any, volatile_fields: Iterable[str]) -> Any:
    """Drop volatile keys at the top level only; nested ids are part of the key."""
    if not isinstance(payload, Mapping):
        return payload
    drop = set(volatile_fields)
    return {k: v for k, v in payload.items() if k not in drop}


def drop_everywhere(value: Any, volatile_fields: Iterable[str]) -> Any:
    """Drop volatile keys at every depth (the mistake that breaks multi-turn keys)."""
    drop = frozenset(volatile_fields)

    def walk(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {k: walk(v) for k, v in node.items() if k not in drop}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value)


def canonical_request(
    payload: Any, volatile_fields: Iterable[str], *, ascii_likely: bool = False
) -> str:
    """The canonical text of a request: top-level volatile keys dropped, sorted, compact.

    The text is json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False), the brief's definition, whichever encoder writes it (see
    `_canonical_bytes`).
    """
    return _canonical_bytes(payload, volatile_fields, ascii_likely=ascii_likely).decode(
        "utf-8", "surrogatepass"
    )


def _canonical_bytes(
    payload: Any, volatile_fields: Iterable[str], *, ascii_likely: bool = False
) -> bytes:
    """`canonical_request` as UTF-8 (lone surrogates kept, as the key's hash takes them).

    orjson writes it when it writes exactly what json.dumps would (`compact_json`): thirty
    times faster on a request's long texts. Else json: `ascii_likely` (say, the payload came
    from a file `bodies.ascii_json` holds for) tries its ASCII encoder first, twice as fast
    as the other, whose text is the same whenever it escaped no character as \\uXXXX (a
    non-ASCII character or DEL).
    """
    value = _drop_top(payload, volatile_fields)
    fast = compact_json(value, sort_keys=True)
    if fast is not None:
        return fast
    if ascii_likely:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        if "\\u" not in text:
            return text.encode("ascii")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _length(length: int) -> int:
    return max(MIN_KEY_LENGTH, min(MAX_KEY_LENGTH, length))


def recompute_key(
    payload: Any,
    volatile_fields: Iterable[str],
    length: int = DEFAULT_KEY_LENGTH,
    *,
    ascii_likely: bool = False,
) -> str:
    """First `length` hex (8..64) of sha256 of the UTF-8 canonical request."""
    data = _canonical_bytes(payload, volatile_fields, ascii_likely=ascii_likely)
    return hashlib.sha256(data).hexdigest()[: _length(length)]


def is_key_shape(key: str) -> bool:
    """True for 8 to 64 hex digits, the only keys a sha256 prefix can be."""
    return bool(_HEX.fullmatch(key))


def _dumps(value: Any, **options: Any) -> str:
    settings: dict[str, Any] = {
        "sort_keys": True,
        "separators": (",", ":"),
        "ensure_ascii": False,
    }
    settings.update(options)
    return json.dumps(value, **settings)


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


class Variant(NamedTuple):
    """One normalisation variant that reproduces a stored key."""

    label: str  # human text, e.g. "matches if `created` is kept"
    kind: str  # kept | all_kept | newline | separators | ascii | unsorted | deep | dropped | ...
    fields: tuple[str, ...] = ()  # the request fields the variant is about


def explain_mismatch(
    payload: Any,
    stored_key: str,
    volatile_fields: Iterable[str],
    *,
    document: Mapping[str, Any] | None = None,
) -> list[str]:
    """Labels of the simple normalisation variants that reproduce `stored_key`; [] when none.

    `document` is the whole cassette file, for the "hashed the file, not the request" variant.
    """
    return [v.label for v in mismatch_variants(payload, stored_key, volatile_fields, document)]


def _variants(
    payload: Any, volatile: tuple[str, ...], document: Mapping[str, Any] | None
) -> list[tuple[Variant, Callable[[], str]]]:
    """Each way a candidate may have hashed the request, as (Variant, thunk of the text)."""
    base = _drop_top(payload, volatile)
    present = [name for name in volatile if isinstance(payload, Mapping) and name in payload]

    # Each variant is (Variant, thunk producing the hashed text); thunks keep unused ones free.
    variants: list[tuple[Variant, Callable[[], str]]] = []
    for name in present:
        kept = tuple(v for v in volatile if v != name)
        variants.append(
            (
                Variant(f"matches if `{name}` is kept", "kept", (name,)),
                functools.partial(canonical_request, payload, kept),
            )
        )
    if len(present) > 1:
        variants.append(
            (
                Variant(
                    f"matches if all volatile fields are kept ({_quoted(present)})",
                    "all_kept",
                    tuple(present),
                ),
                lambda: canonical_request(payload, ()),
            )
        )
    variants += [
        (
            Variant("matches with a trailing newline after the JSON", "newline"),
            lambda: _dumps(base) + "\n",
        ),
        (
            Variant('matches with json.dumps default separators (", ", ": ")', "separators"),
            lambda: _dumps(base, separators=(", ", ": ")),
        ),
        (
            Variant("matches with ensure_ascii=True", "ascii"),
            lambda: _dumps(base, ensure_ascii=True),
        ),
        (
            Variant("matches without sort_keys (keys in file order)", "unsorted"),
            lambda: _dumps(base, sort_keys=False),
        ),
        (
            Variant(
                "matches if volatile keys are dropped at every depth (nested ids too)",
                "deep",
                volatile,
            ),
            lambda: _dumps(drop_everywhere(payload, volatile)),
        ),
    ]
    if isinstance(payload, Mapping):
        # A field the candidate normalises that the assignment does not list (docs.replay_notes).
        for name in payload:
            if name in volatile or not isinstance(name, str):
                continue
            extra = (*volatile, name)
            variants.append(
                (
                    Variant(f"matches if `{name}` is also dropped", "dropped", (name,)),
                    functools.partial(canonical_request, payload, extra),
                )
            )
    if isinstance(document, Mapping):
        whole = {k: v for k, v in document.items() if k != "key"}
        variants += [
            (
                Variant(
                    "matches if the whole file (less `key`) is hashed, not the request only",
                    "whole_file",
                ),
                lambda: _dumps(whole),
            ),
            (
                Variant(
                    "matches if the whole file (less `key`, volatile keys dropped) is hashed",
                    "whole_file",
                ),
                lambda: _dumps(_drop_top(whole, volatile)),
            ),
        ]
    return variants


def mismatch_variants(
    payload: Any,
    stored_key: str,
    volatile_fields: Iterable[str],
    document: Mapping[str, Any] | None = None,
) -> list[Variant]:
    """The variants of `explain_mismatch`, with what kind of variant and which fields."""
    volatile = tuple(dict.fromkeys(volatile_fields))
    stored = stored_key.strip()
    if not is_key_shape(stored) or payload is None:
        return []
    length = len(stored)
    wanted = stored.lower()
    variants = _variants(payload, volatile, document)

    try:
        canonical = canonical_request(payload, volatile)
    except (TypeError, ValueError, RecursionError):
        return []
    # A variant that yields the same text as the canonical form (or an earlier variant)
    # explains nothing new, e.g. ensure_ascii on a pure-ASCII request.
    tried = {canonical}
    found: list[Variant] = []
    for variant, make in variants:
        try:
            text = make()
        except (TypeError, ValueError, RecursionError):
            continue
        if text in tried:
            continue
        tried.add(text)
        if _digest(text)[:length] == wanted:
            found.append(variant)
    # Cheap checks on the digest itself rather than on the text that was hashed.
    digest = _digest(canonical)
    if length < 64 and digest[-length:] == wanted:
        found.append(Variant(f"matches the last {length} hex of the sha256, not the first", "tail"))
    if digest[:length] == wanted and stored != wanted:
        found.append(
            Variant("matches ignoring letter case (stored key has upper-case hex)", "case")
        )
    return found


# --------------------------------------------------------------------------- key schemes
#
# The cassette brief prescribes its key (BRIEF_SCHEME). Other briefs only show a sample
# (the run-twice brief's `key_for`: a hash of model + prompt + params), and a hand-in may
# key its fixtures its own way: these are the schemes tried, each a (label, text) pair,
# hashed with sha256 and compared with a stored key's length of hex.

BRIEF_SCHEME = "the brief's canonical request (volatile fields dropped, sorted, compact JSON)"
KEY_FOR_SCHEME = "the run-twice brief's key_for: model + prompt + params as sorted JSON"


def _key_for_fields(document: Mapping[str, Any] | None) -> tuple[Any, Any, Any] | None:
    """(model, prompt, params) when the fixture stores them (prompt may be `text`)."""
    if not isinstance(document, Mapping) or "model" not in document:
        return None
    prompt = document.get("prompt", document.get("text"))
    if prompt is None:
        return None
    return document["model"], prompt, document.get("params", {})


def _scheme_texts(
    payload: Any, document: Mapping[str, Any] | None, volatile: tuple[str, ...]
) -> list[tuple[str, Callable[[], str]]]:
    texts: list[tuple[str, Callable[[], str]]] = []
    if isinstance(payload, Mapping):
        texts += [
            (BRIEF_SCHEME, lambda: canonical_request(payload, volatile)),
            (
                "the recorded request as json.dumps(sort_keys=True) (default separators)",
                lambda: _dumps(payload, separators=(", ", ": ")),
            ),
            ("the recorded request, sorted compact JSON, nothing dropped", lambda: _dumps(payload)),
            (
                "the recorded request, compact JSON in file order",
                lambda: _dumps(payload, sort_keys=False),
            ),
        ]
    fields = _key_for_fields(document)
    if fields is not None:
        model, prompt, params = fields
        named = {"model": model, "prompt": prompt, "params": params}
        texts += [
            (KEY_FOR_SCHEME, lambda: _dumps(named, separators=(", ", ": "))),
            (f"{KEY_FOR_SCHEME} (compact)", lambda: _dumps(named)),
            (
                "model, prompt and params (sorted JSON) joined by newlines",
                lambda: "\n".join((str(model), str(prompt), _dumps(params))),
            ),
            (
                "model, prompt and params (sorted JSON) joined by `|`",
                lambda: "|".join((str(model), str(prompt), _dumps(params))),
            ),
        ]
    if isinstance(document, Mapping):
        whole = {k: v for k, v in document.items() if k != "key"}
        texts.append(("the whole file less `key`, sorted compact JSON", lambda: _dumps(whole)))
    return texts


def scheme_keys(
    stored_key: str,
    payload: Any,
    document: Mapping[str, Any] | None,
    volatile_fields: Iterable[str],
) -> tuple[tuple[str, str], ...]:
    """(scheme label, key under it) for every scheme computable for this recording, each key
    as long as the stored one; () when the stored key cannot be a sha256 prefix."""
    stored = stored_key.strip()
    if not is_key_shape(stored):
        return ()
    volatile = tuple(dict.fromkeys(volatile_fields))
    found: list[tuple[str, str]] = []
    for label, make in _scheme_texts(payload, document, volatile):
        try:
            found.append((label, _digest(make())[: len(stored)]))
        except (TypeError, ValueError, RecursionError):
            continue
    return tuple(found)


def key_line(data: bytes | None, stored_key: str) -> int | None:
    """The 1-based line where a JSON recording stores `"key": "<stored_key>"` (the evidence
    links there), or None when it cannot be found in the first MiB."""
    if not data:
        return None
    head = data[: 1 << 20]
    value = stored_key.encode() + b'"'
    # One compiled pattern for every file, then the key compared as bytes: a pattern per key
    # was compiled per file (re's cache holds 512), which cost more than the search. The
    # field's spaces match one way only, so the first field that holds the key is the
    # first match the per-key pattern would give.
    found = _KEY_FIELD.search(head)
    while found and not head.startswith(value, found.end()):
        found = _KEY_FIELD.search(head, found.start() + 1)
    return head.count(b"\n", 0, found.start()) + 1 if found else None
