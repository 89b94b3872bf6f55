"""A lock's pins looked up on the index (PEP 691 JSON), not resolved again.

A lock (`uv.lock`, `poetry.lock`, `pylock.toml`, `Pipfile.lock`) is already the whole set:
each package at one version. What the fetch needs is each version's wheels with their
URLs and hashes, which the index's JSON page lists; a resolver run adds nothing but time.
The URLs are the index's answer, never the lock's. An index that does not speak PEP 691
raises NotJson, and the caller resolves with uv instead.
"""

from __future__ import annotations

import re
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urljoin

import httpx
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    canonicalize_version,
    parse_wheel_filename,
)

from submissions.deps.resolve import Pin, Resolved, ResolveFailed, WheelRef

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
_SHA256 = re.compile(r"[0-9a-f]{64}")
PARALLEL = 4
TRIES = 3
MAX_PAGE_BYTES = 32 * 2**20  # a project page with thousands of releases is a few MB


class NotJson(RuntimeError):
    """The index answered without PEP 691 JSON."""


def locked_pins(requirements: list[str]) -> list[tuple[str, str]] | None:
    """(name, version) of each `name==version` requirement; None if any is not one pin."""
    pins = []
    for text in requirements:
        req = Requirement(text)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            return None
        if req.marker is not None or req.extras:
            return None  # a lock entry carries neither; leave such a set to the resolver
        pins.append((req.name, specs[0].version))
    return pins


def _get(client: httpx.Client, url: str) -> httpx.Response:
    """One GET, tried once more on a transport error (a reset stream, a closed connection)."""
    for attempt in range(1, TRIES + 1):
        try:
            return client.get(url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.01"})
        except httpx.TransportError:
            if attempt == TRIES:
                raise
    raise AssertionError("unreachable")


def _page(client: httpx.Client, index_url: str, name: str) -> dict[str, Any]:
    url = f"{index_url.rstrip('/')}/{canonicalize_name(name)}/"
    response = _get(client, url)
    if response.status_code == 404:
        raise ResolveFailed(f"{name} was not found in the package registry ({index_url})")
    if response.status_code != 200:
        busy = response.status_code >= 500 or response.status_code == 429
        raise ResolveFailed(
            f"{name}: the index answered {response.status_code} ({url})", infrastructure=busy
        )
    if not response.headers.get("content-type", "").startswith(JSON_TYPE):
        raise NotJson(url)
    if len(response.content) > MAX_PAGE_BYTES:
        raise ResolveFailed(f"{name}: the index's page is over {MAX_PAGE_BYTES} bytes")
    return {"url": str(response.url), "data": response.json()}


def _wheels(
    name: str, version: str, page: dict[str, Any], python: str | None = None
) -> tuple[WheelRef, ...]:
    want = canonicalize_version(version)
    out = []
    for item in page["data"].get("files") or []:
        filename = item.get("filename") or ""
        sha = (item.get("hashes") or {}).get("sha256") or ""
        # A yanked file stays selectable for an exact pin (PEP 592): a lock is one.
        if not filename.endswith(".whl") or not _SHA256.fullmatch(sha):
            continue
        if not _python_ok(item.get("requires-python"), python):
            continue
        try:
            _, wheel_version, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if canonicalize_version(str(wheel_version)) != want:
            continue
        size = item.get("size")
        url = urljoin(page["url"], item.get("url") or "")
        out.append(WheelRef(filename, url, size if isinstance(size, int) else None, sha))
    if not out:
        raise ResolveFailed(
            f"{name}=={version} has no wheels on the index (sdists are never built)"
        )
    return tuple(out)


def _python_ok(requires: Any, python: str | None) -> bool:
    if not python or not isinstance(requires, str) or not requires.strip():
        return True
    try:
        return SpecifierSet(requires).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True  # uv would judge it; a garbled field does not drop the file


def lookup(
    pins: list[tuple[str, str]], *, index_url: str, timeout: float, python: str | None = None
) -> Resolved:
    """Each pin's wheels from the index's JSON pages; ResolveFailed or NotJson says why not."""
    started = time.monotonic()
    transport = httpx.HTTPTransport(verify=ssl.create_default_context(), retries=2, http2=True)
    with (
        httpx.Client(
            timeout=httpx.Timeout(timeout, connect=5.0),
            follow_redirects=True,
            trust_env=False,
            transport=transport,
        ) as client,
        ThreadPoolExecutor(PARALLEL) as pool,
    ):
        try:
            pages = list(pool.map(lambda pin: _page(client, index_url, pin[0]), pins))
        except httpx.HTTPError as exc:
            raise ResolveFailed(
                f"the index could not be reached: {type(exc).__name__}: {exc}",
                infrastructure=True,
            ) from None
    resolved = [
        Pin(name, version, _wheels(name, version, page, python))
        for (name, version), page in zip(pins, pages, strict=True)
    ]
    return Resolved(resolved, time.monotonic() - started)
