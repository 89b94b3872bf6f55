"""Git repositories and bundles built with dulwich's own API (no git program), for tests;
and the two servers a fetch is tested against: dulwich's own, and git's `http-backend`
(the server side only: no git program ever touches a hand-in on our side)."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import shutil
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from hashlib import sha1
from pathlib import Path

from dulwich.bundle import create_bundle_from_repo, write_bundle
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import MemoryRepo

Entry = bytes | str | tuple[int, bytes | str]


def _tree(repo: MemoryRepo, files: dict[str, Entry]) -> bytes:
    """Store a tree of `files` ({path: content or (mode, content)}); returns its id.

    Paths split on "/" as given, so hostile names ("..", ".git") are stored as they are.
    """
    folders: dict[str, dict[str, Entry]] = {}
    tree = Tree()
    for path, value in files.items():
        head, _, rest = path.partition("/")
        if rest:
            folders.setdefault(head, {})[rest] = value
            continue
        mode, content = value if isinstance(value, tuple) else (0o100644, value)
        if mode == 0o160000:  # a gitlink names a commit that is not in the repository
            tree.add(head.encode(), mode, sha1(b"elsewhere").hexdigest().encode())
            continue
        blob = Blob.from_string(content.encode() if isinstance(content, str) else content)
        repo.object_store.add_object(blob)
        tree.add(head.encode(), mode, blob.id)
    for name, inner in folders.items():
        tree.add(name.encode(), 0o040000, _tree(repo, inner))
    repo.object_store.add_object(tree)
    return tree.id


def make_repo(
    commits: list[dict[str, Entry]],
    *,
    times: list[int] | None = None,
    ref: bytes = b"main",
    messages: list[str] | None = None,
) -> MemoryRepo:
    """A repository whose branch `ref` holds one commit per tree, oldest first."""
    repo = MemoryRepo()
    parent: bytes | None = None
    for index, files in enumerate(commits):
        commit = Commit()
        commit.tree = _tree(repo, files)
        commit.parents = [parent] if parent else []
        commit.author = commit.committer = b"Ada <ada@example.com>"
        when = times[index] if times else 1_700_000_000 + index * 3600
        commit.commit_time = commit.author_time = when
        commit.commit_timezone = commit.author_timezone = 0
        commit.message = (messages[index] if messages else f"commit {index}").encode() + b"\n"
        repo.object_store.add_object(commit)
        parent = commit.id
    assert parent is not None
    repo.refs[b"refs/heads/" + ref] = parent
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/" + ref)
    return repo


def add_commit(
    repo: MemoryRepo,
    files: dict[str, Entry],
    *,
    parents: list[bytes],
    message: str,
    ref: bytes = b"refs/heads/main",
    when: int = 1_800_000_000,
) -> bytes:
    """Add a commit of `files` on top of `parents` and point `ref` at it (a push, or with
    parents that leave the old tip out, a force-push)."""
    commit = Commit()
    commit.tree = _tree(repo, files)
    commit.parents = parents
    commit.author = commit.committer = b"Ada <ada@example.com>"
    commit.commit_time = commit.author_time = when
    commit.commit_timezone = commit.author_timezone = 0
    commit.message = message.encode() + b"\n"
    repo.object_store.add_object(commit)
    repo.refs[ref] = commit.id
    return commit.id


def _token_sent(environ: dict, token: str) -> bool:
    sent = environ.get("HTTP_AUTHORIZATION", "")
    return sent.startswith("Basic ") and (
        base64.b64decode(sent[6:]).decode().partition(":")[2] == token
    )


@contextlib.contextmanager
def _serve(app) -> Iterator[int]:
    """A WSGI app on a loopback port (a thread per request), quiet; yields the port."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:
            pass

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    server = make_server("127.0.0.1", 0, app, server_class=Threaded, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def git_available() -> bool:
    return shutil.which("git") is not None


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in `cwd` (test and bench set-up only: building and serving repositories)."""
    base = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.invalid",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.invalid",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, check=True
    )
    return done.stdout.decode()


@contextlib.contextmanager
def serve_git_http(root: Path, *, token: str = "") -> Iterator[str]:
    """git's own smart-HTTP server (`git http-backend`, as CGI) on loopback, serving the
    bare repositories under `root`; yields the base URL (add `/<name>.git`). With `token`,
    only requests that send it (Basic authentication's password) are answered, else 401."""

    def app(environ, start_response):
        if token and not _token_sent(environ, token):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi = {
            "GIT_PROJECT_ROOT": str(root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),
            "GIT_CONFIG_NOSYSTEM": "1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ.get("PATH_INFO", ""),
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=cgi, capture_output=True, check=False
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]

    with _serve(app) as port:
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def serve_repository(repo: MemoryRepo, *, token: str = "") -> Iterator[str]:
    """dulwich's own smart-HTTP server on loopback, serving `repo` at /repo.git; with
    `token`, only to requests that send it (Basic authentication's password), else 401."""
    from dulwich.server import DictBackend
    from dulwich.web import make_wsgi_chain

    served = make_wsgi_chain(DictBackend({"/repo.git": repo}))

    def app(environ, start_response):
        if token and not _token_sent(environ, token):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required"]
        return served(environ, start_response)

    with _serve(app) as port:
        yield f"http://127.0.0.1:{port}/repo.git"


def make_bundle(commits: list[dict[str, Entry]], **kwargs) -> bytes:
    """A v2 bundle of `make_repo(commits)`: every ref, HEAD included."""
    repo = make_repo(commits, **kwargs)
    out = io.BytesIO()
    bundle = create_bundle_from_repo(repo)
    write_bundle(out, bundle)
    bundle.close()
    return out.getvalue()


def _entry_header(kind: int, size: int) -> bytes:
    out = bytearray([(kind << 4) | (size & 0x0F)])
    size >>= 4
    while size:
        out[-1] |= 0x80
        out.append(size & 0x7F)
        size >>= 7
    return bytes(out)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _ofs(back: int) -> bytes:
    out = [back & 0x7F]
    back >>= 7
    while back:
        back -= 1
        out.insert(0, 0x80 | (back & 0x7F))
        back >>= 7
    return bytes(out)


def copy_delta(source: int, target: int, copies: int = 1) -> bytes:
    """A delta stating `target` bytes that copies the whole `source` `copies` times."""
    cmd = bytes([0x80 | 0x10 | 0x20, source & 0xFF, (source >> 8) & 0xFF])
    return _varint(source) + _varint(target) + cmd * copies


def make_pack(base: bytes, deltas: list[bytes]) -> bytes:
    """A pack of one blob and a chain of ofs-deltas, each against the entry before it."""
    body = bytearray()
    starts = []
    starts.append(len(body) + 12)
    body += _entry_header(3, len(base)) + zlib.compress(base)
    for delta in deltas:
        start = len(body) + 12
        body += _entry_header(6, len(delta)) + _ofs(start - starts[-1]) + zlib.compress(delta)
        starts.append(start)
    pack = b"PACK" + struct.pack(">II", 2, 1 + len(deltas)) + bytes(body)
    return pack + sha1(pack).digest()
