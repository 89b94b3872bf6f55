"""Reading one member of an archive finds exactly the files unpacking makes, at the same
paths: a single top folder stripped, Finder litter skipped, folders named as folders."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from submissions.intake.archive import extract_archive
from submissions.intake.archive.core import DEFAULT_LIMITS
from submissions.intake.archive.members import NoSuchMember, archive_files, read_member
from tests.archive_factories import tar_bytes, tar_dir, tar_file, zip_bytes

SHAPES = {
    "single root": {"proj/a.txt": b"A", "proj/src/b.py": b"B"},
    "two tops": {"proj/a.txt": b"A", "other/b.txt": b"B"},
    "a file at the top": {"proj/a.txt": b"A", "top.txt": b"T"},
    "root with litter": {"proj/a.txt": b"A", "__MACOSX/proj/._a.txt": b"x",
                         "proj/.DS_Store": b"x", "./proj/c.txt": b"C"},
}  # fmt: skip


def _unpacked(data: bytes, tmp_path: Path) -> list[str]:
    archive = tmp_path / "in"
    archive.write_bytes(data)
    extract_archive(archive, tmp_path / "tree")
    root = tmp_path / "tree"
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )


@pytest.mark.parametrize("fmt", ["zip", "tar", "tar.gz", "tar.bz2"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_members_are_the_files_unpacking_makes(tmp_path, fmt, shape) -> None:
    files = SHAPES[shape]
    if fmt == "zip":
        data = zip_bytes(files)
    else:
        data = tar_bytes([tar_dir("proj/"), *(tar_file(n, d) for n, d in files.items())], fmt)
    made = _unpacked(data, tmp_path)
    listed = archive_files(io.BytesIO(data), len(data), fmt, DEFAULT_LIMITS)
    assert listed == made
    for path in made:
        member = read_member(io.BytesIO(data), len(data), fmt, path, 10, DEFAULT_LIMITS)
        assert member.head == (tmp_path / "tree" / path).read_bytes()
    with pytest.raises(NoSuchMember, match="no such file"):
        read_member(io.BytesIO(data), len(data), fmt, "proj/nope", 10, DEFAULT_LIMITS)


def test_a_member_is_read_only_up_to_the_limit_and_its_size_told() -> None:
    data = tar_bytes({"big.txt": b"x" * 100_000}, "tar.gz")
    member = read_member(io.BytesIO(data), len(data), "tar.gz", "big.txt", 1000, DEFAULT_LIMITS)
    assert (len(member.head), member.size) == (1000, 100_000)
