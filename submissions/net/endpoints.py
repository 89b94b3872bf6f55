"""The team's model endpoints for live spot checks, read from `SPOT_CHECK_ENDPOINTS`.

The setting is a JSON list, one object per endpoint:

    [{"name": "openai", "base_url": "https://api.openai.com/v1", "api": "openai-chat",
      "key_env": "OPENAI_API_KEY",
      "caps": {"check_calls": 3, "check_tokens": 20000,
               "month_calls": 200, "month_tokens": 2000000}}]

The key itself is never in the setting: `key_env` NAMES the environment variable that holds
it, read only at the moment of a call (`endpoint_key`), so it is in no settings dump, error
page, database row, log or report. Pure: no models, no HTTP.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

SETTING = "SPOT_CHECK_ENDPOINTS"
# The API families a spot check can re-ask, and the path each one posts to.
APIS = {"openai-chat": "/chat/completions", "anthropic-messages": "/messages"}
# Which family of recorded exchange (cassettes_app.providers) each API re-asks.
PROVIDER_OF_API = {"openai-chat": "openai-chat", "anthropic-messages": "anthropic"}
DEFAULT_CAPS = {
    "check_calls": 3,
    "check_tokens": 20_000,
    "month_calls": 100,
    "month_tokens": 1_000_000,
}
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
_KEYS = {"name", "base_url", "api", "key_env", "caps"}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One allowed model endpoint and its spending caps."""

    name: str
    base_url: str
    api: str
    key_env: str  # the NAME of the environment variable holding the key, never the key
    check_calls: int
    check_tokens: int
    month_calls: int
    month_tokens: int

    @property
    def url(self) -> str:
        """Where a chat request of this API family is posted."""
        return self.base_url.rstrip("/") + APIS[self.api]

    @property
    def provider(self) -> str:
        """The recorded exchanges this endpoint can re-ask (a provider id)."""
        return PROVIDER_OF_API[self.api]


class EndpointKeyMissing(Exception):
    """The environment variable an endpoint names holds no key on this host."""


def endpoint_key(endpoint: Endpoint, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint's key, read from its environment variable now (never stored)."""
    key = (os.environ if environ is None else environ).get(endpoint.key_env, "").strip()
    if not key:
        raise EndpointKeyMissing(
            f"the environment variable {endpoint.key_env} that endpoint {endpoint.name} names "
            "holds no key on this host"
        )
    return key


def _fail(where: str, message: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{SETTING}{where} {message}")


def _caps(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return dict(DEFAULT_CAPS)
    if not isinstance(raw, dict):
        raise _fail(f"{where}.caps", "must be an object")
    unknown = sorted(set(raw) - set(DEFAULT_CAPS))
    if unknown:
        raise _fail(f"{where}.caps.{unknown[0]}", f"is not a cap ({', '.join(DEFAULT_CAPS)})")
    caps = dict(DEFAULT_CAPS)
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _fail(f"{where}.caps.{name}", f"must be a whole number, got {value!r}")
        caps[name] = value
    return caps


def _endpoint(raw: Any, where: str) -> Endpoint:
    if not isinstance(raw, dict):
        raise _fail(where, "must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"is not a field ({', '.join(sorted(_KEYS))})")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _fail(f"{where}.name", f"must be a short lowercase name, got {name!r}")
    base_url = raw.get("base_url")
    if not isinstance(base_url, str) or not re.match(r"https?://[^/\s]+", base_url):
        raise _fail(f"{where}.base_url", f"must be an http(s) URL, got {base_url!r}")
    if "@" in base_url.split("/", 3)[2]:
        raise _fail(f"{where}.base_url", "must not carry credentials (use key_env)")
    api = raw.get("api")
    if api not in APIS:
        raise _fail(f"{where}.api", f"must be one of {', '.join(APIS)}, got {api!r}")
    key_env = raw.get("key_env")
    if not isinstance(key_env, str) or not _ENV_NAME.fullmatch(key_env):
        # Not echoed: someone may have pasted the key itself here.
        raise _fail(f"{where}.key_env", "must be the NAME of an environment variable")
    return Endpoint(name, base_url, api, key_env, **_caps(raw.get("caps"), where))


def parse_endpoints(raw: str | None) -> tuple[Endpoint, ...]:
    """The endpoints a setting's JSON text lists; ImproperlyConfigured naming the field."""
    if raw is None or not raw.strip():
        return ()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _fail(
            "", f"must be JSON ({exc.__class__.__name__} at char {getattr(exc, 'pos', '?')})"
        ) from None
    if not isinstance(data, list):
        raise _fail("", "must be a JSON list of endpoint objects")
    endpoints = tuple(_endpoint(item, f"[{n}]") for n, item in enumerate(data))
    names = [e.name for e in endpoints]
    for n, name in enumerate(names):
        if name in names[:n]:
            raise _fail(f"[{n}].name", f"repeats the endpoint name {name!r}")
    return endpoints
