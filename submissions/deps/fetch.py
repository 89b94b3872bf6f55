"""Fetch the wheels of a resolved set into the content-addressed wheel cache, host side.

No candidate code runs here and nothing is unpacked: a wheel is downloaded from the URL the
index gave for it (never one a hand-in wrote), its sha256 checked against the index's hash
while it streams, and stored under its hash. Before a byte is fetched the set's total size
is held to a cap; after, each wheel's declared unpacked size (its zip directory, read, not
extracted) is, so a zip bomb is refused before the install ever sees it.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from cassettes_app.checks import counted
from submissions.deps.resolve import DepsFailed, Pin, Resolved, WheelRef

_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.whl\Z")
_CHUNK = 1 << 16
PARALLEL = 4  # more concurrent TLS connects stalled 5 s behind some proxies
CONNECT_SECONDS = 2.0
DOWNLOAD_TRIES = 2
CONNECT_RETRIES = 2
MAX_ENTRIES = 100_000  # files in one wheel; real ones hold a few thousand at most


class FetchFailed(DepsFailed):
    """A wheel could not be fetched or was refused; the message names it and why."""


@dataclass(frozen=True)
class FetchLimits:
    max_download_bytes: int = 1 << 30  # the whole set, compressed
    max_unpacked_bytes: int = 2 << 30  # the whole set, as its zip directories declare
    timeout: float = 120.0


@dataclass(frozen=True)
class Fetched:
    """One wheel in the cache, ready for the install."""

    pin: Pin
    wheel: WheelRef
    path: Path
    cached: bool  # it was in the cache already
    unpacked_bytes: int


def sandbox_tags(python_version: tuple[int, int]) -> list[Tag]:
    """The wheel tags the sandbox's interpreter accepts, best first (host glibc, same /usr)."""
    return [*cpython_tags(python_version), *compatible_tags(python_version)]


def choose_wheel(pin: Pin, tags: list[Tag]) -> WheelRef:
    """The wheel of `pin` the sandbox's interpreter prefers; FetchFailed when none fits."""
    rank = {tag: i for i, tag in enumerate(tags)}
    best: tuple[int, WheelRef] | None = None
    for wheel in pin.wheels:
        if not _FILENAME.match(wheel.filename):
            continue
        try:
            _, _, _, wheel_tags = parse_wheel_filename(wheel.filename)
        except InvalidWheelFilename:
            continue
        score = min((rank[t] for t in wheel_tags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, wheel)
    if best is None:
        offered = ", ".join(w.filename for w in pin.wheels) or "none"
        raise FetchFailed(
            f"{pin.name}=={pin.version}: no wheel for this sandbox's Python (offered: {offered})"
        )
    return best[1]


def wheel_path(cache: Path, wheel: WheelRef) -> Path:
    """Where a wheel lives in the cache: by its hash, under its own file name."""
    return cache / wheel.sha256[:2] / wheel.sha256 / wheel.filename


MAX_DIRECTORY_BYTES = 64 * 2**20  # a zip's central directory; 100,000 entries need ~10 MB


def _directory_size(path: Path) -> tuple[int, int]:
    """(entries, central directory bytes) from the zip's end record, read before the directory
    itself: zipfile builds an object per entry, so a wheel of millions of empty entries
    would take the worker's memory before any count could be checked."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        tail_len = min(size, 22 + 65535)
        handle.seek(size - tail_len)
        tail = handle.read(tail_len)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) < at + 22:
            raise FetchFailed(f"{path.name} is not a readable wheel: no zip end record")
        entries = int.from_bytes(tail[at + 10 : at + 12], "little")
        directory = int.from_bytes(tail[at + 12 : at + 16], "little")
        locator = at - 20
        zip64 = entries == 0xFFFF or directory == 0xFFFFFFFF
        if zip64 and locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
            handle.seek(int.from_bytes(tail[locator + 8 : locator + 16], "little"))
            record = handle.read(56)
            if record[:4] == b"PK\x06\x06" and len(record) == 56:
                entries = int.from_bytes(record[32:40], "little")
                directory = int.from_bytes(record[40:48], "little")
    return entries, directory


def unpacked_size(path: Path) -> int:
    """The bytes a wheel declares it unpacks to (zip directory only); FetchFailed if unreadable."""
    entries, directory = _directory_size(path)
    if entries > MAX_ENTRIES or directory > MAX_DIRECTORY_BYTES:
        raise FetchFailed(
            f"{path.name} holds {entries:,} files in a {directory:,}-byte directory "
            f"(caps {MAX_ENTRIES:,} files, {MAX_DIRECTORY_BYTES:,} bytes)"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise FetchFailed(f"{path.name} is not a readable wheel: {exc}") from None
    if len(infos) > MAX_ENTRIES:
        raise FetchFailed(f"{path.name} holds {len(infos):,} files (cap {MAX_ENTRIES:,})")
    return sum(info.file_size for info in infos)


def _allowed_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("https", "http") and bool(parts.hostname)


def _download(client: httpx.Client, wheel: WheelRef, dest: Path, cap: int) -> None:
    """One wheel, tried again on a transport error (a reset stream, a dropped connection)."""
    for attempt in range(1, DOWNLOAD_TRIES + 1):
        try:
            return _download_once(client, wheel, dest, cap)
        except _Transient as exc:
            if attempt == DOWNLOAD_TRIES:
                raise FetchFailed(f"{wheel.filename}: {exc.args[0]}", infrastructure=True) from None


class _Transient(Exception):
    """A transport failure worth one more try."""


def _download_once(client: httpx.Client, wheel: WheelRef, dest: Path, cap: int) -> None:
    """Stream one wheel to `dest` (atomically), checking its size and sha256 on the way."""
    if not _allowed_url(wheel.url):
        raise FetchFailed(f"{wheel.filename}: the index gave a URL that is not http(s)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, client.stream("GET", wheel.url) as response:
            if response.status_code != 200:
                code = response.status_code
                raise FetchFailed(
                    f"{wheel.filename}: the index answered {code}",
                    infrastructure=code >= 500 or code == 429,
                )
            written = 0
            for chunk in response.iter_bytes(_CHUNK):
                written += len(chunk)
                if written > cap:
                    raise FetchFailed(f"{wheel.filename} is larger than the {cap:,} bytes left")
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != wheel.sha256:
            raise FetchFailed(f"{wheel.filename}: sha256 does not match the index's hash")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except httpx.TransportError as exc:
        raise _Transient(f"{type(exc).__name__}: {exc}") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(
            f"{wheel.filename}: {type(exc).__name__}: {exc}", infrastructure=True
        ) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _cached(path: Path, wheel: WheelRef) -> bool:
    """A cached wheel counts only if its bytes still hash to its name."""
    if not path.is_file():
        return False
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() == wheel.sha256:
        return True
    path.unlink()
    return False


def fetch(
    resolved: Resolved,
    cache: Path,
    *,
    python_version: tuple[int, int],
    limits: FetchLimits = FetchLimits(),
    on_step: Callable[[str], None] = lambda _: None,
) -> list[Fetched]:
    """Every pin's wheel in the cache, fetching those that are not; FetchFailed says why not."""
    tags = sandbox_tags(python_version)
    chosen = [(pin, choose_wheel(pin, tags)) for pin in resolved.pins]
    total = sum(w.size or 0 for _, w in chosen)
    if total > limits.max_download_bytes:
        biggest = sorted(chosen, key=lambda pw: -(pw[1].size or 0))[:3]
        named = ", ".join(f"{p.name} {(w.size or 0) / 2**20:.0f} MiB" for p, w in biggest)
        raise FetchFailed(
            f"the resolved set is {total / 2**20:,.0f} MiB of wheels, over the "
            f"{limits.max_download_bytes / 2**20:,.0f} MiB cap (largest: {named})"
        )
    cache.mkdir(parents=True, exist_ok=True)
    missing = [(p, w) for p, w in chosen if not _cached(wheel_path(cache, w), w)]
    if missing:
        on_step(f"fetching {counted(len(missing), 'wheel')}")
        _download_all(missing, cache, limits)
    out = []
    unpacked = 0
    for pin, wheel in chosen:
        path = wheel_path(cache, wheel)
        size = unpacked_size(path)
        unpacked += size
        if unpacked > limits.max_unpacked_bytes:
            raise FetchFailed(
                f"the wheels unpack to over {limits.max_unpacked_bytes / 2**20:,.0f} MiB "
                f"({wheel.filename} alone declares {size / 2**20:,.0f} MiB)"
            )
        out.append(Fetched(pin, wheel, path, (pin, wheel) not in missing, size))
    return out


def _download_all(
    missing: Iterable[tuple[Pin, WheelRef]], cache: Path, limits: FetchLimits
) -> None:
    """Download in parallel; the first failure is raised once every download has ended."""
    cap = limits.max_download_bytes
    started = time.monotonic()
    # HTTP/2: one connection (one name lookup) per host for all the set's wheels. Each new
    # connection's lookup risks a resolver's 5 s retry; eight of them made a cold fetch
    # 5 s slower in one run of two here. A connect that stalls is tried again at once.
    timeout = httpx.Timeout(limits.timeout, connect=CONNECT_SECONDS)
    # The system's trust store (SSL_CERT_FILE honoured), as uv uses for the resolve.
    transport = httpx.HTTPTransport(
        verify=ssl.create_default_context(), retries=CONNECT_RETRIES, http2=True
    )
    with (
        httpx.Client(
            timeout=timeout, follow_redirects=True, trust_env=False, transport=transport
        ) as client,
        ThreadPoolExecutor(PARALLEL) as pool,
    ):
        futures = [
            pool.submit(_download, client, wheel, wheel_path(cache, wheel), cap)
            for _, wheel in missing
        ]
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error
    if time.monotonic() - started > limits.timeout:
        raise FetchFailed(f"fetching took longer than {limits.timeout:g} s", infrastructure=True)
