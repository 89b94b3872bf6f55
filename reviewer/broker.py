"""The embedded default's broker: kombu's filesystem transport, with messages that appear whole.

kombu's own `_put` creates the message file under its final name, then serializes and writes
the body into it; its `_get` takes any file with that name (moves it away, reads, removes it).
A worker polling every 50 ms that lists the folder between the two reads an empty file, and
kombu's `loads` raises: the message is gone (its file was removed before the decode), and the
worker dies with "Unrecoverable error: JSONDecodeError" (kombu issue #1551). Its job stays
queued with no worker to run it. A publisher descheduled between create and write (a
thread of the web process or of a pool child, on a loaded machine) opened that window often
enough to hang bench/bench_verdict.py.

Here a message is written under a name no consumer takes (a leading dot), then renamed into
place: rename is atomic within one folder, so a consumer sees all of a message or none of it.
A file that still does not decode (a publisher of the old kind mid-write, a truncated file
after a crash) is left alone while young, then moved aside into `rejected/` and logged,
never raised into the worker's consumer loop; its job is republished by the reconciler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from pathlib import Path
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

# A file that does not decode is given this long to be completed by its writer.
UNREADABLE_GRACE_SECONDS = 10.0


class Channel(filesystem.Channel):
    # kombu's filesystem signature, which its own stubs mark as they do here.
    def _put(  # type: ignore[override]  # kombu-stubs: filesystem's vs the abstract channel's
        self, queue: str, payload: dict[str, Any], **kwargs: Any
    ) -> None:
        """Write `payload` whole under a hidden name, then rename it into `queue`."""
        body = str_to_bytes(dumps(payload))  # before any file exists: a failure leaves none
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as f:
                f.write(body)
            os.rename(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """The oldest whole message of `queue`; an unreadable file is skipped, not raised."""
        wanted = f"{queue}.msg"
        folder = Path(self.data_folder_in)
        for name in sorted(os.listdir(folder)):
            if name.partition(".")[2] != wanted:
                continue
            path = folder / name
            try:
                payload = path.read_bytes()
                message = loads(bytes_to_str(payload))
            except FileNotFoundError:  # taken by another consumer meanwhile
                continue
            except (OSError, ValueError) as exc:
                self._unreadable(path, exc)
                continue
            try:
                os.remove(path)  # the claim: of two consumers, one removes it
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ChannelError(f"Cannot read file {str(path)!r} from queue.") from exc
            return message
        raise Empty()

    def _unreadable(self, path: Path, exc: Exception) -> None:
        """Leave a young unreadable message to its writer; move an old one aside."""
        try:
            age = time.time() - path.stat().st_mtime
        except OSError:
            return
        if age < UNREADABLE_GRACE_SECONDS:
            return
        rejected = path.parent / "rejected"
        try:
            rejected.mkdir(exist_ok=True)
            os.rename(path, rejected / path.name)
        except OSError:
            return
        log.error(
            "broker message %s unreadable after %.0f s (%s: %s); moved to %s",
            path.name,
            age,
            type(exc).__name__,
            exc,
            rejected,
        )


class Transport(filesystem.Transport):
    Channel = Channel
