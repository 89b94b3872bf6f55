"""The tree at a commit, written out through the archive sink: same names, same caps.

Only regular files are written. A symlink or a submodule (a gitlink) is refused as an
archive's link is; a name that is empty, `.`, `..`, holds a slash, or is `.git` in any case
is refused with its rule; a tree nested deeper than the cap is refused before it is read.
Git LFS pointer files are written as they are and listed: their content is not in the
hand-in.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from dulwich.objects import Blob, Commit, ObjectID, Tree

from submissions.intake.archive.core import CHUNK, ArchiveRejected, Limits, corrupt, name_text
from submissions.intake.archive.sink import Sink
from submissions.intake.git.objects import Objects

_GITLINK = 0o160000


_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\n"


_LFS_POINTER_MAX_BYTES = 1024  # git-lfs itself reads at most this much to spot one


@dataclass
class Walked:
    files: int = 0
    lfs_pointers: list[str] = field(default_factory=list)


def _check_name(name: bytes, path: bytes) -> None:
    entry = name_text(path)
    if name == b"..":
        raise ArchiveRejected("zip_slip", "the path escapes the repository", entry)
    if name in (b"", b".") or b"/" in name or b"\0" in name:
        raise ArchiveRejected("bad_name", "the tree entry's name is not a file name", entry)
    # Windows and macOS file systems ignore case and trailing dots and spaces: `.GIT.` is
    # `.git` there, where git itself refuses it (CVE-2014-9390).
    if name.rstrip(b". ").lower() == b".git":
        raise ArchiveRejected("bad_name", "the repository holds a .git path", entry)


def _object(objects: Objects, sha: bytes, kind: type, path: bytes) -> object:
    try:
        obj = objects.store[ObjectID(sha)]
    except KeyError:
        raise ArchiveRejected(
            "incomplete", "the object is not in the pack", name_text(path)
        ) from None
    if not isinstance(obj, kind):
        raise corrupt(f"the entry is not a {kind.__name__.lower()}", path)
    return obj


def _walk(objects: Objects, commit: Commit) -> Iterator[tuple[bytes, bytes, int, bytes]]:
    """(name, path, mode, sha) of every entry of the commit's tree, folders before what
    they hold. A folder is read only after its own entry was handed out, so a caller that
    refuses the entry (raises) stops the walk before anything under it is read."""
    pending: list[tuple[bytes, bytes]] = [(b"", commit.tree)]  # (folder path, tree id)
    while pending:
        folder, tree_id = pending.pop()
        tree = _object(objects, tree_id, Tree, folder or b".")
        assert isinstance(tree, Tree)
        for name, mode, sha in tree.iteritems():
            path = folder + b"/" + name if folder else name
            yield name, path, mode, sha
            if stat.S_ISDIR(mode):
                pending.append((path, sha))


def write_tree(objects: Objects, commit: Commit, sink: Sink, limits: Limits) -> Walked:
    """Write the commit's tree into `sink`, refusing what an archive's rules refuse."""
    walked = Walked()
    entries = 0
    for name, path, mode, sha in _walk(objects, commit):
        entry = name_text(path)
        _check_name(name, path)
        entries += 1
        if entries > limits.max_files:
            raise ArchiveRejected(
                "too_many_files",
                f"the tree has more than {limits.max_files} entries (max_files)",
                entry,
            )
        if stat.S_ISDIR(mode):
            if path.count(b"/") + 1 >= limits.max_depth:
                raise ArchiveRejected(
                    "too_deep",
                    f"the tree is nested more than {limits.max_depth} levels deep (max_depth)",
                    entry,
                )
            sink.place(path, True)
            continue
        if mode == _GITLINK:
            raise ArchiveRejected(
                "link", f"the entry is a submodule (gitlink) at commit {sha.decode()}", entry
            )
        if stat.S_ISLNK(mode):
            blob = _object(objects, sha, Blob, path)
            assert isinstance(blob, Blob)
            target = name_text(blob.as_raw_string()[:200])
            raise ArchiveRejected("link", f"the entry is a symbolic link to {target!r}", entry)
        if not stat.S_ISREG(mode):
            raise ArchiveRejected("special_file", f"the entry has mode {mode:o}", entry)
        _file(objects, sink, path, sha, bool(mode & 0o111), walked)
    return walked


def _file(
    objects: Objects, sink: Sink, path: bytes, sha: bytes, executable: bool, walked: Walked
) -> None:
    parts = sink.place(path, False)
    if parts is None:
        return
    blob = _object(objects, sha, Blob, path)
    assert isinstance(blob, Blob)
    data = blob.as_raw_string()
    if len(data) <= _LFS_POINTER_MAX_BYTES and data.startswith(_LFS_POINTER):
        walked.lfs_pointers.append("/".join(parts))
    chunks = (data[i : i + CHUNK] for i in range(0, len(data), CHUNK))
    sink.file(parts, name_text(path), chunks, None, executable)
    walked.files += 1


def tree_files(objects: Objects, commit: Commit, limits: Limits) -> list[str]:
    """Every regular file path of the commit's tree, as `write_tree` writes them."""
    found: list[str] = []
    for _name, path, mode, _sha in _walk(objects, commit):
        if stat.S_ISREG(mode) and mode != _GITLINK:
            found.append(name_text(path))
        if len(found) > limits.max_files:
            raise ArchiveRejected(
                "too_many_files", f"the tree has more than {limits.max_files} entries"
            )
    return sorted(found)


def tree_blob(objects: Objects, commit: Commit, path: str, limits: Limits) -> Blob:
    """The blob at `path` (a checked relative path) of the commit's tree.

    LookupError says why there is none: no such file, a folder, a link or a submodule.
    """
    tree_id = commit.tree
    parts = path.encode().split(b"/")
    for depth, name in enumerate(parts):
        tree = _object(objects, tree_id, Tree, b"/".join(parts[:depth]) or b".")
        assert isinstance(tree, Tree)
        try:
            mode, sha = tree[name]
        except KeyError:
            raise LookupError("no such file in the submission") from None
        _check_name(name, b"/".join(parts[: depth + 1]))
        last = depth == len(parts) - 1
        if stat.S_ISDIR(mode):
            if last:
                raise LookupError("a folder, not a file")
            tree_id = sha
            continue
        if not last:
            raise LookupError("no such file in the submission")
        if mode == _GITLINK:
            raise LookupError("a submodule, not a file")
        if stat.S_ISLNK(mode):
            raise LookupError("a symbolic link; not followed")
        blob = _object(objects, sha, Blob, path.encode())
        assert isinstance(blob, Blob)
        return blob
    raise LookupError("no such file in the submission")
