"""The source files of a submission tree, fingerprinted for `cohort.code_similarity`.

Which files count: regular text files (links never followed, a NUL byte or non-UTF-8 head
skips a file as binary) whose name ends in a source extension, outside dependency and build
folders. Hostile trees stay bounded: at most `MAX_FILES` source files, the first
`MAX_FILE_BYTES` of each (a 50 MB one-line file is fingerprinted on its first MiB, not
skipped), `MAX_TOTAL_BYTES` in all, `MAX_PER_FILE` fingerprints each.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cassettes_app.analysis.files import walk_tree
from cassettes_app.fingerprints import generic_tokens_at, located_fingerprints, python_tokens_at
from cassettes_app.formats.sniff import looks_binary
from cassettes_app.limits import MiB
from cassettes_app.safefiles import open_regular

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_PER_FILE",
    "SourceFile",
    "is_source",
    "source_files",
    "text_fingerprints",
]

MAX_FILES = 2000
MAX_FILE_BYTES = 1 * MiB
MAX_TOTAL_BYTES = 32 * MiB
MAX_PER_FILE = 5000

SOURCE_EXTENSIONS = frozenset(
    {
        ".py", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rb", ".java", ".kt",
        ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".php", ".swift", ".scala", ".sh",
    }
)  # fmt: skip
# Folders of dependencies, builds and caches: nobody's own code.
_SKIPPED_DIRS = frozenset(
    {
        ".git", "node_modules", ".venv", "venv", "env", "site-packages", "__pycache__",
        "vendor", "dist", "build", ".tox", ".mypy_cache", ".pytest_cache", "target",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One fingerprinted source file: its path in the tree, its distinct fingerprints and
    the lines each was first found on (first, last), in the same order."""

    path: str
    hashes: list[int]
    lines: list[tuple[int, int]]


def is_source(rel: str) -> bool:
    path = PurePosixPath(rel)
    return path.suffix.lower() in SOURCE_EXTENSIONS and not _SKIPPED_DIRS & set(path.parts[:-1])


def _read_head(root: Path, rel: str, cap: int) -> bytes | None:
    """The first `cap` bytes of a regular file, or None when it cannot be opened."""
    try:
        with open_regular(root, rel) as handle:
            return handle.read(cap)
    except OSError:
        return None


def source_files(root: Path) -> Iterator[SourceFile]:
    """Every source file of the tree with at least one fingerprint, in path order."""
    budget = MAX_TOTAL_BYTES
    chosen = [e.rel for e in walk_tree(root, []) if e.kind == "file" and is_source(e.rel)]
    for rel in chosen[:MAX_FILES]:
        if budget <= 0:
            return
        data = _read_head(root, rel, min(MAX_FILE_BYTES, budget))
        if not data or looks_binary(data[:8192]):
            continue
        budget -= len(data)
        text = data.decode("utf-8", "replace")
        del data
        located = text_fingerprints(rel, text)
        if located:
            yield SourceFile(rel, [h for h, _, _ in located], [(a, b) for _, a, b in located])


def text_fingerprints(rel: str, text: str) -> list[tuple[int, int, int]]:
    """A source text's fingerprints with their lines (hash, first, last), at most
    `MAX_PER_FILE`: Python through its tokenizer, the rest through the generic lexer."""
    tokens, lines = python_tokens_at(text) if rel.endswith(".py") else generic_tokens_at(text)
    return located_fingerprints(tokens, lines)[:MAX_PER_FILE]
