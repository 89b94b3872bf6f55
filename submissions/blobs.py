"""Content-addressed body storage: each distinct body is stored once."""

from __future__ import annotations

import hashlib

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from submissions.models import Blob
from submissions.redact import redact_text

# Bodies up to this size live in the database row; larger ones go through the storage API.
INLINE_MAX = 64 * 1024


def body_bytes(data: bytes, *, is_binary: bool) -> bytes:
    """The bytes we keep for a body: text bodies pass through the secret redactor first."""
    if is_binary or not data:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    redacted = redact_text(text)
    return data if redacted == text else redacted.encode("utf-8")


class BlobWriter:
    """Collects blobs and writes them in bulk; the same content is written once."""

    def __init__(self, batch: int = 500) -> None:
        self.batch = batch
        self.pending: dict[str, Blob] = {}
        self.seen: set[str] = set()

    def add(
        self,
        data: bytes,
        *,
        content_type: str = "",
        is_binary: bool = False,
        truncated: bool = False,
    ) -> str | None:
        """Queue a body (redacted when text) and return its sha256; None for an empty body."""
        data = body_bytes(data, is_binary=is_binary)
        if not data:
            return None
        sha = hashlib.sha256(data).hexdigest()
        if sha in self.seen:
            return sha
        self.seen.add(sha)
        blob = Blob(
            sha256=sha,
            size=len(data),
            content_type=(content_type or "")[:200],
            is_binary=is_binary,
            truncated=truncated,
        )
        if len(data) <= INLINE_MAX:
            blob.data = data
        else:
            name = f"blobs/{sha[:2]}/{sha[2:4]}/{sha}"
            if not default_storage.exists(name):
                default_storage.save(name, ContentFile(data))
            blob.storage_name = name
        self.pending[sha] = blob
        if len(self.pending) >= self.batch:
            self.flush()
        return sha

    def flush(self) -> None:
        """Insert queued blobs; ones another submission already stored are skipped."""
        if self.pending:
            Blob.objects.bulk_create(self.pending.values(), ignore_conflicts=True)
            self.pending.clear()


def blob_read(blob: Blob, limit: int | None = None) -> bytes:
    """A blob's bytes (at most `limit`)."""
    if blob.data is not None:
        data = bytes(blob.data)
        return data if limit is None else data[:limit]
    with default_storage.open(blob.storage_name, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit)
