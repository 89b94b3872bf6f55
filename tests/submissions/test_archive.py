"""Safe unpacking of candidate archives: the intake policy and test cases A-01..A-16."""

from __future__ import annotations

import hashlib
import lzma
import os
import pickle
import random
import shutil
import stat
import subprocess
import tarfile
import unicodedata
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from submissions.intake.archive import (
    RULES,
    ArchiveRejected,
    ExtractResult,
    Limits,
    detect_format,
    extract_archive,
    sha256_file,
)
from tests.archive_factories import (
    REPO,
    TAR_END,
    RawMember,
    compress,
    overlapping_zip_quoted_header,
    overlapping_zip_shared_header,
    pax_entry,
    raw_zip,
    tar_bytes,
    tar_dir,
    tar_entry,
    tar_file,
    tar_header,
    tar_link,
    tar_special,
    zip_bytes,
    zip_info,
)

FORMATS = ["zip", "tar", "tar.gz", "tar.bz2", "tar.xz"]
KIB = 1024
DEFAULTS = Limits()
Tree = dict[str, tuple[str, int, bytes]]  # path -> (kind, permission bits, content)


def archive_of(files: dict[str, bytes], fmt: str) -> bytes:
    """`files` packed as `fmt`."""
    return zip_bytes(files) if fmt == "zip" else tar_bytes(files, fmt)


def tree_of(root: Path) -> Tree:
    """Every path under root with its kind, permission bits and content."""
    tree = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            tree[path.relative_to(root).as_posix()] = (
                "file",
                stat.S_IMODE(mode),
                path.read_bytes(),
            )
        else:
            kind = "dir" if stat.S_ISDIR(mode) else "other"
            tree[path.relative_to(root).as_posix()] = (kind, stat.S_IMODE(mode), b"")
    return tree


@dataclass
class Bench:
    """Archives in `inbox`; the destination deep under `out`, so escapes land inside `root`."""

    root: Path

    @property
    def out(self) -> Path:
        return self.root / "outer" / "mid" / "out"

    @property
    def dest(self) -> Path:
        return self.out / "tree"

    def write(self, data: bytes, name: str = "upload.zip") -> Path:
        path = self.root / "inbox" / name
        path.write_bytes(data)
        return path

    def snapshot(self) -> Tree:
        return tree_of(self.root)


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    """A tmp_path sandwich: inbox/ for archives and outer/mid/out/ for the destination."""
    bench = Bench(tmp_path)
    (tmp_path / "inbox").mkdir()
    bench.out.mkdir(parents=True)
    return bench


def assert_rejected(
    bench: Bench, data: bytes, rule: str, entry: str | None, limits: Limits = DEFAULTS
) -> ArchiveRejected:
    """Extracting `data` fails on `rule` at `entry`, leaving no trace anywhere."""
    archive = bench.write(data)
    before = bench.snapshot()
    with pytest.raises(ArchiveRejected) as caught:
        extract_archive(archive, bench.dest, limits)
    exc = caught.value
    assert (exc.rule, exc.entry) == (rule, entry), str(exc)
    assert exc.rule in RULES
    assert not os.path.lexists(bench.dest)
    assert not [p for p in bench.out.iterdir() if ".partial" in p.name]
    assert bench.snapshot() == before  # nothing written outside, nothing left behind
    return exc


def extract(bench: Bench, data: bytes, limits: Limits = DEFAULTS) -> tuple[ExtractResult, Tree]:
    """Extract `data` and return the result with the unpacked tree."""
    result = extract_archive(bench.write(data), bench.dest, limits)
    return result, tree_of(bench.dest)


def expected_tree(files: dict[str, bytes]) -> Tree:
    """The tree `files` should unpack to, folders implied."""
    tree = {}
    for name, data in files.items():
        parts = name.split("/")
        for depth in range(1, len(parts)):
            tree["/".join(parts[:depth])] = ("dir", 0o755, b"")
        tree[name] = ("file", 0o644, data)
    return dict(sorted(tree.items()))


# --- what goes through ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_unpacks_every_supported_format(bench: Bench, fmt: str) -> None:
    """Each format unpacks to the same tree, with counts and the format named."""
    result, tree = extract(bench, archive_of(REPO, fmt))
    assert tree == expected_tree(REPO)
    assert (result.format, result.files, result.stripped_root) == (fmt, len(REPO), None)
    assert result.total_bytes == sum(len(data) for data in REPO.values())
    assert stat.S_IMODE(bench.dest.stat().st_mode) == 0o755


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_detects_the_format_by_magic_bytes_not_the_extension(bench: Bench, fmt: str) -> None:
    """A tar.xz named .zip is still a tar.xz."""
    assert detect_format(bench.write(archive_of(REPO, fmt), "misnamed.zip")) == fmt


@pytest.mark.parametrize(
    "tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]
)
def test_it_reads_long_names_in_every_tar_dialect(bench: Bench, tar_format: int) -> None:
    """ustar prefixes, GNU long-name headers and pax paths all give the full name."""
    files = {"a" * 120 + "/" + "b" * 90 + ".txt": b"long", "short.txt": b"short"}
    _, tree = extract(bench, tar_bytes(files, "tar.gz", tar_format=tar_format))
    assert tree == expected_tree(files)


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar is not installed")
@pytest.mark.parametrize("dialect", ["gnu", "posix", "ustar"])
def test_it_reads_archives_made_by_gnu_tar(bench: Bench, tmp_path: Path, dialect: str) -> None:
    """GNU tar's "./" entries and pax headers (atime, ctime) go through."""
    src = tmp_path / "src"
    for name, data in REPO.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    archive = bench.root / "inbox" / "gnu.tar.gz"
    subprocess.run(["tar", f"--format={dialect}", "-czf", archive, "-C", src, "."], check=True)
    result = extract_archive(archive, bench.dest)
    assert tree_of(bench.dest) == expected_tree(REPO)
    assert result.stripped_root is None


def test_it_reads_a_github_style_tarball_with_a_global_pax_header(bench: Bench) -> None:
    """git archive puts the commit id in a global pax header before the entries."""
    data = (
        pax_entry({b"comment": b"0123456789abcdef0123456789abcdef01234567"}, kind=b"g")
        + tar_entry(b"proj-0123/", kind=b"5")
        + tar_entry(b"proj-0123/README.md", b"hi\n")
        + TAR_END
    )
    result, tree = extract(bench, compress(data, "tar.gz"))
    assert tree == expected_tree({"README.md": b"hi\n"})
    assert result.stripped_root == "proj-0123"


def test_it_reads_zip64_records(bench: Bench) -> None:
    """Sizes and offsets held in the zip64 extra field and end record are honoured."""
    data = raw_zip([RawMember(b"a.txt", b"alpha"), RawMember(b"b/c.txt", b"gamma")], zip64=True)
    _, tree = extract(bench, data)
    assert tree == expected_tree({"a.txt": b"alpha", "b/c.txt": b"gamma"})


def test_it_accepts_ascii_and_flagged_utf8_zip_names(bench: Bench) -> None:
    """An unflagged ASCII name and a UTF-8-flagged name are both fine."""
    data = raw_zip(
        [RawMember(b"plain.txt", b"1"), RawMember("café.md".encode(), b"2", flags=0x800)]
    )
    _, tree = extract(bench, data)
    assert set(tree) == {"plain.txt", "café.md"}


def test_it_strips_a_single_top_level_folder(bench: Bench) -> None:
    """A host's "download ZIP" (everything under repo-main/) unpacks as that folder."""
    data = zip_bytes({f"repo-main/{name}": content for name, content in REPO.items()})
    result, tree = extract(bench, data)
    assert result.stripped_root == "repo-main"
    assert stat.S_IMODE(bench.dest.stat().st_mode) == 0o755
    assert tree == expected_tree(REPO)


def test_it_ignores_macos_litter_when_finding_the_top_folder(bench: Bench) -> None:
    """__MACOSX/ and .DS_Store are dropped, so the real folder is still stripped."""
    data = zip_bytes(
        {
            "repo/README.md": b"hi",
            "repo/.DS_Store": b"\0\0\0\1Bud1",
            "__MACOSX/repo/._README.md": b"\0\5\26\7",
        }
    )
    result, tree = extract(bench, data)
    assert (result.stripped_root, result.files) == ("repo", 1)
    assert tree == expected_tree({"README.md": b"hi"})


@pytest.mark.parametrize(
    "files",
    [
        {"README.md": b"hi"},
        {"repo/README.md": b"hi", "notes.txt": b"x"},
        {"repo/README.md": b"hi", "other/a.txt": b"x"},
    ],
    ids=["lone-file", "folder-and-file", "two-folders"],
)
def test_it_keeps_the_layout_without_a_single_top_folder(
    bench: Bench, files: dict[str, bytes]
) -> None:
    """Nothing is stripped unless one folder holds everything."""
    result, tree = extract(bench, zip_bytes(files))
    assert result.stripped_root is None
    assert tree == expected_tree(files)


@pytest.fixture
def strict_umask() -> Iterator[None]:
    """A umask of 077, under which a plain os.open(..., 0o644) would give 0600."""
    previous = os.umask(0o077)
    yield
    os.umask(previous)


@pytest.mark.usefixtures("strict_umask")
def test_it_writes_zip_files_0644_or_0755_and_folders_0755_whatever_the_archive_says(
    bench: Bench,
) -> None:
    """setuid and world-writable bits from a zip are dropped; only "executable" survives."""
    data = zip_bytes(
        [
            (zip_info("bin/", mode=stat.S_IFDIR | 0o777), b""),
            (zip_info("bin/suid", mode=stat.S_IFREG | 0o4755), b"#!/bin/sh\n"),
            (zip_info("bin/open", mode=stat.S_IFREG | 0o777), b"x"),
            (zip_info("README.md", mode=stat.S_IFREG | 0o666), b"hi"),
        ]
    )
    _, tree = extract(bench, data)
    assert {path: mode for path, (_, mode, _) in tree.items()} == {
        "README.md": 0o644,
        "bin": 0o755,
        "bin/open": 0o755,
        "bin/suid": 0o755,
    }


@pytest.mark.usefixtures("strict_umask")
def test_it_writes_tar_files_0644_or_0755_and_folders_0755_whatever_the_archive_says(
    bench: Bench,
) -> None:
    """Modes 4755/0777 and the archive's owner do not reach the disk (A-15); a script that
    was executable stays executable (0755), so `./run.sh` still runs."""
    suid, data = tar_file("bin/suid", b"#!/bin/sh\n", mode=0o4755)
    # Not uid 0: the suite may run as root, where honouring uid 0 would go unnoticed.
    suid.uid = suid.gid = 4242
    members = [
        tar_dir("bin", mode=0o777),
        (suid, data),
        tar_file("bin/open", b"x", mode=0o777),
        tar_file("README.md", b"hi", mode=0o666),
    ]
    _, tree = extract(bench, tar_bytes(members, "tar.gz"))
    assert {path: mode for path, (_, mode, _) in tree.items()} == {
        "README.md": 0o644,
        "bin": 0o755,
        "bin/open": 0o755,
        "bin/suid": 0o755,
    }
    assert (bench.dest / "bin/suid").stat().st_uid == os.getuid()


def test_it_stores_nested_archives_as_opaque_files(bench: Bench) -> None:
    """An inner zip (42.zip style) is a file like any other, never expanded."""
    inner = zip_bytes({"deeper.zip": zip_bytes({"bomb.txt": bytes(100 * KIB)})})
    _, tree = extract(
        bench, zip_bytes({"inner.zip": inner, "inner.tar.gz": tar_bytes(REPO, "tar.gz")})
    )
    assert tree["inner.zip"] == ("file", 0o644, inner)
    assert set(tree) == {"inner.zip", "inner.tar.gz"}


def test_it_gives_identical_trees_for_the_same_archive_twice(bench: Bench) -> None:
    """The same bytes give the same sha256 and the same tree (A-16)."""
    archive = bench.write(zip_bytes({f"repo/{name}": data for name, data in REPO.items()}))
    first = extract_archive(archive, bench.out / "one")
    second = extract_archive(archive, bench.out / "two")
    assert first == second
    assert tree_of(bench.out / "one") == tree_of(bench.out / "two")
    assert sha256_file(archive) == hashlib.sha256(archive.read_bytes()).hexdigest()


def test_it_accepts_small_highly_compressible_files_below_the_ratio_floor(bench: Bench) -> None:
    """A 512 KiB run of spaces (ratio ~1000:1) is under the 1 MiB floor."""
    files = {"pretty.json": b" " * (512 * KIB)}
    result, _ = extract(bench, zip_bytes(files))
    assert result.total_bytes == 512 * KIB


def test_it_refuses_an_existing_destination(bench: Bench) -> None:
    """The destination is created, never merged into."""
    bench.dest.mkdir()
    (bench.dest / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="already exists"):
        extract_archive(bench.write(zip_bytes(REPO)), bench.dest)
    assert [p.name for p in bench.dest.iterdir()] == ["keep.txt"]
    assert [p.name for p in bench.out.iterdir()] == ["tree"]


def test_it_hashes_a_file_larger_than_one_read(tmp_path: Path) -> None:
    """sha256_file matches hashlib on a file bigger than one read."""
    path = tmp_path / "blob"
    path.write_bytes(random.Random(1).randbytes(3 * 2**20 + 7))
    assert sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_rejection_message_names_the_entry_and_the_rule(bench: Bench) -> None:
    """str(exc) is one sentence a reviewer can act on; the exception pickles for Celery."""
    exc = assert_rejected(bench, zip_bytes({"../x": b"boom"}), "zip_slip", "../x")
    assert str(exc) == "entry '../x': the path escapes the archive (zip_slip)"
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.rule, copy.entry, str(copy)) == (exc.rule, exc.entry, str(exc))


# --- names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize("name", ["../x", "a/../../x", "../../evil.txt", "ok/../../../x"])
def test_it_rejects_zip_slip(bench: Bench, fmt: str, name: str) -> None:
    """A `..` component is refused, not stripped into a silent rename (A-01)."""
    assert_rejected(bench, archive_of({"README.md": b"hi", name: b"boom"}, fmt), "zip_slip", name)


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize("name", ["/etc/cron.d/x", "C:\\x", "C:x", "\\x", "//server/share/x"])
def test_it_rejects_absolute_paths(bench: Bench, fmt: str, name: str) -> None:
    """Leading slashes, backslashes and drive letters are refused (A-02)."""
    assert_rejected(bench, archive_of({name: b"boom"}, fmt), "absolute_path", name)


def test_it_rejects_a_backslash_traversal_as_zip_slip(bench: Bench) -> None:
    """`..\\..\\x` escapes on Windows tools, so it counts as zip slip (A-02)."""
    assert_rejected(bench, zip_bytes({"..\\..\\x": b"boom"}), "zip_slip", "..\\..\\x")


def test_it_rejects_backslashes_in_names(bench: Bench) -> None:
    """A backslash is a separator to some tools and a character to others: refused."""
    assert_rejected(bench, zip_bytes({"src\\app.py": b"x"}), "bad_name", "src\\app.py")


@pytest.mark.parametrize("name", ["a\nb.txt", "tab\there.txt", "esc\x1b[31m.txt", "del\x7f.txt"])
def test_it_rejects_control_characters_in_names(bench: Bench, name: str) -> None:
    """Newlines and escapes in names would forge log lines and terminal output (A-12)."""
    assert_rejected(bench, zip_bytes({name: b"x"}), "bad_name", name)


def test_it_rejects_a_nul_in_a_zip_name(bench: Bench) -> None:
    """zipfile would cut the name at the NUL; we refuse it (A-12)."""
    assert_rejected(
        bench, raw_zip([RawMember(b"evil.txt\0.png", b"x")]), "bad_name", "evil.txt\0.png"
    )


def test_it_rejects_a_nul_in_a_tar_pax_path(bench: Bench) -> None:
    """A pax path can carry a NUL that a ustar name field cannot (A-12)."""
    data = pax_entry({b"path": b"evil.txt\0.png"}) + tar_entry(b"placeholder", b"x") + TAR_END
    assert_rejected(bench, data, "bad_name", "evil.txt\0.png")


@pytest.mark.parametrize(
    ("raw", "flags"), [(b"bad\xff.txt", 0x800), (b"caf\x82.txt", 0)], ids=["flagged", "cp437"]
)
def test_it_rejects_zip_names_that_are_not_utf8(bench: Bench, raw: bytes, flags: int) -> None:
    """A name that is not UTF-8, flagged or not, is refused with its bytes escaped (A-12)."""
    entry = raw.decode("utf-8", "backslashreplace")
    assert_rejected(bench, raw_zip([RawMember(raw, b"x", flags=flags)]), "bad_name", entry)


def test_it_rejects_tar_names_that_are_not_utf8(bench: Bench) -> None:
    """Raw bytes in a ustar name are refused with the bytes escaped (A-12)."""
    data = tar_bytes([tar_file("bad\udcff.txt", b"x")], "tar.gz", tar_format=tarfile.USTAR_FORMAT)
    assert_rejected(bench, data, "bad_name", "bad\\xff.txt")


@pytest.mark.parametrize("fmt", ["zip", "tar"])
def test_it_rejects_a_path_too_deep(bench: Bench, fmt: str) -> None:
    """40 levels is over the 32-level limit (A-12)."""
    name = "d/" * 40 + "f.txt"
    assert_rejected(bench, archive_of({name: b"x"}, fmt), "too_deep", name)


@pytest.mark.parametrize("fmt", ["zip", "tar"])
@pytest.mark.parametrize(
    "name", ["n" * 300 + ".txt", "/".join(["p" * 200] * 6)], ids=["component", "path"]
)
def test_it_rejects_names_too_long(bench: Bench, fmt: str, name: str) -> None:
    """A 300-byte component or a 1200-byte path is refused (A-12)."""
    assert_rejected(bench, archive_of({name: b"x"}, fmt), "name_too_long", name)


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_it_rejects_names_that_collide_when_case_is_ignored(bench: Bench, fmt: str) -> None:
    """README and readme would overwrite each other on macOS or Windows (A-13)."""
    data = archive_of({"README": b"one", "src/a.py": b"", "readme": b"two"}, fmt)
    exc = assert_rejected(bench, data, "collision", "readme")
    assert "'README'" in str(exc)


def test_it_rejects_folders_that_collide_when_case_is_ignored(bench: Bench) -> None:
    """Src/ and src/ are one folder on a case-insensitive disk."""
    assert_rejected(bench, zip_bytes({"Src/a.py": b"", "src/b.py": b""}), "collision", "src/b.py")


def test_it_rejects_names_that_differ_only_in_unicode_normalisation(bench: Bench) -> None:
    """Composed and decomposed é are the same name on macOS."""
    composed, decomposed = (unicodedata.normalize(form, "café.md") for form in ("NFC", "NFD"))
    data = zip_bytes({composed: b"1", decomposed: b"2"})
    assert_rejected(bench, data, "collision", decomposed)


def test_it_rejects_a_path_that_is_both_a_file_and_a_folder(bench: Bench) -> None:
    """`a` as a file and then `a/b` cannot both exist."""
    assert_rejected(bench, zip_bytes({"a": b"file", "a/b": b"x"}), "collision", "a/b")


@pytest.mark.parametrize("fmt", ["zip", "tar"])
def test_it_rejects_duplicate_entries(bench: Bench, fmt: str) -> None:
    """The same file twice would let a later copy override what a reviewer saw first."""
    if fmt == "zip":
        data = zip_bytes([("a.txt", b"seen"), ("a.txt", b"hidden")])
    else:
        data = tar_bytes([tar_file("a.txt", b"seen"), tar_file("a.txt", b"hidden")])
    assert_rejected(bench, data, "duplicate", "a.txt")


# --- entry types ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("link", "/etc"),
        ("a/b", "../../.."),
        ("escape/", "/tmp"),  # gh-149486: a trailing slash on the link's own name
        ("unnormalised", "a/../../x"),  # gh-149486: containment checked before normpath
        ("self", "."),  # gh-149486: a link to the destination itself
        ("inside", "README.md"),  # even a harmless-looking link
    ],
)
def test_it_rejects_tar_symlinks(bench: Bench, name: str, target: str) -> None:
    """No link is ever created, whatever its target and the Python patch level (A-03, A-04)."""
    data = tar_bytes([tar_file("README.md", b"hi"), tar_link(name, target)], "tar.gz")
    exc = assert_rejected(bench, data, "link", name)
    assert repr(target) in str(exc)


def test_it_rejects_a_symlink_then_a_file_through_it(bench: Bench) -> None:
    """`link -> /etc` followed by `link/passwd2` stops at the link (A-03)."""
    data = tar_bytes([tar_link("link", "/etc"), tar_file("link/passwd2", b"root::0:0::/:/bin/sh")])
    assert_rejected(bench, data, "link", "link")


@pytest.mark.parametrize("target", ["/etc/passwd", "README.md"])
def test_it_rejects_tar_hardlinks(bench: Bench, target: str) -> None:
    """Hard links are refused whether they point outside or to an earlier member (A-05)."""
    members = [tar_file("README.md", b"hi"), tar_link("copy", target, kind=tarfile.LNKTYPE)]
    assert_rejected(bench, tar_bytes(members, "tar.gz"), "link", "copy")


def test_it_rejects_a_zip_symlink_entry(bench: Bench) -> None:
    """S_IFLNK in external_attr marks a symlink that `unzip` would create."""
    data = zip_bytes([("README.md", b"hi"), (zip_info("etc", mode=stat.S_IFLNK | 0o777), b"/etc")])
    assert_rejected(bench, data, "link", "etc")


@pytest.mark.parametrize(
    "kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE], ids=["fifo", "chr", "blk"]
)
def test_it_rejects_tar_special_files(bench: Bench, kind: bytes) -> None:
    """FIFOs and devices are refused (A-06)."""
    data = tar_bytes([tar_file("README.md", b"hi"), tar_special("dev/thing", kind)])
    assert_rejected(bench, data, "special_file", "dev/thing")


def test_it_rejects_a_zip_fifo_entry(bench: Bench) -> None:
    """A FIFO type in external_attr is refused like a tar FIFO."""
    data = zip_bytes([(zip_info("pipe", mode=stat.S_IFIFO | 0o644), b"")])
    assert_rejected(bench, data, "special_file", "pipe")


def test_it_rejects_sparse_tar_members(bench: Bench) -> None:
    """A GNU sparse member could expand from nothing: refused."""
    data = pax_entry({b"GNU.sparse.major": b"1", b"GNU.sparse.minor": b"0"})
    data += tar_entry(b"holes.bin", b"x") + TAR_END
    assert_rejected(bench, data, "special_file", "holes.bin")


def test_it_rejects_unknown_tar_entry_types(bench: Bench) -> None:
    """A volume label ('V') or any other type is not a file or a folder."""
    data = tar_entry(b"README.md", b"hi") + tar_entry(b"LABEL", kind=b"V") + TAR_END
    assert_rejected(bench, data, "special_file", "LABEL")


# --- bombs and counts ----------------------------------------------------------------------


def test_it_rejects_a_zip_bomb_by_ratio(bench: Bench) -> None:
    """One member of zeros expanding ~1000:1 stops past the floor (A-08)."""
    # Incompressible ballast keeps the archive-wide ratio low, so the member's own is tested.
    ballast = random.Random(5).randbytes(256 * KIB)
    data = zip_bytes({"ballast.bin": ballast, "bomb.bin": bytes(2 * 2**20)})
    limits = Limits(ratio_floor_bytes=64 * KIB)
    exc = assert_rejected(bench, data, "ratio", "bomb.bin", limits)
    assert "max_ratio" in str(exc)


def test_it_rejects_an_archive_whose_total_ratio_is_too_high(bench: Bench) -> None:
    """Many members, each under the floor, still add up to a bomb."""
    files = {f"f{i:02}.bin": bytes(60 * KIB) for i in range(40)}
    data = zip_bytes(files)
    limits = Limits(ratio_floor_bytes=64 * KIB)
    first_over = next(i for i in range(40) if (i + 1) * 60 * KIB > 50 * len(data))
    exc = assert_rejected(bench, data, "ratio", f"f{first_over:02}.bin", limits)
    assert "max_total_ratio" in str(exc)


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_rejects_a_single_member_over_the_file_cap(bench: Bench, fmt: str) -> None:
    """A member of zeros larger than the per-file cap is refused, naming the limit (A-08)."""
    data = archive_of({"README.md": b"hi", "zeros.bin": bytes(256 * KIB)}, fmt)
    exc = assert_rejected(
        bench, data, "file_too_large", "zeros.bin", Limits(max_file_bytes=64 * KIB)
    )
    assert "max_file_bytes" in str(exc)


@pytest.mark.parametrize("fmt", ["zip", "tar.xz"])
def test_it_rejects_an_archive_over_the_total_cap(bench: Bench, fmt: str) -> None:
    """Members each under the file cap are stopped when their sum passes the total (A-08)."""
    noise = random.Random(7).randbytes
    data = archive_of(
        {"a.bin": noise(40 * KIB), "b.bin": noise(40 * KIB), "c.bin": noise(40 * KIB)}, fmt
    )
    exc = assert_rejected(
        bench, data, "total_too_large", "c.bin", Limits(max_total_bytes=100 * KIB)
    )
    assert "max_total_bytes" in str(exc)


def test_it_counts_skipped_tar_data_against_the_stream_cap(bench: Bench) -> None:
    """A bomb hidden in ignored __MACOSX/ data still stops at the stream's cap."""
    data = tar_bytes({"README.md": b"hi", "__MACOSX/._bomb": bytes(2 * 2**20)}, "tar.gz")
    limits = Limits(max_total_bytes=64 * KIB, max_files=10)
    assert_rejected(bench, data, "total_too_large", None, limits)


def test_it_counts_actual_bytes_when_the_zip_header_lies(bench: Bench) -> None:
    """A header claiming 100 bytes cannot smuggle 8 MiB past the per-file cap (A-09)."""
    liar = RawMember(b"small.txt", bytes(8 * 2**20), file_size=100)
    assert_rejected(
        bench, raw_zip([liar]), "file_too_large", "small.txt", Limits(max_file_bytes=64 * KIB)
    )


def test_it_rejects_a_zip_whose_size_claim_is_wrong_under_the_caps(bench: Bench) -> None:
    """A size lie that stays under every cap is still caught when the member ends."""
    liar = RawMember(b"small.txt", b"x" * 1000, file_size=100)
    assert_rejected(bench, raw_zip([liar]), "corrupt", "small.txt")


@pytest.mark.parametrize(
    "data",
    [overlapping_zip_shared_header(), overlapping_zip_quoted_header()],
    ids=["shared", "quoted"],
)
def test_it_rejects_overlapping_zip_entries(bench: Bench, data: bytes) -> None:
    """Entries that share compressed bytes (Fifield's non-recursive bomb) are refused (A-10)."""
    assert_rejected(bench, data, "overlap", "b.txt")


def test_it_rejects_a_zip_with_too_many_entries(bench: Bench) -> None:
    """The count in the central directory is checked before anything is read (A-11)."""
    data = zip_bytes({f"f{i:02}.txt": b"" for i in range(30)})
    assert_rejected(bench, data, "too_many_files", None, Limits(max_files=20))


def test_it_rejects_a_tar_with_too_many_entries(bench: Bench) -> None:
    """A tar is counted as it streams and stops at the first entry over (A-11)."""
    data = tar_bytes({f"f{i:02}.txt": b"" for i in range(30)}, "tar.gz")
    assert_rejected(bench, data, "too_many_files", "f20.txt", Limits(max_files=20))


def test_it_counts_folders_against_the_entry_cap(bench: Bench) -> None:
    """Deep, distinct paths would make many inodes from few entries."""
    data = zip_bytes({f"d{i}/e/f/g.txt": b"" for i in range(10)})
    assert_rejected(bench, data, "too_many_files", "d6/e/f/g.txt", Limits(max_files=20))


def test_it_bounds_xz_decoder_memory(bench: Bench) -> None:
    """An xz stream whose dictionary needs more memory than allowed is refused."""
    data = tar_bytes(REPO)
    packed = lzma.compress(data, preset=6)  # an 8 MiB dictionary
    assert_rejected(bench, packed, "decoder_memory", None, Limits(max_xz_memory_bytes=2**20))


def test_it_rejects_an_oversized_tar_extended_header(bench: Bench) -> None:
    """A pax header claiming megabytes is refused before it is read."""
    data = tar_header(b"PaxHeader", kind=b"x", size=2**20) + TAR_END
    assert_rejected(bench, data, "bad_header", None)


def test_it_rejects_an_upload_over_the_size_cap(bench: Bench) -> None:
    """The archive's own size is checked before anything else."""
    data = zip_bytes(REPO)
    assert_rejected(bench, data, "upload_too_large", None, Limits(max_upload_bytes=len(data) - 1))


# --- damaged, empty and foreign files ------------------------------------------------------


def test_it_rejects_a_truncated_zip(bench: Bench) -> None:
    """A zip cut in half has no end record (A-14)."""
    data = zip_bytes(REPO)
    assert_rejected(bench, data[: len(data) // 2], "truncated", None)


def test_it_rejects_a_truncated_tar_gz(bench: Bench) -> None:
    """A tar.gz cut inside a member's data names that member (A-14)."""
    noise = random.Random(3).randbytes(200 * KIB)
    data = tar_bytes({"README.md": b"hi", "noise.bin": noise}, "tar.gz")
    assert_rejected(bench, data[: len(data) // 2], "truncated", "noise.bin")


def test_it_rejects_a_tar_without_its_end_marker(bench: Bench) -> None:
    """tarfile would end quietly; a missing end-of-archive marker means a cut archive."""
    assert_rejected(bench, tar_entry(b"README.md", b"hi"), "truncated", None)


def test_it_rejects_a_tar_cut_inside_a_member(bench: Bench) -> None:
    """Data shorter than the header's size is a truncation naming the member."""
    data = tar_entry(b"README.md", b"hi") + tar_header(b"big.bin", size=4096) + b"x" * 100
    assert_rejected(bench, data, "truncated", "big.bin")


def test_it_rejects_a_corrupt_tar_header(bench: Bench) -> None:
    """A later header failing its checksum is corrupt, not the end of the archive (A-14)."""
    second = bytearray(tar_entry(b"src/a.py", b"x"))
    second[0] ^= 0x20
    data = tar_entry(b"README.md", b"hi") + bytes(second) + TAR_END
    assert_rejected(bench, data, "corrupt", None)


def test_it_rejects_a_malformed_pax_size(bench: Bench) -> None:
    """A negative size would move the stream backwards."""
    data = pax_entry({b"size": b"-512"}) + tar_entry(b"a.txt", b"x") + TAR_END
    assert_rejected(bench, data, "corrupt", "a.txt")


def test_it_rejects_a_zip_with_a_bad_crc(bench: Bench) -> None:
    """A member whose bytes do not match their CRC is corrupt."""
    assert_rejected(bench, raw_zip([RawMember(b"a.txt", b"hello", crc=0)]), "corrupt", "a.txt")


def test_it_rejects_a_zip_whose_local_and_central_names_differ(bench: Bench) -> None:
    """Tools that read different headers would unpack different files."""
    data = raw_zip([RawMember(b"README.md", b"hi", local_name=b"evil.sh__")])
    assert_rejected(bench, data, "corrupt", "README.md")


def test_it_rejects_encrypted_zip_entries(bench: Bench) -> None:
    """The encryption flag means we cannot read, and so cannot check, the member (A-14)."""
    data = raw_zip([RawMember(b"README.md", b"hi"), RawMember(b"secret.txt", b"x", flags=0x1)])
    assert_rejected(bench, data, "encrypted", "secret.txt")


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_it_rejects_zip_compression_it_cannot_bound(bench: Bench, method: int) -> None:
    """bzip2 and lzma members inflate unboundedly per call: only stored and deflate pass."""
    assert_rejected(
        bench, zip_bytes({"a.txt": b"x" * 100}, compression=method), "unsupported", "a.txt"
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"<!doctype html><html><body>Not Found</body></html>\n", b"x" * 2000],
    ids=["zero-bytes", "html", "text"],
)
def test_it_rejects_files_that_are_not_archives(bench: Bench, data: bytes) -> None:
    """A 0-byte upload or an HTML page named .zip is not an archive (A-14)."""
    assert_rejected(bench, data, "not_an_archive", None)


def test_it_rejects_a_compressed_file_that_holds_no_tar(bench: Bench) -> None:
    """A .gz of plain text is not a tar.gz."""
    assert_rejected(bench, compress(b"just some text\n" * 100, "tar.gz"), "not_an_archive", None)


@pytest.mark.parametrize(
    "data",
    [
        zip_bytes({}),
        zip_bytes({"only/": b"", "only/deeper/": b""}),
        tar_bytes([tar_dir("only")], "tar.gz"),
        bytes(10240),
        zip_bytes({"__MACOSX/._x": b"", ".DS_Store": b""}),
    ],
    ids=["empty-zip", "zip-of-folders", "tar-of-a-folder", "empty-tar", "only-litter"],
)
def test_it_rejects_an_archive_with_no_files(bench: Bench, data: bytes) -> None:
    """Nothing to grade is an error, not an empty submission (A-14)."""
    assert_rejected(bench, data, "empty", None)
