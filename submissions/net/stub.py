"""A client for a candidate's stub: the outbound guard's client with the trace caps."""

from __future__ import annotations

from collections.abc import Iterable

from submissions.net.outbound import SafeClient


def stub_client(
    allow: Iterable[str] | None,
    timeout: float,
    max_bytes: int,
    retries: int,
    backoff: float,
    max_connections: int,
) -> SafeClient:
    """A guarded client for one stub; ValueError names a malformed allowlist entry."""
    return SafeClient(
        allow,
        timeout=timeout,
        max_bytes=max_bytes,
        retries=retries,
        backoff=backoff,
        max_connections=max_connections,
    )
