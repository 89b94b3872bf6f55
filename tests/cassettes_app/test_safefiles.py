"""The one way a file of a hand-in is opened: no link anywhere, a regular file, under root."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from cassettes_app.checks.docs import repofiles
from cassettes_app.formats import parse_path
from cassettes_app.safefiles import NotRegular, OutsideRoot, open_regular
from submissions.deps import declared


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Makefile").write_text("test:\n\tpytest\n")
    (outside / "requirements.txt").write_text("requests==2.32.3\n")
    (outside / "replay.jsonl").write_text('{"url": "http://shop/orders", "method": "GET"}\n')
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "notes.md").write_text("hello")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    return root


def test_it_reads_a_regular_file_under_the_root(tree: Path) -> None:
    with open_regular(tree, "./real/notes.md") as handle:
        assert handle.read() == b"hello"


def test_it_refuses_a_link_at_any_component(tree: Path) -> None:
    (tree / "real" / "leaf.md").symlink_to(tree / "real" / "notes.md")
    for rel in ("linked/Makefile", "real/leaf.md"):
        with pytest.raises(OSError) as caught:
            open_regular(tree, rel)
        assert caught.value.errno == errno.ELOOP, rel


def test_it_refuses_a_path_leaving_the_root(tree: Path) -> None:
    for rel in ("../outside/Makefile", "/etc/passwd", "", "real/../../outside/Makefile"):
        with pytest.raises(OutsideRoot):
            open_regular(tree, rel)


def test_it_refuses_a_fifo_without_blocking_and_a_folder(tree: Path) -> None:
    os.mkfifo(tree / "real" / "pipe")
    for rel in ("real/pipe", "real"):
        with pytest.raises(NotRegular):
            open_regular(tree, rel)


def test_every_reader_of_a_hand_in_refuses_a_linked_folder(tree: Path) -> None:
    """The copies that followed links in folders (docs, declarations, parse_path) now
    refuse them like the analysis always did."""
    assert repofiles.read_text(tree, "linked/Makefile") == (None, False)
    assert declared._read(tree, "linked/requirements.txt") is None
    result = parse_path(str(tree / "linked" / "replay.jsonl"), "linked/replay.jsonl")
    assert [f.message for f in result.findings] == ["symbolic link; not followed"]
    assert parse_path(str(tree / "real" / "notes.md"), "real/notes.md").findings[0].kind == (
        "unknown_format"  # read (not refused), just not a recording
    )
