"""Recorded response ids: the ids a provider issued once, per response, read from recordings.

A provider issues each response its own id (`chatcmpl-…`, `resp_…`, `msg_…`, Gemini's
`responseId`) and each HTTP request its own request id. The same id in two candidates'
recordings means one copied the other's recording, however renamed or re-indented: this
module is the fingerprint `cohort.recordings_unique` compares (in submissions, which holds
the cohort). Parsed interactions in, ids out; nothing here knows of rows or candidates.

What counts, conservatively (a wrong match accuses a candidate of copying):

- the response body's own id: `id` starting `chatcmpl-` (OpenAI chat), `resp_` (OpenAI
  Responses), `msg_` (Anthropic, `msg_bdrk_` through Bedrock), and Gemini's `responseId`;
  a folded event stream counts as its folded body, a JSON array as its elements;
- the response headers `x-request-id` (OpenAI `req_…`), `request-id` (Anthropic `req_…`)
  and `x-amzn-requestid` (Bedrock), which the provider issues per request.

Not counted: request bodies (a `previous_response_id` restates an earlier response), ids
nested deeper (tool call ids are short and model-made), headers that stay the same across
requests (`openai-organization`, `anthropic-organization-id`), any header named a
credential (`secrets.CREDENTIAL_HEADERS`), values that do not look issued (under 16
characters, no digit, or fewer than 8 distinct characters: `chatcmpl-123`, `req_test`),
and the example ids of the providers' documentation, which hand-made fixtures copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from cassettes_app.parsed import ParsedInteraction
from cassettes_app.secrets import is_credential_header

__all__ = ["MAX_VALUE", "ResponseIdFound", "response_ids"]

MAX_VALUE = 200  # characters: a longer value is no provider's id and is not kept

_BODY_PREFIXES = ("chatcmpl-", "resp_", "msg_")
_HEADERS = frozenset({"x-request-id", "request-id", "x-amzn-requestid"})
_MIN_LENGTH = 16
_MIN_DISTINCT = 8
# A JSON array body (unfolded stream chunks) is read this far.
_MAX_ELEMENTS = 50
# Example ids from the providers' API references, found in hand-written fixtures.
_DOCUMENTED = frozenset(
    {
        "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    }
)


@dataclass(frozen=True, slots=True)
class ResponseIdFound:
    """One recorded id: its value, and where it was (`body.id`, `header:request-id`, ...)."""

    value: str
    kind: str


def _issued(value: Any, prefix: str = "") -> TypeGuard[str]:
    """A value that looks issued by a provider, not typed by a person (its random part, the
    part after `prefix`, has a digit and varied characters)."""
    return (
        isinstance(value, str)
        and _MIN_LENGTH <= len(value) <= MAX_VALUE
        and value not in _DOCUMENTED
        and any(ch.isdigit() for ch in value)
        and len(set(value.removeprefix(prefix))) >= _MIN_DISTINCT
        and value.isprintable()
        and " " not in value
    )


def _prefix(value: Any) -> str:
    """The listed prefix `value` starts with, or ""."""
    if isinstance(value, str):
        return next((p for p in _BODY_PREFIXES if value.startswith(p)), "")
    return ""


def _body_ids(body: Any) -> Iterator[ResponseIdFound]:
    objects = body[:_MAX_ELEMENTS] if isinstance(body, list) else [body]
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        value = obj.get("id")
        prefix = _prefix(value)
        if prefix and _issued(value, prefix):
            yield ResponseIdFound(value, "body.id")
        value = obj.get("responseId")
        if _issued(value):
            yield ResponseIdFound(value, "body.responseId")


def _header_ids(headers: Iterable[tuple[str, str]]) -> Iterator[ResponseIdFound]:
    for name, value in headers:
        lname = str(name).strip().lower()
        # The header list holds no credential name; checked all the same, so that no
        # change to either list can ever store a credential as a fingerprint.
        if lname in _HEADERS and not is_credential_header(lname) and _issued(value):
            yield ResponseIdFound(value, f"header:{lname}")


def response_ids(interactions: Iterable[ParsedInteraction]) -> Iterator[ResponseIdFound]:
    """The recorded response ids of these interactions, in order, each value once."""
    seen: set[str] = set()
    for inter in interactions:
        if inter.extra.get("synthetic"):
            continue  # rebuilt from an agent log by us: no response the provider sent
        found = [*_body_ids(inter.response_body.json), *_header_ids(inter.response_headers)]
        for item in found:
            if item.value not in seen:
                seen.add(item.value)
                yield item
