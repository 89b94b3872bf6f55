"""The embedded default's broker (reviewer/broker.py): a consumer never takes half a message.

Real kombu connections on real folders. kombu's own filesystem transport creates a message's
file before writing its body: a worker that lists the folder in between reads an empty file,
loses the message and dies with "Unrecoverable error: JSONDecodeError"
(bench/bench_verdict.py hung on it, its hand-in's jobs queued forever).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection
from kombu.transport import filesystem

from reviewer.broker import UNREADABLE_GRACE_SECONDS, Transport
from reviewer.celery import app as celery_app


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "queue"


def _channel(folder: Path, transport: type = Transport) -> Iterator:
    folder.mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    with Connection("filesystem://localhost/", transport=transport, transport_options=options) as c:
        yield c.default_channel


@pytest.fixture
def channel(folder: Path) -> Iterator:
    yield from _channel(folder)


def _old_writer_file(folder: Path, queue: str = "q", ago: float = 0.0) -> Path:
    """What kombu's own `_put` leaves between creating a message file and writing it (named
    as if created `ago` seconds ago)."""
    path = folder / f"{round((time.monotonic() - ago) * 1000)}_{uuid.uuid4()}.{queue}.msg"
    path.write_bytes(b"")
    return path


def test_messages_go_through_whole(channel) -> None:
    for i in range(3):
        channel._put("q", {"i": i, "text": "é" * 100})
    # In order of their millisecond (as kombu's own names them); within one, in any order.
    assert sorted(channel._get("q")["i"] for _ in range(3)) == [0, 1, 2]
    with pytest.raises(Empty):
        channel._get("q")


def test_a_message_that_cannot_be_serialized_leaves_no_file(channel, folder: Path) -> None:
    """The body is made before any file exists (kombu's own left an empty message file,
    which killed the consumer that read it)."""
    with pytest.raises(TypeError):
        channel._put("q", {"not json": object()})
    assert os.listdir(folder) == []
    with pytest.raises(Empty):
        channel._get("q")


def test_a_message_still_being_written_is_left_to_its_writer(channel, folder: Path) -> None:
    """The race itself, frozen: a message file created and not yet written (by a publisher
    of the old kind) is neither taken nor raised; the message behind it goes through, and
    the late one once its writer is done."""
    early = _old_writer_file(folder, ago=0.5)  # named before the next, as it was
    channel._put("q", {"i": 2})
    assert channel._get("q") == {"i": 2}
    assert early.exists()
    early.write_text('{"i": 1}')
    assert channel._get("q") == {"i": 1}
    assert os.listdir(folder) == []


def test_kombus_own_transport_loses_that_message_and_raises(folder: Path) -> None:
    """Why reviewer/broker.py exists; if kombu fixes this, this test says so."""
    for stock in _channel(folder, filesystem.Transport):
        _old_writer_file(folder)
        with pytest.raises(ValueError):
            stock._get("q")
        assert os.listdir(folder) == []  # gone before it could be written


def test_an_old_unreadable_message_is_moved_aside_and_logged(
    channel, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = _old_writer_file(folder, ago=UNREADABLE_GRACE_SECONDS + 5)
    bad.write_bytes(b'{"trunc')
    old = time.time() - UNREADABLE_GRACE_SECONDS - 5
    os.utime(bad, (old, old))
    channel._put("q", {"i": 1})
    assert channel._get("q") == {"i": 1}
    assert (folder / "rejected" / bad.name).read_bytes() == b'{"trunc'
    assert "unreadable" in caplog.text and bad.name in caplog.text
    with pytest.raises(Empty):
        channel._get("q")


def test_a_writer_never_shows_a_partial_file_under_a_message_name(
    channel, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body lands under a hidden name first: no consumer (ours or kombu's) takes it."""
    seen: list[list[str]] = []
    real_rename = os.rename

    def rename(src: str, dst: str) -> None:
        seen.append(sorted(os.listdir(folder)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    channel._put("q", {"i": 1})
    monkeypatch.undo()
    [names] = seen
    [hidden] = names
    assert hidden.startswith(".") and hidden.partition(".")[2] != "q.msg"
    assert (folder / os.listdir(folder)[0]).read_bytes().startswith(b"{")


def test_the_embedded_default_uses_this_transport(settings) -> None:
    if celery_app.conf.broker_url.startswith("redis"):
        pytest.skip("this run's broker is Redis (REDIS_URL), not the embedded default")
    with celery_app.connection_for_write() as connection:
        assert isinstance(connection.transport, Transport)
