"""Re-asking a team model endpoint one recorded chat request, through the outbound guard.

Host-side and candidate-free: the request is the recorded body, sent as JSON to the
endpoint's chat path with the team's key in the header the API family expects. The key
travels only in that header (the guard's client keeps no cookies, logs nothing and ignores
proxy variables); it is never in the URL, the body, or anything this module returns.
Streaming is switched off (`stream` dropped): the graded fields of a streamed answer are
those of the same answer unstreamed, and one JSON body is what the comparison reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from submissions.net.endpoints import Endpoint
from submissions.net.outbound import SafeClient

ANTHROPIC_VERSION = "2023-06-01"
MAX_ANSWER_BYTES = 2_000_000


@dataclass(slots=True)
class LiveAnswer:
    """What the endpoint answered: its status and body (parsed when JSON)."""

    status: int
    body: Any
    text: str


def _headers(endpoint: Endpoint, key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if endpoint.api == "anthropic-messages":
        headers |= {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    else:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def reask_body(request: dict[str, Any]) -> dict[str, Any]:
    """The recorded request as it is re-sent: unstreamed, otherwise untouched."""
    return {k: v for k, v in request.items() if k not in ("stream", "stream_options")}


def reask(
    *,
    endpoint: Endpoint,
    request: dict[str, Any],
    key: str,
    allow: Iterable[str],
    timeout: float,
) -> LiveAnswer:
    """Send one recorded request; OutboundRefused/OutboundError when it cannot be sent."""
    content = json.dumps(reask_body(request), ensure_ascii=False).encode()
    # No retry after a connection was made: a re-sent POST would be a second paid call.
    with SafeClient(allow, timeout=timeout, max_bytes=MAX_ANSWER_BYTES, retries=1) as client:
        response = client.post(endpoint.url, headers=_headers(endpoint, key), content=content)
    try:
        body = response.json()
    except ValueError:
        body = None
    return LiveAnswer(response.status, body, response.text)
