"""The relay of a re-record pass, run INSIDE the sandbox (ours, read-only, started first).

    python relay.py PORT SOCKET COMMAND...

Listens on 127.0.0.1:PORT in the sandbox's own network namespace (loopback only: the
sandbox has no other network) and forwards the bytes of each connection to the Unix socket
SOCKET, bound into the sandbox from the host-side model proxy, which decides everything:
what is allowed, the key, the caps. The relay adds nothing and knows no key. Once it
listens, it runs COMMAND (the hand-in's record command) and exits with its status.

Standard library only: it runs on the sandbox's trusted interpreter before any of the
hand-in's packages are imported.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

CHUNK = 65536
DRAIN_SECONDS = 5.0


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src ends, then half-close dst's sending side only.

    Only the direction that ended is closed: the proxy answers a refused request and closes
    before it has read the body, so the body's copy fails while the answer is still on its
    way back. Shutting both sockets down there (as this once did) cut the answer off, and
    the client saw the connection close without a response.
    """
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _drain(client: socket.socket) -> None:
    """Read what the client still sends (briefly), so closing it does not reset the answer.

    Closing a TCP socket with unread bytes sends a reset, which can overtake the answer
    still in the client's receive path; the client closes once it has read the answer.
    """
    client.settimeout(DRAIN_SECONDS)
    try:
        while client.recv(CHUNK):
            pass
    except OSError:
        pass


def _connection(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    _drain(client)
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_connection, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: relay.py PORT SOCKET COMMAND...", file=sys.stderr)
        return 2
    port, path, command = int(argv[0]), argv[1], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        return subprocess.call(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"relay: could not start the record command: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
