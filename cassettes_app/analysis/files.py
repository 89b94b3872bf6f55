"""File access below a submission root: walking without links, capped reads (opened by
cassettes_app/safefiles.py)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cassettes_app.limits import MiB
from cassettes_app.parsed import ParsedFinding
from cassettes_app.safefiles import open_regular

_CHUNK = 1 * MiB


@dataclass(frozen=True, slots=True)
class Entry:
    rel: str
    kind: str  # "file" | "link" | "dir_link" | "other"


def walk_tree(root: Path, findings: list[ParsedFinding]) -> list[Entry]:
    """Every entry of the tree, sorted; symlinks are listed, never followed."""
    out: list[Entry] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = list(it)
        except OSError as exc:
            findings.append(
                ParsedFinding(
                    "unreadable", "warn", rel_dir or ".", None, f"cannot list: {exc.strerror}"
                )
            )
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    try:
                        is_dir = entry.is_dir(follow_symlinks=True)
                    except OSError:
                        is_dir = False
                    out.append(Entry(rel, "dir_link" if is_dir else "link"))
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif entry.is_file(follow_symlinks=False):
                    out.append(Entry(rel, "file"))
                else:
                    out.append(Entry(rel, "other"))
            except OSError:
                out.append(Entry(rel, "other"))
    out.sort(key=lambda e: e.rel)
    return out


def read_capped(
    root: Path, rel: str, cap: int, *, hash_large: bool = True
) -> tuple[bytes | None, int, str]:
    """(data, size, sha256) of a regular file; data is None when over `cap`.

    An over-cap file is still hashed (for duplicate detection) unless `hash_large` is False.
    """
    with open_regular(root, rel) as handle:
        info = os.fstat(handle.fileno())
        digest = hashlib.sha256()
        if info.st_size > cap:
            if not hash_large:
                return None, info.st_size, ""
            return None, *_hash_rest(handle, digest, 0)
        # read(n) allocates n bytes up front: ask for the known size, not the cap.
        data = handle.read(info.st_size + 1)
        if len(data) > info.st_size:  # grew since fstat: read on in chunks, up to the cap
            parts = [data]
            size = len(data)
            while size <= cap and (chunk := handle.read(_CHUNK)):
                parts.append(chunk)
                size += len(chunk)
            data = b"".join(parts)
        digest.update(data)
        if len(data) > cap:
            return None, *_hash_rest(handle, digest, len(data))
        return data, len(data), digest.hexdigest()


def _hash_rest(handle: Any, digest: Any, size: int) -> tuple[int, str]:
    """Hash the rest of an open file in chunks; (total size, hex digest)."""
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()
