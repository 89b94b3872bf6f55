"""Rendered HTML fragments kept in the `fragments` cache, under one key scheme.

A fragment is cached under what it was built from: a namespace, the object it shows, and a
signature, any repr-able value that changes whenever the fragment would (the jobs' states
for a submission's evidence, the table generation and query for a comparison). Nothing is
ever deleted: a change makes a new signature, and the old entry ages out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import caches

T = TypeVar("T")


def fragment_key(namespace: str, pk: object, signature: object) -> str:
    digest = hashlib.sha256(repr(signature).encode()).hexdigest()[:32]
    return f"cr:{namespace}:{pk}:{digest}"


def fragment_cached(
    namespace: str, pk: object, signature: object, build: Callable[[], T], *, ttl: int
) -> T:
    """`build()`'s value for this signature, built once until it ages out."""
    key = fragment_key(namespace, pk, signature)
    value = caches["fragments"].get(key)
    if value is None:
        value = build()
        caches["fragments"].set(key, value, ttl)
    return value
