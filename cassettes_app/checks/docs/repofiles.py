"""Reading the hand-in's own files for the docs checks, and nothing else.

Files are opened through cassettes_app/safefiles.py (no link anywhere on the way, a
regular file only), capped at 1 MB and decoded leniently, so a 5 MB or binary Makefile is
a finding at worst, never an exception. Folder listings are capped and never followed
through a link.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cassettes_app.safefiles import open_regular

MAX_READ = 1024 * 1024


# Folders never searched for scripts: tests, vendored code, virtualenvs.
SKIP_DIRS = frozenset(
    {".git", "node_modules", ".venv", "venv", "env", "__pycache__", "tests", "test", ".tox"}
)


_MAX_LISTING = 5000


def read_text(root: Path, rel: str) -> tuple[str | None, bool]:
    """(text, truncated) of a regular file under root, links not followed; None if unreadable."""
    try:
        with open_regular(root, rel) as handle:
            data = handle.read(MAX_READ + 1)
    except OSError:
        return None, False
    return data[:MAX_READ].decode("utf-8", "replace"), len(data) > MAX_READ


def listing(root: Path, rel: str = "") -> list[os.DirEntry[str]]:
    """Entries of one folder (capped), or nothing when it is missing or a link."""
    folder = root / rel if rel else root
    try:
        if rel and folder.is_symlink():
            return []
        with os.scandir(folder) as entries:
            out = []
            for entry in entries:
                out.append(entry)
                if len(out) >= _MAX_LISTING:
                    break
            return out
    except OSError:
        return []


def find_file(root: Path, names: Sequence[str], folders: Sequence[str] = ("",)) -> str | None:
    """Relative path of the first regular file (not a link) named like one of `names`.

    Names match case-insensitively; earlier names and folders win.
    """
    for folder in folders:
        files: dict[str, str] = {}
        for entry in listing(root, folder):
            try:
                if entry.is_file(follow_symlinks=False):
                    files.setdefault(entry.name.lower(), entry.name)
            except OSError:
                continue
        for name in names:
            real = files.get(name.lower())
            if real:
                return f"{folder}/{real}" if folder else real
    return None


def exists(root: Path, rel: str) -> bool:
    """A regular file or folder at rel, inside root, not through a link."""
    rel = rel.strip().removeprefix("./")
    if not rel or rel.startswith("/") or ".." in Path(rel).parts:
        return False
    current = root
    for part in Path(rel).parts:
        current = current / part
        if current.is_symlink() or not current.exists():
            return False
    return True


def is_executable(root: Path, rel: str) -> bool:
    try:
        return bool(os.stat(root / rel, follow_symlinks=False).st_mode & 0o111)
    except OSError:
        return False


def is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
