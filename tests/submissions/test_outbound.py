"""The outbound guard: refusals before any connection, pinned DNS, redirects, caps, retries."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from submissions.net.outbound import (
    OutboundError,
    OutboundRefused,
    SafeClient,
    address_refusal,
    parse_allow,
    resolve_checked,
)
from tests.stubs.guard import ConnectGuard, FakeResolver
from tests.stubs.servers import (
    DripHandler,
    EchoHandler,
    GzipBombHandler,
    HugeHandler,
    RedirectHandler,
    ResetServer,
    SlowHandler,
    StubServer,
    free_port,
)

LOOPBACK = ["127.0.0.0/8", "::1"]


@pytest.fixture(autouse=True)
def guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectGuard]:
    """Every test here may only connect to 127.0.0.0/8 or ::1; anything else fails it."""
    connect_guard = ConnectGuard()
    connect_guard.install(monkeypatch)
    yield connect_guard
    connect_guard.assert_clean()


@pytest.fixture(autouse=True)
def resolver(monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
    """No real DNS in these tests: literals and a per-test name table only."""
    fake = FakeResolver(socket.getaddrinfo)
    fake.set("public.test", "93.184.216.34")
    fake.set("internal.test", "127.0.0.1")
    fake.set("private.test", "10.0.0.5")
    fake.set("mixed.test", "93.184.216.34", "10.0.0.5")
    fake.set("metadata.test", "169.254.169.254")
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def test_the_connect_guard_blocks_non_loopback(guard: ConnectGuard) -> None:
    """The fixture itself: a connection outside loopback never happens and is reported."""
    with pytest.raises(PermissionError):
        socket.create_connection(("192.0.2.1", 80), timeout=0.1)
    with socket.socket() as sock, pytest.raises(PermissionError):
        sock.connect(("10.0.0.1", 80))
    with socket.socket(socket.AF_INET6) as sock, pytest.raises(PermissionError):
        sock.connect_ex(("::ffff:127.0.0.1", 80, 0, 0))
    assert len(guard.violations) == 3 and guard.attempts == []
    guard.violations.clear()  # expected here; anywhere else they fail the test


# --- refusals with the allowlist off ---------------------------------------------------------

REFUSED = [
    ("http://127.0.0.1:8080/", "127.0.0.1", "loopback"),
    ("http://localhost.:8080/", "127.0.0.1", "loopback"),
    ("http://[::1]:8080/", "::1", "loopback"),
    ("http://10.0.0.1/", "10.0.0.1", "RFC 1918"),
    ("http://172.16.3.4/", "172.16.3.4", "RFC 1918"),
    ("http://192.168.1.1/", "192.168.1.1", "RFC 1918"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254", "metadata"),
    ("http://169.254.10.10/", "169.254.10.10", "link-local"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1"),
    ("http://[::ffff:a00:1]/", "::ffff:a00:1", "IPv4-mapped form of 10.0.0.1"),
    ("http://[::127.0.0.1]/", "::7f00:1", "IPv4-compatible form of 127.0.0.1"),
    ("http://[2002:7f00:1::]/", "2002:7f00:1::", "6to4 form of 127.0.0.1"),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "2001:0:4136", "Teredo form of 127.0.0.1"),
    ("http://[64:ff9b::a00:1]/", "64:ff9b::a00:1", "NAT64 form of 10.0.0.1"),
    ("http://100.64.0.1/", "100.64.0.1", "carrier-grade NAT"),
    ("http://0.0.0.0:8080/", "0.0.0.0", "unspecified"),  # noqa: S104
    ("http://[::]/", "::", "unspecified"),
    ("http://224.0.0.1/", "224.0.0.1", "multicast"),
    ("http://240.0.0.1/", "240.0.0.1", "reserved"),
    ("http://198.18.0.1/", "198.18.0.1", "not a public address"),
    ("http://[fe80::1]/", "fe80::1", "link-local"),
    ("http://[fd00::1]/", "fd00::1", "unique local"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254", "metadata"),
    ("http://2130706433:8080/", "127.0.0.1", "loopback"),
    ("http://0x7f.1:8080/", "127.0.0.1", "loopback"),
    ("http://127.1:8080/", "127.0.0.1", "loopback"),
    ("http://internal.test:8080/", "127.0.0.1", "loopback"),
    ("http://private.test/", "10.0.0.5", "RFC 1918"),
    ("http://metadata.test/", "169.254.169.254", "metadata"),
    ("http://mixed.test/", "10.0.0.5", "RFC 1918"),
]


@pytest.mark.parametrize(("url", "address", "rule"), REFUSED)
def test_non_public_addresses_are_refused_before_connecting(
    url: str, address: str, rule: str, guard: ConnectGuard, resolver: FakeResolver
) -> None:
    fake = resolver
    fake.set("localhost", "127.0.0.1")
    with pytest.raises(OutboundRefused) as caught:
        resolve_checked(url, [])
    message = str(caught.value)
    assert address in message and rule in message
    assert "OUTBOUND_ALLOW" in message
    with SafeClient([]) as client, pytest.raises(OutboundRefused):
        client.get(url)
    assert guard.attempts == []


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("file:///etc/passwd", "scheme 'file'"),
        ("gopher://public.test/", "scheme 'gopher'"),
        ("ftp://public.test/", "scheme 'ftp'"),
        ("public.test/orders", "scheme"),
        ("http://user:pw@public.test/", "credentials"),
        ("http://user@127.0.0.1/", "credentials"),
        ("http://public.test:22/", "port 22"),
        ("http://public.test:6379/", "port 6379"),
        ("http://public.test:5432/", "port 5432"),
        ("http://exa mple.test/", "spaces"),
        ("http://public.test\\@127.0.0.1/", "backslashes"),
        ("http://", "no host"),
        ("http://nowhere.test/", "does not resolve"),
    ],
)
def test_scheme_credentials_port_and_syntax_rules(url: str, rule: str, guard: ConnectGuard) -> None:
    with pytest.raises(OutboundRefused) as caught:
        resolve_checked(url, LOOPBACK)
    assert rule in str(caught.value)
    assert guard.attempts == []


def test_public_address_passes_and_resolves_once(resolver: FakeResolver) -> None:
    assert resolve_checked("http://public.test/x", []) == (
        "http",
        "public.test",
        80,
        "93.184.216.34",
    )
    assert resolve_checked("https://PUBLIC.test/", []) == (
        "https",
        "public.test",
        443,
        "93.184.216.34",
    )
    assert resolver.calls.count("public.test") == 2  # once per call, never twice in one


def test_parse_allow_hosts_networks_and_errors() -> None:
    entries = parse_allow(["127.0.0.0/8, ::1", "Stub.Test.", "[::1]", ""])
    assert [str(e) for e in entries] == ["127.0.0.0/8", "::1/128", "stub.test", "::1/128"]
    assert parse_allow("10.1.2.3") and parse_allow(None) == []
    with pytest.raises(ValueError, match="neither a host name nor a network"):
        parse_allow(["http://evil/"])


def test_allowlist_opens_listed_addresses_only(resolver: FakeResolver) -> None:
    assert resolve_checked("http://127.0.0.1:8080/", LOOPBACK)[3] == "127.0.0.1"
    assert resolve_checked("http://[::1]:8080/", LOOPBACK)[3] == "::1"
    assert resolve_checked("http://internal.test:8080/", LOOPBACK)[3] == "127.0.0.1"
    for url in ("http://10.0.0.1/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/"):
        with pytest.raises(OutboundRefused):
            resolve_checked(url, LOOPBACK)
    # A host entry allows that name whatever it resolves to ...
    assert resolve_checked("http://internal.test:9000/", ["internal.test"])[3] == "127.0.0.1"
    # ... except a metadata endpoint, which must be listed as the exact address.
    with pytest.raises(OutboundRefused, match="metadata"):
        resolve_checked("http://metadata.test/", ["metadata.test", "169.254.0.0/16"])
    assert resolve_checked("http://169.254.169.254/", ["169.254.169.254"])[3] == "169.254.169.254"


def test_address_refusal_accepts_public_addresses() -> None:
    import ipaddress

    for public in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"):
        assert address_refusal(ipaddress.ip_address(public)) is None


# --- real loopback stubs with the allowlist on -----------------------------------------------


def test_loopback_stub_works_when_allowlisted(guard: ConnectGuard) -> None:
    with StubServer(EchoHandler) as stub, SafeClient(LOOPBACK, timeout=2) as client:
        response = client.get(stub.url + "/hello")
    assert response.status == 200
    assert response.json()["host"] == f"127.0.0.1:{stub.port}"
    assert guard.attempts == [("127.0.0.1", stub.port)]


def test_ipv6_loopback_stub_works_when_allowlisted() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        stub = StubServer(EchoHandler, host="::1")
    except OSError:
        pytest.skip("cannot bind ::1")
    with stub, SafeClient(["::1"], timeout=2) as client:
        assert client.get(stub.url + "/v6").json()["path"] == "/v6"


def test_connection_is_pinned_to_the_first_answer(
    resolver: FakeResolver, guard: ConnectGuard
) -> None:
    """DNS rebinding: later answers point at 10.0.0.5, the client never asks again."""
    with StubServer(EchoHandler) as stub:
        resolver.set("rebind.test", ["127.0.0.1"], ["10.0.0.5"])
        with SafeClient(["127.0.0.0/8"], timeout=2) as client:
            for _ in range(3):
                body = client.get(f"http://rebind.test:{stub.port}/x").json()
                assert body["host"] == f"rebind.test:{stub.port}"  # Host keeps the name
        assert resolver.calls.count("rebind.test") == 1
        assert {a for a in guard.attempts} == {("127.0.0.1", stub.port)}
        # A new client resolves again, gets the private answer, and refuses it.
        with SafeClient(["127.0.0.0/8"], timeout=2) as client, pytest.raises(OutboundRefused):
            client.get(f"http://rebind.test:{stub.port}/x")


def test_transport_refuses_hosts_the_guard_never_checked(guard: ConnectGuard) -> None:
    """Defence in depth: the pinned backend itself will not dial an unchecked host."""
    with (
        StubServer(EchoHandler) as stub,
        SafeClient(LOOPBACK) as client,
        pytest.raises(OutboundRefused, match="not checked"),
    ):
        client._client.get(stub.url + "/")
    assert guard.attempts == []


def test_proxy_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://10.9.9.9:3128")
    with StubServer(EchoHandler) as stub, SafeClient(LOOPBACK, timeout=2) as client:
        assert client.get(stub.url + "/p").status == 200


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "nul\x00", "ключ"])
def test_header_injection_is_refused_before_connecting(value: str, guard: ConnectGuard) -> None:
    with SafeClient(LOOPBACK) as client, pytest.raises(OutboundError) as caught:
        client.post("http://127.0.0.1:9999/orders", headers={"Idempotency-Key": value})
    assert caught.value.kind == "request" and guard.attempts == []


def test_no_cookies_are_kept_between_requests() -> None:
    with StubServer(EchoHandler) as stub, SafeClient(LOOPBACK, timeout=2) as client:
        first = client.get(stub.url + "/a")
        assert first.header("set-cookie")
        assert client.get(stub.url + "/b").json()["cookie"] is None


# --- redirects -------------------------------------------------------------------------------


def test_redirect_from_allowed_stub_to_loopback_is_refused(
    resolver: FakeResolver, guard: ConnectGuard
) -> None:
    """Allowlist off except the stub's own name: its redirect to 127.0.0.1 is not followed."""
    resolver.set("stub.test", "127.0.0.1")
    with StubServer(RedirectHandler) as stub:
        stub.server.RequestHandlerClass.location = f"http://127.0.0.1:{stub.port}/final"
        with (
            SafeClient(["stub.test"], timeout=2) as client,
            pytest.raises(OutboundRefused, match="another host"),
        ):
            client.get(f"http://stub.test:{stub.port}/start")
    assert guard.attempts == [("127.0.0.1", stub.port)]  # only the stub itself
    assert [h["path"] for h in stub.hits] == ["/start"]


@pytest.mark.parametrize(
    "target",
    [
        "http://localhost:{port}/final",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "//public.test/x",
        "http://[::1]:{port}/final",
    ],
)
def test_redirect_to_another_host_is_refused(target: str, guard: ConnectGuard) -> None:
    with StubServer(RedirectHandler) as stub:
        stub.server.RequestHandlerClass.location = target.format(port=stub.port)
        with SafeClient(LOOPBACK, timeout=2) as client, pytest.raises(OutboundRefused):
            client.get(stub.url + "/start")
    assert len(guard.attempts) == 1


def test_same_host_redirects_are_followed_up_to_three() -> None:
    def step(path: str) -> str:
        n = int(path.strip("/").removeprefix("r") or 0)
        return "/final" if n >= 3 else f"/r{n + 1}"

    with (
        StubServer(RedirectHandler, location=staticmethod(step)) as stub,
        SafeClient(LOOPBACK, timeout=2) as client,
    ):
        response = client.get(stub.url + "/r1")
        assert response.status == 200 and response.json() == {"final": True}
        assert [r.rsplit("/", 1)[1] for r in response.redirects] == ["r2", "r3", "final"]
        with pytest.raises(OutboundError, match="more than 3 redirects"):
            client.get(stub.url + "/r0")


def test_same_host_redirect_to_blocked_port_is_refused(resolver: FakeResolver) -> None:
    resolver.set("stub.test", "127.0.0.1")
    with (
        StubServer(RedirectHandler, location="http://stub.test:6379/") as stub,
        SafeClient(["stub.test"], timeout=2) as client,
        pytest.raises(OutboundRefused, match="port 6379"),
    ):
        client.get(f"http://stub.test:{stub.port}/start")


# --- timeouts, resets, caps -------------------------------------------------------------------


def test_slow_stub_times_out_without_retry() -> None:
    with StubServer(SlowHandler, delay=2.0) as stub, SafeClient(LOOPBACK, timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(OutboundError) as caught:
            client.get(stub.url + "/slow")
        assert time.monotonic() - started < 1.0
    assert caught.value.kind == "timeout" and caught.value.attempts == 1
    assert len(stub.hits) == 1


def test_dripping_body_is_cut_by_the_total_deadline() -> None:
    with (
        StubServer(DripHandler, interval=0.05) as stub,
        SafeClient(LOOPBACK, timeout=0.5) as client,
    ):
        started = time.monotonic()
        with pytest.raises(OutboundError) as caught:
            client.get(stub.url + "/drip")
        assert time.monotonic() - started < 1.5
    assert caught.value.kind == "timeout"


def test_connection_resets_are_retried_for_get_only() -> None:
    with ResetServer() as server:
        with SafeClient(LOOPBACK, timeout=1, retries=2, backoff=0.01) as client:
            with pytest.raises(OutboundError) as caught:
                client.get(server.url + "/x")
            assert caught.value.kind == "reset" and caught.value.attempts == 3
            assert server.connections == 3
            with pytest.raises(OutboundError) as caught:
                client.post(server.url + "/orders", content=b"{}")
            assert caught.value.attempts == 1  # a POST may have been processed: not re-sent
        assert server.connections == 4


def test_connect_errors_are_retried_with_backoff(guard: ConnectGuard) -> None:
    port = free_port()
    with SafeClient(LOOPBACK, timeout=1, retries=2, backoff=0.05) as client:
        started = time.monotonic()
        with pytest.raises(OutboundError) as caught:
            client.post(f"http://127.0.0.1:{port}/orders", content=b"{}")
        elapsed = time.monotonic() - started
    assert caught.value.kind == "connect" and caught.value.attempts == 3
    assert guard.attempts == [("127.0.0.1", port)] * 3
    assert 0.15 <= elapsed < 1.0  # 0.05 + 0.1 of backoff


@pytest.mark.parametrize("chunked", [False, True])
def test_two_gigabyte_answer_stops_at_the_cap(chunked: bool) -> None:
    cap = 1_000_000
    with (
        StubServer(HugeHandler, chunked=chunked) as stub,
        SafeClient(LOOPBACK, timeout=5, max_bytes=cap) as client,
    ):
        tracemalloc.start()
        started = time.monotonic()
        try:
            response = client.get(stub.url + "/huge")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        elapsed = time.monotonic() - started
    assert response.truncated and len(response.body) == cap
    assert elapsed < 3
    assert peak < 16 * 1024 * 1024
    with pytest.raises(ValueError, match="truncated"):
        response.json()


def test_gzip_bomb_is_capped_after_decompression() -> None:
    with (
        StubServer(GzipBombHandler, inflated=64 * 1024 * 1024) as stub,
        SafeClient(LOOPBACK, timeout=5, max_bytes=100_000) as client,
    ):
        response = client.get(stub.url + "/bomb")
    assert response.truncated and len(response.body) == 100_000
    assert set(response.body) == {0}


# --- TLS: pinned IP, SNI and verification on the name ----------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=stub.test",
             "-addext", "subjectAltName=DNS:stub.test"],
            check=True, capture_output=True, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"openssl unavailable: {exc}")
    return cert, key


def test_tls_uses_the_host_name_for_sni_and_verification(
    tls_files: tuple[Path, Path], resolver: FakeResolver, guard: ConnectGuard
) -> None:
    cert, key = tls_files
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    seen: list[str | None] = []
    server_ctx.sni_callback = lambda _sock, name, _ctx: seen.append(name)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    resolver.set("stub.test", "127.0.0.1")
    resolver.set("other.test", "127.0.0.1")
    with (
        StubServer(EchoHandler, tls=server_ctx) as stub,
        SafeClient(["stub.test", "other.test"], timeout=2, verify=client_ctx) as client,
    ):
        body = client.get(f"https://stub.test:{stub.port}/tls").json()
        assert body["host"] == f"stub.test:{stub.port}"
        assert seen == ["stub.test"]
        with pytest.raises(OutboundError) as caught:
            client.get(f"https://other.test:{stub.port}/tls")  # cert is for stub.test
        assert caught.value.kind == "tls" and caught.value.attempts == 1
    assert {a[0] for a in guard.attempts} == {"127.0.0.1"}
