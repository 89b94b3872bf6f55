"""Fetching a resolved set's wheels into the content-addressed cache (a loopback index)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from submissions.deps.fetch import (
    FetchFailed,
    FetchLimits,
    choose_wheel,
    fetch,
    sandbox_tags,
    wheel_path,
)
from submissions.deps.resolve import Pin, Resolved, WheelRef
from tests.stubs.index import LocalIndex

PY = (3, 11)


def _ref(index: LocalIndex, filename: str, data: bytes, size: int | None = None) -> WheelRef:
    url = f"{index.server.url}/files/{filename}"
    return WheelRef(
        filename, url, len(data) if size is None else size, hashlib.sha256(data).hexdigest()
    )


def _resolved(*pins: Pin) -> Resolved:
    return Resolved(list(pins))


def test_the_sandboxes_best_wheel_is_chosen() -> None:
    sha = "0" * 64
    pin = Pin(
        "pydantic",
        "1.10.27",
        (
            WheelRef("pydantic-1.10.27-py3-none-any.whl", "https://h/a", 1, sha),
            WheelRef(
                "pydantic-1.10.27-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                "https://h/b",
                1,
                sha,
            ),
            WheelRef(
                "pydantic-1.10.27-cp312-cp312-manylinux_2_17_x86_64.whl", "https://h/c", 1, sha
            ),
        ),
    )
    assert choose_wheel(pin, sandbox_tags(PY)).url == "https://h/b"  # compiled beats pure


def test_no_fitting_wheel_names_what_was_offered() -> None:
    pin = Pin(
        "numpy",
        "1.21.0",
        (WheelRef("numpy-1.21.0-cp39-cp39-win_amd64.whl", "https://h/a", 1, "0" * 64),),
    )
    with pytest.raises(FetchFailed, match=r"numpy==1\.21\.0: no wheel .*win_amd64"):
        choose_wheel(pin, sandbox_tags(PY))


def test_a_hostile_file_name_is_never_chosen() -> None:
    pin = Pin("x", "1", (WheelRef("../../x-1-py3-none-any.whl", "https://h/a", 1, "0" * 64),
                         WheelRef("x-1-py3-none-any.whl;rm -rf", "https://h/b", 1, "0" * 64)))  # fmt: skip
    with pytest.raises(FetchFailed):
        choose_wheel(pin, sandbox_tags(PY))


def test_wheels_are_fetched_once_and_stored_by_hash(tmp_path: Path) -> None:
    with LocalIndex() as index:
        fn, data = index.add("tenacity", "9.2.1")
        pin = Pin("tenacity", "9.2.1", (_ref(index, fn, data),))
        first = fetch(_resolved(pin), tmp_path, python_version=PY)
        again = fetch(_resolved(pin), tmp_path, python_version=PY)
        assert len(index.downloads()) == 1
    assert [f.cached for f in first] == [False] and [f.cached for f in again] == [True]
    path = first[0].path
    assert path == wheel_path(tmp_path, pin.wheels[0]) and path.read_bytes() == data
    assert hashlib.sha256(data).hexdigest() in path.parts


def test_a_tampered_cached_wheel_is_fetched_again(tmp_path: Path) -> None:
    with LocalIndex() as index:
        fn, data = index.add("tenacity", "9.2.1")
        pin = Pin("tenacity", "9.2.1", (_ref(index, fn, data),))
        (path,) = [f.path for f in fetch(_resolved(pin), tmp_path, python_version=PY)]
        path.write_bytes(b"planted")
        (item,) = fetch(_resolved(pin), tmp_path, python_version=PY)
        assert len(index.downloads()) == 2
    assert not item.cached and item.path.read_bytes() == data


def test_a_wheel_whose_bytes_do_not_match_the_index_hash_is_refused(tmp_path: Path) -> None:
    with LocalIndex() as index:
        fn, data = index.add("tenacity", "9.2.1")
        wrong = WheelRef(fn, f"{index.server.url}/files/{fn}", len(data), "f" * 64)
        with pytest.raises(FetchFailed, match="sha256 does not match"):
            fetch(_resolved(Pin("tenacity", "9.2.1", (wrong,))), tmp_path, python_version=PY)
    assert not list(tmp_path.rglob("*.whl")) and not list(tmp_path.rglob(".part-*"))


def test_a_set_over_the_download_cap_is_refused_before_any_fetch(tmp_path: Path) -> None:
    with LocalIndex() as index:
        pins = []
        for i in range(4):
            fn, data = index.add(f"big{i}", "1.0")
            pins.append(Pin(f"big{i}", "1.0", (_ref(index, fn, data, size=512 * 2**20),)))
        with pytest.raises(FetchFailed) as info:
            fetch(_resolved(*pins), tmp_path, python_version=PY, limits=FetchLimits(1 << 30))
        assert index.downloads() == []
    assert "2,048 MiB of wheels, over the 1,024 MiB cap" in str(info.value)


def test_a_wheel_larger_than_the_index_said_is_cut_off(tmp_path: Path) -> None:
    with LocalIndex() as index:
        fn, data = index.add("liar", "1.0", files={"liar/blob.bin": bytes(range(256)) * 8192})
        pin = Pin("liar", "1.0", (_ref(index, fn, data, size=10),))
        with pytest.raises(FetchFailed, match="larger than"):
            fetch(
                _resolved(pin),
                tmp_path,
                python_version=PY,
                limits=FetchLimits(max_download_bytes=4096),
            )


def test_a_zip_bomb_is_refused_by_its_declared_size_before_install(tmp_path: Path) -> None:
    with LocalIndex() as index:
        # 64 MiB of zeros deflate to ~64 KiB: the zip directory says what it would unpack to.
        fn, data = index.add(
            "bomb", "1.0", raw={"bomb/zeros.bin": (zipfile.ZIP_DEFLATED, bytes(64 * 2**20))}
        )
        assert len(data) < 2**20
        pin = Pin("bomb", "1.0", (_ref(index, fn, data),))
        with pytest.raises(FetchFailed, match="unpack to over 16 MiB"):
            fetch(
                _resolved(pin),
                tmp_path,
                python_version=PY,
                limits=FetchLimits(max_download_bytes=2**30, max_unpacked_bytes=16 * 2**20),
            )


def test_a_wheel_that_is_not_a_zip_is_refused(tmp_path: Path) -> None:
    with LocalIndex() as index:
        index.wheels["junk"] = [("junk-1.0-py3-none-any.whl", b"not a zip at all")]
        pin = Pin("junk", "1.0", (_ref(index, "junk-1.0-py3-none-any.whl", b"not a zip at all"),))
        with pytest.raises(FetchFailed, match="not a readable wheel"):
            fetch(_resolved(pin), tmp_path, python_version=PY)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://h/x-1-py3-none-any.whl", "/x.whl"])
def test_only_http_urls_from_the_index_are_fetched(tmp_path: Path, url: str) -> None:
    pin = Pin("x", "1", (WheelRef("x-1-py3-none-any.whl", url, 1, "0" * 64),))
    with pytest.raises(FetchFailed, match="not http"):
        fetch(_resolved(pin), tmp_path, python_version=PY)


def test_an_index_that_is_gone_is_a_fetch_failure_naming_the_wheel(tmp_path: Path) -> None:
    pin = Pin(
        "x", "1", (WheelRef("x-1-py3-none-any.whl", "http://127.0.0.1:9/x.whl", 1, "0" * 64),)
    )
    with pytest.raises(FetchFailed, match=r"x-1-py3-none-any\.whl: ConnectError"):
        fetch(_resolved(pin), tmp_path, python_version=PY, limits=FetchLimits(timeout=5))


def test_a_dropped_connection_is_tried_once_more(tmp_path: Path) -> None:
    from tests.stubs.index import _IndexHandler

    class Flaky(_IndexHandler):
        dropped = False

        def do_GET(self) -> None:
            if self.path.startswith("/files/") and not Flaky.dropped:
                Flaky.dropped = True
                self.close_connection = True
                self.connection.shutdown(2)  # no status line at all: a transport error
                return
            super().do_GET()

    index = LocalIndex()
    fn, data = index.add("tenacity", "9.2.1")
    from tests.stubs.servers import StubServer

    with StubServer(Flaky, index=index) as server:
        index.server = server
        pin = Pin("tenacity", "9.2.1", (_ref(index, fn, data),))
        (item,) = fetch(_resolved(pin), tmp_path, python_version=PY)
    assert Flaky.dropped and item.path.read_bytes() == data


@pytest.mark.scale
def test_a_wheel_of_a_million_entries_is_refused_from_its_end_record(
    tmp_path: Path, monkeypatch
) -> None:
    """Counted from the end record, before zipfile builds an object per entry (which, for a
    wheel of millions of empty entries, would take the worker's memory)."""
    import io

    from submissions.deps import fetch as fetch_module

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for i in range(120_000):  # past 65,535: the count lives in the zip64 end record
            archive.writestr(zipfile.ZipInfo(f"e/{i}"), b"")
    path = tmp_path / "many-1.0-py3-none-any.whl"
    path.write_bytes(buffer.getvalue())

    def parsed(*_: object, **__: object) -> None:
        raise AssertionError("the central directory was parsed before the count was checked")

    monkeypatch.setattr(fetch_module.zipfile, "ZipFile", parsed)
    with pytest.raises(FetchFailed, match="120,000 files"):
        fetch_module.unpacked_size(path)
