"""Safe outbound HTTP to candidate-supplied stub URLs (SSRF guard, pinned DNS, capped bodies).

The trace verifier runs on the same host as Redis, PostgreSQL and (in the cloud) an
instance-metadata endpoint, and it fetches URLs a candidate typed in. So every request:

- is `http`/`https` only, carries no credentials, and avoids ports of well-known internal
  services;
- resolves its host exactly once, refuses it when ANY address is loopback, private,
  link-local, CGNAT, unspecified, multicast, reserved, cloud metadata, or an IPv6 form that
  embeds such an IPv4 address (mapped, compatible, 6to4, Teredo, NAT64) - unless the host or
  the address is listed in the allowlist (`OUTBOUND_ALLOW`, e.g. `127.0.0.0/8,::1`);
- connects to that checked address only (a custom httpcore network backend maps host to
  pinned IP), so a second DNS answer can never redirect the socket (DNS rebinding); the
  Host header and TLS SNI/certificate checks still use the original host name;
- follows at most `max_redirects` redirects itself, refusing any that leaves the host and
  re-checking scheme, port and allowlist for the ones that stay;
- ignores proxy variables (`trust_env=False`), keeps no cookies, has a wall-clock deadline
  per attempt (a server dripping one byte per second cannot hold a worker), and stops
  reading at `max_bytes` (decompressed bytes, so a gzip bomb stops there too);
- retries, with exponential backoff, only when the connection failed: connect errors
  always (nothing was sent), connection resets only for GET/HEAD/OPTIONS (a POST may have
  been processed before the reset, and re-sending it would change what a probe observes).

This module is pure: no Django, no Celery; the allowlist comes in as an argument.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
AllowEntry = IPNetwork | str

SCHEMES = {"http": 80, "https": 443}

# Ports a stub has no business on: the Fetch standard's "bad ports" (mail, ssh, ...) plus
# the internal services a worker host typically runs (Redis, PostgreSQL, MySQL, ...).
# Applied even to allowlisted hosts: the allowlist opens addresses, not services.
BLOCKED_PORTS = frozenset(
    {
        0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79,
        87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139,
        143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548,
        554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 2375,
        2376, 2379, 2380, 3306, 3659, 4045, 4190, 5060, 5061, 5432, 5672, 6000, 6379, 6566,
        6665, 6666, 6667, 6668, 6669, 6697, 9200, 9300, 10080, 10250, 11211, 27017,
    }
)  # fmt: skip

# Cloud instance-metadata endpoints (AWS/GCP/Azure/OpenStack, AWS IPv6, Azure wireserver,
# Alibaba). Refused even inside an allowlisted network unless listed as the exact address.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "168.63.129.16",
              "100.100.100.200")
)  # fmt: skip

_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_THIS_NET = ipaddress.ip_network("0.0.0.0/8")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RESET_RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_HEADERS = {
    "User-Agent": "cassette-review-verifier/1.0",
    "Accept": "application/json, */*;q=0.5",
    # We decompress ourselves with an output cap; ask servers not to compress at all.
    "Accept-Encoding": "identity",
}
CHUNK = 64 * 1024


class OutboundRefused(Exception):
    """The outbound guard refused a URL before any connection; names the host and the rule."""

    def __init__(
        self, url: str, rule: str, *, host: str | None = None, address: str | None = None
    ) -> None:
        self.url = url
        self.rule = rule
        self.host = host
        self.address = address
        where = host or url
        if address and address != host:
            where = f"{host} ({address})" if host else address
        super().__init__(f"refused {url!r}: {where}: {rule}")


class OutboundError(Exception):
    """A request that was allowed but failed: timeout, connect error, reset, redirects."""

    def __init__(self, url: str, kind: str, message: str, *, attempts: int = 1) -> None:
        self.url = url
        self.kind = kind
        self.attempts = attempts
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{kind}{tries}: {message}")


# --- allowlist ---------------------------------------------------------------------------


def parse_allow(entries: Iterable[str] | str | None) -> list[AllowEntry]:
    """Parse allowlist entries (hosts or CIDR networks; commas split too) into matchers."""
    if entries is None:
        return []
    if isinstance(entries, str):
        entries = [entries]
    parsed: list[AllowEntry] = []
    for item in entries:
        for raw in str(item).split(","):
            entry = raw.strip()
            if not entry:
                continue
            bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
            try:
                parsed.append(ipaddress.ip_network(bare, strict=False))
                continue
            except ValueError:
                pass
            host = bare.lower().rstrip(".")
            if not host or any(not (c.isalnum() or c in "-._") for c in host):
                raise ValueError(f"allowlist entry {entry!r} is neither a host name nor a network")
            parsed.append(host)
    return parsed


def _allowed(host: str, ip: IPAddress | None, allow: list[AllowEntry]) -> bool:
    """True when the host name or the address is in the allowlist."""
    networks = [e for e in allow if not isinstance(e, str)]
    if ip is not None and ip in METADATA_ADDRESSES:
        # A metadata address must be named exactly: a host entry, or a broad dev entry such
        # as 169.254.0.0/16 or 0.0.0.0/0, must not quietly expose instance credentials.
        return any(n.num_addresses == 1 and n.version == ip.version and ip in n for n in networks)
    name = host.lower().rstrip(".")
    if name in allow:
        return True
    return ip is not None and any(n.version == ip.version and ip in n for n in networks)


# --- address classification -------------------------------------------------------------


def _v4_reason(ip: ipaddress.IPv4Address) -> str | None:
    """Why an IPv4 address is not public, or None when it is."""
    if ip in _THIS_NET:
        return "is unspecified (0.0.0.0/8)"
    if ip.is_loopback:
        return "is a loopback address"
    if ip in METADATA_ADDRESSES:
        return "is a cloud metadata endpoint"
    if ip.is_link_local:
        return "is link-local (169.254.0.0/16)"
    if ip in _CGNAT:
        return "is carrier-grade NAT (100.64.0.0/10)"
    if any(ip in net for net in _RFC1918):
        return "is a private address (RFC 1918)"
    if ip.is_multicast:
        return "is a multicast address"
    if ip.is_reserved or ip == ipaddress.IPv4Address("255.255.255.255"):
        return "is a reserved address"
    if not ip.is_global:
        return "is not a public address"
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, 6to4, Teredo, NAT64)."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    if ip in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    packed = ip.packed
    if packed[:12] == bytes(12) and int(ip) > 1:
        return "IPv4-compatible", ipaddress.IPv4Address(packed[12:])
    return None


def address_refusal(ip: IPAddress) -> str | None:
    """Why an address must not be contacted without an allowlist entry, or None if public."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _v4_reason(ip)
    if ip.is_unspecified:
        return "is unspecified (::)"
    if ip.is_loopback:
        return "is a loopback address"
    if ip in METADATA_ADDRESSES:
        return "is a cloud metadata endpoint"
    embedded = _embedded_v4(ip)
    if embedded is not None:
        form, v4 = embedded
        inner = _v4_reason(v4)
        if inner is not None:
            # The kernel or a relay would deliver these to the embedded IPv4 address.
            return f"is the {form} form of {v4}, which {inner}"
    if ip.is_link_local:
        return "is link-local (fe80::/10)"
    if ip.is_site_local:
        return "is site-local (fec0::/10)"
    if ip in _UNIQUE_LOCAL:
        return "is a private address (unique local fc00::/7)"
    if ip in _NAT64_LOCAL:
        return "is a local-use NAT64 address"
    if ip.is_multicast:
        return "is a multicast address"
    if ip.is_reserved:
        return "is a reserved address"
    if not ip.is_global:
        return "is not a public address"
    return None


# --- URL checks --------------------------------------------------------------------------


def _static_checks(url: str) -> tuple[str, str, int]:
    """Scheme, credentials, host and port checks that need no DNS; returns (scheme, host, port)."""
    if not isinstance(url, str) or not url:
        raise OutboundRefused(str(url), "empty URL")
    # Control characters, spaces and backslashes are where URL parsers disagree; refuse them
    # so the host we check is the host httpx connects to.
    if any(ord(c) < 0x21 or c in "\\\x7f" for c in url):
        raise OutboundRefused(url, "URL contains spaces, control characters or backslashes")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise OutboundRefused(url, f"malformed URL ({exc})") from None
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES:
        raise OutboundRefused(url, f"scheme {scheme or '(none)'!r} is not http or https")
    if parsed.userinfo:
        raise OutboundRefused(url, "credentials in the URL are not allowed")
    # raw_host is what httpcore hands the network backend (IDNA-encoded, IPv6 without []).
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise OutboundRefused(url, "URL has no host")
    port = parsed.port if parsed.port is not None else SCHEMES[scheme]
    if port in BLOCKED_PORTS or not 0 < port < 65536:
        raise OutboundRefused(
            url, f"port {port} is reserved for other services, not an HTTP stub", host=host
        )
    return scheme, host, port


def _resolve(url: str, host: str, port: int) -> list[IPAddress]:
    """All addresses of a host, from one getaddrinfo call."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise OutboundRefused(url, f"host does not resolve ({exc})", host=host) from None
    addresses: list[IPAddress] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise OutboundRefused(url, "host has no IPv4 or IPv6 address", host=host)
    return addresses


def _check_address(url: str, host: str, ip: IPAddress, allow: list[AllowEntry]) -> None:
    """Refuse one resolved address unless it is public or allowlisted."""
    reason = address_refusal(ip)
    if reason is not None and not _allowed(host, ip, allow):
        raise OutboundRefused(
            url,
            f"{ip} {reason}; stub URLs must point to public addresses "
            "unless OUTBOUND_ALLOW lists them",
            host=host,
            address=str(ip),
        )


def resolve_checked(
    url: str, allow: Iterable[str] | list[AllowEntry] | None = None
) -> tuple[str, str, int, str]:
    """Check a URL and resolve its host once; return (scheme, host, port, ip) or refuse."""
    entries = _as_allow(allow)
    scheme, host, port = _static_checks(url)
    addresses = _resolve(url, host, port)
    # Every answer must pass: a resolver may hand the next caller any one of them.
    for ip in addresses:
        _check_address(url, host, ip, entries)
    return scheme, host, port, str(addresses[0])


def _as_allow(allow: Iterable[Any] | None) -> list[AllowEntry]:
    """Accept raw strings or already-parsed entries."""
    return parse_allow([str(i) for i in allow or []])


# --- pinned transport --------------------------------------------------------------------

_deadline = threading.local()


def _remaining(timeout: float | None) -> float | None:
    """The smaller of an operation timeout and the time left before this attempt's deadline."""
    deadline = getattr(_deadline, "value", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        return 0.0
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose reads and writes share one wall-clock deadline per attempt."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        left = _remaining(timeout)
        if left == 0.0:
            raise httpcore.ReadTimeout("total time limit for the request exceeded")
        return self._inner.read(max_bytes, left)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        left = _remaining(timeout)
        if left == 0.0:
            raise httpcore.WriteTimeout("total time limit for the request exceeded")
        self._inner.write(buffer, left)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        # server_hostname is the URL's host (not the pinned IP): SNI and certificate
        # verification happen against the name the candidate gave.
        inner = self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects only to addresses the guard pinned; every other host is refused."""

    def __init__(self, pins: _Pins) -> None:
        self._pins = pins
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        ip = self._pins.lookup(host, port)
        if ip is None:
            # Last line of defence: SafeClient pins before sending, so this means a code path
            # tried to reach a host nobody checked.
            raise OutboundRefused(f"{host}:{port}", "host was not checked by the guard", host=host)
        left = _remaining(timeout)
        if left == 0.0:
            raise httpcore.ConnectTimeout("total time limit for the request exceeded")
        stream = self._inner.connect_tcp(ip, port, left, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise OutboundRefused(path, "unix sockets are never contacted")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _Pins:
    """Host → checked IP, and the (host, port) pairs that passed the port policy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ips: dict[str, str] = {}
        self._ports: set[tuple[str, int]] = set()

    def get(self, host: str) -> str | None:
        """The pinned address of a host, if any."""
        with self._lock:
            return self._ips.get(host)

    def add(self, host: str, port: int, ip: str) -> str:
        """Pin a host (first pin wins) and mark the port checked; return the pinned IP."""
        with self._lock:
            pinned = self._ips.setdefault(host, ip)
            self._ports.add((host, port))
            return pinned

    def lookup(self, host: str, port: int) -> str | None:
        """The IP to connect to for host:port, or None when that pair was never checked."""
        key = host.lower()
        with self._lock:
            if (key, port) not in self._ports:
                return None
            return self._ips.get(key)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport with its connection pool swapped for one on the pinned backend."""

    def __init__(self, pins: _Pins, ssl_context: ssl.SSLContext, max_connections: int) -> None:
        super().__init__(verify=ssl_context, trust_env=False, retries=0)
        if not hasattr(self, "_pool"):  # fail closed if httpx internals ever change
            raise RuntimeError("httpx.HTTPTransport has no _pool; cannot pin connections")
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            http1=True,
            http2=False,
            retries=0,
            network_backend=_PinnedBackend(pins),
        )


class _NoCookies(DefaultCookiePolicy):
    """Refuse every cookie, so no state leaks from one probe into the next."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        """Never store a cookie."""
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        """Never send a cookie."""
        return False


# --- the client --------------------------------------------------------------------------


@dataclass(slots=True)
class SafeResponse:
    """A fully read (and capped) response."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool = False
    attempts: int = 1
    redirects: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    note: str | None = None

    def header(self, name: str) -> str | None:
        """First value of a header, case-insensitive."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (bad bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON; ValueError when it is not (or was truncated)."""
        if self.truncated:
            raise ValueError("response was truncated at the size cap")
        return json.loads(self.body.decode("utf-8-sig"))


def _caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """True when the exception or anything in its cause chain is one of `kinds`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kinds):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _classify(exc: httpx.HTTPError) -> str:
    """Name a transport failure: timeout, tls, connect, reset or protocol."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if _caused_by(exc, (ssl.SSLError, ssl.CertificateError)):
        return "tls"  # a bad certificate does not get better by retrying
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if _caused_by(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset"
    if isinstance(exc, httpx.RemoteProtocolError) and "disconnected" in str(exc).lower():
        return "reset"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "reset"
    return "protocol"


def _check_headers(url: str, headers: dict[str, str]) -> None:
    """Refuse header names/values that could split the request (CR, LF, NUL) or not encode."""
    for name, value in headers.items():
        text = f"{name}{value}"
        if any(c in text for c in "\r\n\x00") or not name or ":" in name:
            raise OutboundError(url, "request", f"header {name!r} has forbidden characters")
        try:
            name.encode("ascii")
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise OutboundError(url, "request", f"header {name!r} cannot be encoded") from None


class SafeClient:
    """httpx.Client behind the outbound guard: pinned DNS, own redirects, caps and retries."""

    def __init__(
        self,
        allow: Iterable[str] | None = None,
        *,
        timeout: float = 5.0,
        max_bytes: int = 1_000_000,
        retries: int = 2,
        backoff: float = 0.1,
        max_redirects: int = 3,
        verify: ssl.SSLContext | bool = True,
        max_connections: int = 10,
    ) -> None:
        self.allow = _as_allow(allow)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_redirects = max_redirects
        self._pins = _Pins()
        context = verify if isinstance(verify, ssl.SSLContext) else None
        if context is None:
            context = httpx.create_ssl_context(verify=verify, trust_env=False)
        self._client = httpx.Client(
            transport=_PinnedTransport(self._pins, context, max_connections),
            follow_redirects=False,
            trust_env=False,  # HTTP(S)_PROXY in the worker's env must not re-route us
            timeout=httpx.Timeout(timeout),
            cookies=CookieJar(policy=_NoCookies()),
            headers=DEFAULT_HEADERS,
        )

    def __enter__(self) -> SafeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close pooled connections."""
        self._client.close()

    def check(self, url: str) -> tuple[str, str, int, str]:
        """Check a URL; resolve its host only the first time this client sees it."""
        scheme, host, port = _static_checks(url)
        ip = self._pins.get(host)
        if ip is None:
            _, _, _, ip = resolve_checked(url, self.allow)
        else:
            # Same host, maybe another port or scheme: re-run the address rule on the pin
            # (no new DNS answer is ever consulted for a host we already pinned).
            _check_address(url, host, ipaddress.ip_address(ip), self.allow)
        return scheme, host, port, self._pins.add(host, port, ip)

    def get(self, url: str, **kwargs: Any) -> SafeResponse:
        """GET through the guard."""
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> SafeResponse:
        """POST through the guard."""
        return self.request("POST", url, **kwargs)

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | str | None = None,
    ) -> SafeResponse:
        """Send one request, following same-host redirects; raise OutboundRefused/Error."""
        started = time.monotonic()
        method = method.upper()
        origin_host = self.check(url)[1]
        _check_headers(url, headers or {})
        redirects: list[str] = []
        current, body, hdrs = url, content, dict(headers or {})
        while True:
            response = self._send_with_retries(method, current, hdrs, body)
            location = response.header("location")
            if response.status not in REDIRECT_STATUSES or not location:
                response.redirects = redirects
                response.elapsed = time.monotonic() - started
                return response
            if len(redirects) >= self.max_redirects:
                raise OutboundError(url, "redirects", f"more than {self.max_redirects} redirects")
            try:
                target = str(httpx.URL(current).join(location))
            except (httpx.InvalidURL, ValueError) as exc:
                raise OutboundRefused(location, f"malformed redirect target ({exc})") from None
            _, host, _ = _static_checks(target)
            if host != origin_host:
                raise OutboundRefused(
                    target,
                    f"redirect from {origin_host} to another host is not followed",
                    host=host,
                )
            self.check(target)
            redirects.append(target)
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                # What browsers and httpx do: the body is dropped and the method becomes GET.
                method, body = "GET", None
                hdrs = {k: v for k, v in hdrs.items() if k.lower() != "content-type"}
            current = target

    def _send_with_retries(
        self, method: str, url: str, headers: dict[str, str], content: bytes | str | None
    ) -> SafeResponse:
        """One request with retries for connect errors (and resets on safe methods)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._attempt(method, url, headers, content)
            except httpx.HTTPError as exc:
                kind = _classify(exc)
                retryable = kind == "connect" or (kind == "reset" and method in RESET_RETRY_METHODS)
                if not retryable or attempt > self.retries:
                    detail = str(exc) or type(exc).__name__
                    raise OutboundError(url, kind, detail, attempts=attempt) from exc
                time.sleep(self.backoff * (2 ** (attempt - 1)))
                continue
            response.attempts = attempt
            return response

    def _attempt(
        self, method: str, url: str, headers: dict[str, str], content: bytes | str | None
    ) -> SafeResponse:
        """One attempt under a wall-clock deadline; the body is read up to max_bytes."""
        _deadline.value = time.monotonic() + self.timeout
        try:
            request = self._client.build_request(method, url, headers=headers, content=content)
            response = self._client.send(request, stream=True)
            try:
                body, truncated, note = self._read_capped(response)
            finally:
                response.close()
            return SafeResponse(
                url=url,
                status=response.status_code,
                headers=[(k, v) for k, v in response.headers.multi_items()],
                body=body,
                truncated=truncated,
                note=note,
            )
        finally:
            _deadline.value = None

    def _read_capped(self, response: httpx.Response) -> tuple[bytes, bool, str | None]:
        """Read raw bytes, decompress gzip/deflate with an output cap; stop at max_bytes."""
        cap = self.max_bytes
        encoding = response.headers.get("content-encoding", "").strip().lower()
        decoder = None
        note = None
        if encoding in ("gzip", "x-gzip", "deflate"):
            decoder = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
        elif encoding and encoding != "identity":
            note = f"body left {encoding}-encoded"
        out = bytearray()
        raw_total = 0
        for chunk in response.iter_raw(CHUNK):
            raw_total += len(chunk)
            if decoder is not None:
                try:
                    piece = decoder.decompress(chunk, cap - len(out) + 1)
                except zlib.error as exc:
                    return bytes(out), False, f"could not decompress body: {exc}"
            else:
                piece = chunk
            out += piece
            if len(out) > cap or raw_total > cap:
                del out[cap:]
                return bytes(out), True, note or f"stopped reading at {cap} bytes"
        return bytes(out), False, note
