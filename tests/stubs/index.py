"""A package index on loopback (PEP 503 pages) serving wheels built by the test.

uv resolves against it like against PyPI; the fetch phase downloads from it. Hostile wheels
(a zip bomb, a `.pth` that reaches for the network at import) can be published only here.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

from tests.stubs.servers import Handler, StubServer

_DATE = (2026, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def build_wheel(
    name: str,
    version: str,
    files: dict[str, bytes | str] | None = None,
    *,
    requires: tuple[str, ...] = (),
    tag: str = "py3-none-any",
    raw: dict[str, tuple[int, bytes]] | None = None,
    executables: frozenset[str] = frozenset(),
) -> tuple[str, bytes]:
    """(file name, bytes) of a wheel holding `files`; `raw` entries are stored as given
    (name -> (compression, data)), for archives no honest builder would write."""
    module = name.replace("-", "_")
    files = dict(
        files
        if files is not None
        else {f"{module}/__init__.py": b"VERSION = '%s'\n" % version.encode()}
    )
    files = {path: data.encode() if isinstance(data, str) else data for path, data in files.items()}
    info = f"{module}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files[f"{info}/METADATA"] = meta.encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: cr-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    )
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        # A fixed date: the same wheel has the same bytes, so the same hash, every run.
        for path, data in files.items():
            info = zipfile.ZipInfo(path, _DATE)
            info.external_attr = (0o100755 if path in executables else 0o100644) << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
        for path, (compression, data) in (raw or {}).items():
            archive.writestr(zipfile.ZipInfo(path, _DATE), data, compress_type=compression)
    return f"{module}-{version}-{tag}.whl", buffer.getvalue()


@dataclass
class LocalIndex:
    """Wheels by project name; `url` is the simple index's base once served."""

    wheels: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    server: StubServer | None = None
    json_api: bool = False  # answer PEP 691 JSON to a client that asks for it
    yanked: set[str] = field(default_factory=set)  # file names marked yanked (JSON only)
    requires_python: dict[str, str] = field(default_factory=dict)  # file name -> specifier

    def add(self, name: str, version: str, **kwargs: Any) -> tuple[str, bytes]:
        built = build_wheel(name, version, **kwargs)
        self.wheels.setdefault(name.lower().replace("_", "-"), []).append(built)
        return built

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.server.url}/simple"

    def downloads(self) -> list[str]:
        assert self.server is not None
        return [
            h["path"]
            for h in self.server.hits
            if h["path"].startswith("/files/") and h["method"] == "GET"
        ]

    def __enter__(self) -> LocalIndex:
        self.server = StubServer(_IndexHandler, index=self).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.__exit__(*exc)


class _IndexHandler(Handler):
    index: LocalIndex
    head = False

    def do_HEAD(self) -> None:
        self.head = True  # one handler serves every request of a kept-alive connection
        try:
            self._get()
        finally:
            self.head = False

    def do_GET(self) -> None:
        self._get()

    def _get(self) -> None:
        self._record()
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            files = self.index.wheels.get(parts[1])
            if files is None:
                return self._send(404, b"not found", "text/plain")
            if self.index.json_api and "vnd.pypi.simple.v1+json" in (
                self.headers.get("Accept") or ""
            ):
                page = {
                    "meta": {"api-version": "1.1"},
                    "name": parts[1],
                    "files": [
                        {
                            "filename": fn,
                            "url": f"../../files/{fn}",
                            "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                            "size": len(data),
                            "yanked": fn in self.index.yanked,
                            "requires-python": self.index.requires_python.get(fn),
                        }
                        for fn, data in files
                    ],
                }
                return self._send(
                    200, json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json"
                )
            links = "".join(
                f'<a href="/files/{fn}#sha256={hashlib.sha256(data).hexdigest()}">{fn}</a><br>\n'
                for fn, data in files
            )
            return self._send(200, f"<html><body>{links}</body></html>".encode(), "text/html")
        if len(parts) == 2 and parts[0] == "files":
            for files in self.index.wheels.values():
                for fn, data in files:
                    if fn == parts[1]:
                        return self._send(200, data, "application/octet-stream")
        return self._send(404, b"not found", "text/plain")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)
