"""Content-addressed body storage: each distinct body is stored once."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Model

from cassettes_app.secrets import TextProfile
from submissions.models import Blob
from submissions.redact import redact_text

# Bodies up to this size live in the database row; larger ones go through the storage API.
INLINE_MAX = 64 * 1024
# Queued inline bytes that trigger a write, whatever the count: keeps memory flat.
PENDING_MAX_BYTES = 4 * 1024 * 1024
# Rows per INSERT statement of bulk_insert.
CHUNK = 32
# Digests of blobs already queued that the writer remembers. Forgetting one costs at most
# a second INSERT that the database ignores; remembering all would grow with the archive.
SEEN_MAX = 65_536


def bulk_insert(
    model: type[Model], objs: Sequence[Model], chunk: int = CHUNK, **kwargs: Any
) -> None:
    """`bulk_create` in INSERTs of `chunk` rows, the rest in halving sizes (16, 8, ... 1).

    SQLite keeps each cached prepared statement together with the parameters last bound to
    it, and a multi-row INSERT is a distinct statement for every row count: batches of
    any size would each leave one behind, holding their bodies. Power-of-two row counts
    keep that to a handful of statements. One transaction for all of it.
    """
    if not objs:
        return
    manager = model._default_manager
    whole = len(objs) - len(objs) % chunk
    with transaction.atomic(savepoint=False):
        if whole:
            manager.bulk_create(objs[:whole], batch_size=chunk, **kwargs)
        pos, size = whole, chunk
        while pos < len(objs):
            while size > len(objs) - pos:
                size //= 2
            manager.bulk_create(objs[pos : pos + size], batch_size=size, **kwargs)
            pos += size


def body_bytes(data: bytes, *, is_binary: bool, profile: TextProfile | None = None) -> bytes:
    """The bytes we keep for a body: text bodies pass through the secret redactor first.

    `profile` is `secrets.text_profile` of a text holding the body literally (its file, see
    `FileReport.body_profile`): the redactor skips the rules it rules out, and an empty one
    (a secret-free file) needs no redaction at all.
    """
    if is_binary or not data:
        return data
    if profile is not None and profile.empty:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    redacted = redact_text(text, profile=profile)
    return data if redacted == text else redacted.encode("utf-8")


class BlobWriter:
    """Collects blobs and writes them in bulk; the same content is written once."""

    def __init__(self, batch: int = 500, max_bytes: int = PENDING_MAX_BYTES) -> None:
        self.batch = batch
        self.max_bytes = max_bytes
        self.pending: dict[str, Blob] = {}
        self.pending_bytes = 0
        self.seen: set[bytes] = set()  # raw sha256 digests of queued blobs (see SEEN_MAX)

    def add(
        self,
        data: bytes,
        *,
        content_type: str = "",
        is_binary: bool = False,
        truncated: bool = False,
        profile: TextProfile | None = None,
    ) -> str | None:
        """Queue a body (redacted when text) and return its sha256; None for an empty body.

        `profile`: see `body_bytes`.
        """
        data = body_bytes(data, is_binary=is_binary, profile=profile)
        if not data:
            return None
        digest = hashlib.sha256(data).digest()
        sha = digest.hex()
        if digest in self.seen:
            return sha
        if len(self.seen) >= SEEN_MAX:
            self.seen.clear()
        self.seen.add(digest)
        blob = Blob(
            sha256=sha,
            size=len(data),
            content_type=(content_type or "")[:200],
            is_binary=is_binary,
            truncated=truncated,
        )
        if len(data) <= INLINE_MAX:
            blob.data = data
            self.pending_bytes += len(data)
        else:
            name = f"blobs/{sha[:2]}/{sha[2:4]}/{sha}"
            if not default_storage.exists(name):
                default_storage.save(name, ContentFile(data))
            blob.storage_name = name
        self.pending[sha] = blob
        if len(self.pending) >= self.batch or self.pending_bytes >= self.max_bytes:
            self.flush()
        return sha

    def flush(self) -> None:
        """Insert queued blobs; ones another submission already stored are skipped."""
        if self.pending:
            bulk_insert(Blob, list(self.pending.values()), ignore_conflicts=True)
            self.pending.clear()
            self.pending_bytes = 0


def blob_read(blob: Blob, limit: int | None = None) -> bytes:
    """A blob's bytes (at most `limit`)."""
    if blob.data is not None:
        data = bytes(blob.data)
        return data if limit is None else data[:limit]
    with default_storage.open(blob.storage_name, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit)
