"""A repository fetched over HTTP(S) through the outbound guard, kept as a git bundle.

dulwich speaks the smart HTTP protocol; every request it makes goes through the outbound
guard's SafeClient (one DNS answer, checked against the private/loopback rules unless
`OUTBOUND_ALLOW` lists the address, pinned for the connection; same-host redirects only; a
wall-clock deadline; a byte cap). Plain `http` is taken only for hosts the allowlist names.
The pack that comes back is written, with the one ref fetched, as a bundle: the same file
an uploaded bundle is, so everything after this is the bundle path.

Credentials in the URL are taken out before anything is stored, logged or shown; they are
sent as an Authorization header to the repository's own host, never anywhere else.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from dulwich.client import AbstractHttpGitClient
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.object_store import ObjectStoreGraphWalker
from dulwich.refs import Ref

from submissions.intake.archive.core import ArchiveRejected
from submissions.intake.git.pack import GitLimits
from submissions.net.outbound import OutboundError, OutboundRefused, SafeClient, parse_allow

FETCH_TIMEOUT = 120.0  # seconds for one request, the pack included
# The user name sent with a token (hosts ignore it or want it); not a secret.
TOKEN_USER = "x-access-token"  # noqa: S105


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user and password, and the Authorization header they make (or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    bare = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return bare, "Basic " + base64.b64encode(pair.encode()).decode()


def check_scheme(url: str, allow: list[str]) -> None:
    """https anywhere; http only to a host the allowlist names (by name or network)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme != "http":
        raise ArchiveRejected("fetch_refused", f"the URL's scheme {parts.scheme!r} is not https")
    host = (parts.hostname or "").lower()
    entries = parse_allow(allow)
    if host in entries:
        return
    import ipaddress

    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is None or not any(
        not isinstance(e, str) and e.version == ip.version and ip in e for e in entries
    ):
        raise ArchiveRejected(
            "fetch_refused", f"plain http is taken only for hosts OUTBOUND_ALLOW lists ({host})"
        )


class _Response:
    """What dulwich reads of an HTTP response (urllib3's shape), from a capped SafeResponse."""

    def __init__(self, status: int, headers: dict[str, str], url: str, final: str) -> None:
        self.status = status
        self.headers = headers
        self.content_type = headers.get("Content-Type")
        self.redirect_location = final if final != url else ""

    def close(self) -> None:
        """Nothing is held open: the body was read whole."""


class _GuardedClient(AbstractHttpGitClient):
    """dulwich's smart-HTTP client, every request sent through the outbound guard."""

    def __init__(self, base_url: str, safe: SafeClient, auth: str | None, cap: int) -> None:
        # thin-pack is asked for (dulwich's server insists), but with no `have` sent a server
        # has no base to leave out: the pack is complete, and the guard refuses it otherwise.
        super().__init__(base_url)
        self._safe = safe
        self._auth = auth
        self._cap = cap

    def _http_request(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        data: bytes | Iterator[bytes] | None = None,
        raise_for_status: bool = True,
    ) -> tuple[Any, Callable[[int], bytes]]:
        sent = {"Accept-Encoding": "identity", "Pragma": "no-cache", **(headers or {})}
        if self._auth is not None:
            sent["Authorization"] = self._auth
        body = data if data is None or isinstance(data, bytes) else b"".join(data)
        method = "GET" if body is None else "POST"
        response = self._safe.request(method, url, headers=sent, content=body)
        if response.truncated:
            raise ArchiveRejected(
                "pack_too_large",
                f"the repository sent more than {self._cap} bytes (max_pack_bytes)",
            )
        if raise_for_status and response.status == 404:
            raise NotGitRepository
        if raise_for_status and response.status != 200:
            raise GitProtocolError(f"the server answered {response.status}")
        final = response.redirects[-1] if response.redirects else url
        headers_in = {k.title(): v for k, v in reversed(response.headers)}
        return _Response(response.status, headers_in, url, final), io.BytesIO(response.body).read


def token_authorization(token: str) -> str:
    """The Authorization header an access token is sent in: Basic, the token as password
    (the form git hosts take one in)."""
    return "Basic " + base64.b64encode(f"{TOKEN_USER}:{token}".encode()).decode()


def fetch_bundle(
    url: str,
    dest: Path,
    *,
    ref: str | None,
    allow: list[str],
    limits: GitLimits,
    timeout: float = FETCH_TIMEOUT,
    token: str = "",
    authorization: str = "",
) -> str:
    """Fetch one ref of the repository at `url` and write it to `dest` as a bundle.

    `token`, when given, is sent as the password of Basic authentication (the form hosts
    take an access token in); `authorization`, a whole header value kept from an earlier
    fetch, when no token is given. Returns the ref's full name. Raises ArchiveRejected with
    `fetch_refused` (the guard said no), `fetch_failed` (the network or the server did),
    `no_such_ref` or `pack_too_large`.
    """
    bare, auth = split_credentials(url)
    if token:
        auth = token_authorization(token)
    elif authorization and auth is None:
        auth = authorization
    check_scheme(bare, allow)
    cap = limits.max_pack_bytes
    pack = bytearray()

    def take(chunk: bytes) -> int:
        pack.extend(chunk)
        if len(pack) > cap:
            raise ArchiveRejected(
                "pack_too_large", f"the pack is over the limit of {cap} bytes (max_pack_bytes)"
            )
        return len(chunk)

    chosen: list[tuple[bytes, bytes]] = []

    def wants(refs: Mapping[Any, Any], depth: int | None = None) -> list[Any]:
        chosen.append(_pick(refs, ref))
        return [chosen[0][1]]

    safe = SafeClient(allow, timeout=timeout, max_bytes=cap + 2**16, retries=1)
    try:
        with safe:
            client = _GuardedClient(bare, safe, auth, cap)
            result = client.fetch_pack(
                "", wants, ObjectStoreGraphWalker([], lambda sha: []), take, protocol_version=0
            )
    except OutboundRefused as exc:
        raise ArchiveRejected("fetch_refused", str(exc)) from None
    except (OutboundError, GitProtocolError, HangupException, NotGitRepository) as exc:
        detail = str(exc) or type(exc).__name__
        host = urlsplit(bare).netloc  # credentials already stripped: never in a message
        raise ArchiveRejected(
            "fetch_failed", f"the repository at {host} did not fetch: {detail}"
        ) from None
    name, sha = chosen[0]
    if name == b"HEAD":
        name = bytes(result.symrefs.get(Ref(b"HEAD"), b"HEAD"))
    dest.write_bytes(b"# v2 git bundle\n" + sha + b" " + name + b"\n\n" + bytes(pack))
    return name.decode()


def _pick(refs: Mapping[Any, Any], ref: str | None) -> tuple[bytes, bytes]:
    """(name, object id) of the advertised ref to fetch: the one named, or HEAD's."""
    if not ref:
        names = [b"HEAD"]
    else:
        wanted = ref.encode()
        names = [wanted, b"refs/heads/" + wanted, b"refs/tags/" + wanted]
    for name in names:
        if refs.get(name):
            return name, bytes(refs[name])
    known = ", ".join(sorted(n.decode(errors="replace") for n in refs if not n.endswith(b"^{}")))
    what = f"the ref {ref!r}" if ref else "HEAD"
    raise ArchiveRejected("no_such_ref", f"{what} is not on the server (refs: {known or 'none'})")
