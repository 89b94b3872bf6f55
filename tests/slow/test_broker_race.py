"""The embedded broker under a real race: a publisher process and a consumer polling at once.

kombu's own filesystem transport loses a message whenever the consumer lists the folder
between the publisher's create and write (about 1 in 150 here, each loss an exception that
stops a Celery worker for good); reviewer/broker.py's must lose none.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

from reviewer.broker import Transport

pytestmark = [pytest.mark.scale]

MESSAGES = 1500


def _connection(folder: Path) -> Connection:
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    return Connection("filesystem://localhost/", transport=Transport, transport_options=options)


def test_a_consumer_polling_during_publishes_gets_every_message_whole(tmp_path: Path) -> None:
    folder = tmp_path / "queue"
    folder.mkdir()
    pid = os.fork()
    if pid == 0:  # the publisher: one message every ~2 ms, as a busy web process and pool
        code = 1
        try:
            with _connection(folder) as connection:
                for i in range(MESSAGES):
                    connection.default_channel._put("q", {"i": i, "pad": "x" * 2000})
                    time.sleep(0.002)
            code = 0
        finally:
            os._exit(code)
    got: list[int] = []
    deadline = time.monotonic() + 60
    try:
        with _connection(folder) as connection:
            channel = connection.default_channel
            while len(got) < MESSAGES and time.monotonic() < deadline:
                try:  # no pause: the consumer lists the folder as often as it can
                    got.append(channel._get("q")["i"])
                except Empty:
                    continue
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert got == list(range(MESSAGES))
