"""A hand-in's git objects, read from a bundle into memory: refs resolved, a commit chosen.

The bundle's header is parsed here (a few lines of text, capped); its pack is measured by
the pack guard before dulwich inflates anything; then dulwich resolves the objects into a
MemoryObjectStore. No git program runs and nothing is written to disk.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from dulwich.errors import ObjectFormatException
from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Commit, ObjectID, ShaFile, Tag
from dulwich.pack import Pack, PackData, PackInflater

from submissions.intake.archive.core import ArchiveRejected, corrupt
from submissions.intake.git.pack import GitLimits, scan_pack

BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")


_MAX_HEADER_BYTES = 1 << 20


_SHA = re.compile(rb"[0-9a-f]{40}")


class ObjectSource(Protocol):
    """Objects by id: a MemoryObjectStore, or a pack read lazily from disk."""

    def __getitem__(self, sha: ObjectID, /) -> ShaFile: ...
    def __contains__(self, sha: ObjectID, /) -> bool: ...


@dataclass
class Objects:
    """The refs a bundle names and the objects it carries."""

    refs: dict[bytes, bytes]  # ref name -> object id (hex)
    store: ObjectSource
    head: bytes | None = None  # the ref HEAD points to, when the bundle says
    symrefs: dict[bytes, bytes] = field(default_factory=dict)


def _header(data: bytes) -> tuple[dict[bytes, bytes], int]:
    """The refs of a bundle's header, and where its pack starts."""
    if not data.startswith(BUNDLE_SIGNATURES):
        raise ArchiveRejected("not_an_archive", "the file is not a git bundle")
    end = data.find(b"\n\n", 0, _MAX_HEADER_BYTES)
    if end < 0:
        raise corrupt("the bundle's header does not end (or is over 1 MiB)")
    refs: dict[bytes, bytes] = {}
    for line in data[len(BUNDLE_SIGNATURES[0]) : end].split(b"\n"):
        if line.startswith(b"@"):
            key, _, value = line[1:].partition(b"=")
            if key == b"object-format" and value == b"sha1":
                continue
            raise ArchiveRejected(
                "unsupported", f"the bundle capability {line[1:].decode(errors='replace')!r}"
            )
        if line.startswith(b"-"):
            raise ArchiveRejected(
                "incomplete",
                "the bundle needs commits it does not carry (made with a range such as"
                " main~3..main); make it with `git bundle create FILE --all`",
            )
        sha, _, name = line.partition(b" ")
        if not _SHA.fullmatch(sha) or not name:
            raise corrupt(f"a bundle header line is malformed: {line[:80]!r}")
        refs[name] = sha
    if not refs:
        raise ArchiveRejected("empty", "the bundle names no refs")
    return refs, end + 2


def read_bundle(data: bytes, limits: GitLimits) -> Objects:
    """The refs and objects of a bundle, every cap checked before any object is resolved."""
    refs, start = _header(data)
    pack = data[start:]
    scan_pack(pack, limits)
    store = MemoryObjectStore()
    try:
        pack_data = PackData.from_file(io.BytesIO(pack), DEFAULT_OBJECT_FORMAT, size=len(pack))
        try:
            for obj in PackInflater.for_pack_data(pack_data):
                store.add_object(obj)
        finally:
            pack_data.close()
    except KeyError as exc:  # a ref-delta whose base the pack does not carry
        raise ArchiveRejected("incomplete", f"the pack lacks the object {exc}") from None
    except (ObjectFormatException, ValueError, AssertionError) as exc:
        raise corrupt(f"the pack does not read ({exc})") from None
    return _with_head(refs, store)


def read_bundle_indexed(bundle: Path, basename: Path, limits: GitLimits) -> tuple[Objects, Pack]:
    """The refs and objects of a stored bundle, its objects read lazily from its pack.

    The pack is copied out and indexed once, at `basename`.pack/.idx (a per-host cache),
    after the pack guard; later reads open the index and inflate only the objects asked
    for, instead of every object of the history. Close the returned Pack when done.
    """
    with bundle.open("rb") as fh:
        refs, start = _header(fh.read(_MAX_HEADER_BYTES + len(BUNDLE_SIGNATURES[0]) + 2))
        pack_path, idx_path = Path(f"{basename}.pack"), Path(f"{basename}.idx")
        if not (pack_path.is_file() and idx_path.is_file()):
            fh.seek(start)
            _index(fh.read(), basename, limits)
    try:
        pack = Pack(str(basename), object_format=DEFAULT_OBJECT_FORMAT)
    except (OSError, ValueError, AssertionError) as exc:
        raise corrupt(f"the indexed pack does not read ({exc})") from None
    return _with_head(refs, pack), pack


def _index(pack: bytes, basename: Path, limits: GitLimits) -> None:
    """Write `pack` and its index at `basename`, both in place or neither."""
    scan_pack(pack, limits)
    basename.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".index-", dir=basename.parent))
    try:
        (scratch / "p.pack").write_bytes(pack)
        data = PackData(scratch / "p.pack", DEFAULT_OBJECT_FORMAT)
        try:
            data.create_index(str(scratch / "p.idx"))
        except KeyError as exc:
            raise ArchiveRejected("incomplete", f"the pack lacks the object {exc}") from None
        except (ObjectFormatException, ValueError, AssertionError) as exc:
            raise corrupt(f"the pack does not read ({exc})") from None
        finally:
            data.close()
        # The index last: a reader that finds it finds the pack too.
        os.replace(scratch / "p.pack", f"{basename}.pack")
        os.replace(scratch / "p.idx", f"{basename}.idx")
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()


def _with_head(refs: dict[bytes, bytes], store: ObjectSource) -> Objects:
    head = refs.pop(b"HEAD", None)
    objects = Objects(refs, store)
    if head is not None:
        named = sorted(name for name, sha in refs.items() if sha == head)
        objects.head = named[0] if len(named) == 1 else None
        if objects.head is None:
            objects.refs[b"HEAD"] = head
    return objects


def _get(objects: Objects, sha: bytes, what: str) -> ShaFile:
    try:
        return objects.store[ObjectID(sha)]
    except KeyError:
        raise ArchiveRejected("incomplete", f"{what} {sha.decode()} is not in the pack") from None


def resolve_ref(objects: Objects, ref: str | None) -> tuple[str, Commit]:
    """The ref to judge (by name, HEAD's, or the only one) and the commit it names."""
    refs = objects.refs
    if ref:
        wanted = ref.encode()
        for name in (wanted, b"refs/heads/" + wanted, b"refs/tags/" + wanted):
            if name in refs:
                return name.decode(), _peel(objects, refs[name], name.decode())
        if _SHA.fullmatch(wanted) and ObjectID(wanted) in objects.store:
            return ref, _peel(objects, wanted, ref)
        known = ", ".join(sorted(n.decode(errors="replace") for n in refs)) or "none"
        raise ArchiveRejected("no_such_ref", f"the ref {ref!r} is not there (refs: {known})")
    if objects.head is not None:
        name = objects.head
    elif len(refs) == 1:
        name = next(iter(refs))
    else:
        known = ", ".join(sorted(n.decode(errors="replace") for n in refs))
        raise ArchiveRejected(
            "no_such_ref", f"name the ref to judge with --ref; there are several: {known}"
        )
    return name.decode(), _peel(objects, refs[name], name.decode())


def _peel(objects: Objects, sha: bytes, name: str) -> Commit:
    """The commit a ref names, through annotated tags."""
    obj = _get(objects, sha, f"the object of {name}")
    for _ in range(16):
        if not isinstance(obj, Tag):
            break
        obj = _get(objects, obj.object[1], f"the object tagged by {name}")
    if not isinstance(obj, Commit):
        raise ArchiveRejected("no_such_ref", f"{name} does not name a commit")
    return obj


def commit_subject(commit: Commit) -> str:
    """The first line of a commit's message, as text, at most 300 characters."""
    return commit.message.decode("utf-8", "replace").strip().split("\n", 1)[0][:300]


def commit_before(objects: Objects, tip: Commit, before: datetime, limits: GitLimits) -> Commit:
    """The newest commit reachable from `tip` whose commit date is at or before `before`."""
    cutoff = before.timestamp()
    best: Commit | None = None
    seen: set[bytes] = set()
    pending = [tip]
    while pending:
        commit = pending.pop()
        if commit.id in seen:
            continue
        seen.add(commit.id)
        if len(seen) > limits.max_commits:
            raise ArchiveRejected(
                "history_too_large",
                f"more than {limits.max_commits} commits to search (max_commits)",
            )
        if commit.commit_time <= cutoff and (best is None or commit.commit_time > best.commit_time):
            best = commit
        for parent in commit.parents:
            found = _get(objects, parent, "the parent commit")
            if isinstance(found, Commit):
                pending.append(found)
    if best is None:
        raise ArchiveRejected(
            "no_commit_before", f"no commit on the ref is dated at or before {before.isoformat()}"
        )
    return best
