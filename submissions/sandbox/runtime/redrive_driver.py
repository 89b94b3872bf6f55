"""Runs inside the sandbox with the runtime's python: starts the candidate's stub, waits for its
port, sends the recorded requests in order, prints the answers after a nonce. Stdlib only; it
reads its spec before the stub starts, so the stub cannot change what is sent.

Sending stops early by two rules (`send_all`): after `give_up_after` requests in a row got no
answer the stub is taken as down, and once `budget` seconds have passed the rest is not sent;
each request not sent is answered with the reason, so a dead stub cannot hold a worker for
500 rows times the timeout.

Run as `python3 -c <this file's text> SPEC [NONCE]`. The app never imports it; the tests
import its functions (the script part runs only as `__main__`).
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def stop_reason(failures_in_a_row, now, deadline, give_up_after, budget):
    """Why the next request should not be sent, or None."""
    if failures_in_a_row >= give_up_after:
        return "not sent: the stub stopped answering"
    if deadline is not None and now > deadline:
        return "not sent: the time budget of %g s was used up" % budget
    return None


def send_all(requests, send, give_up_after, budget, clock=time.monotonic):
    """Each request's answer, in order: `send(request)` gives a dict, with "error" when the
    stub did not answer; requests past the give-up or time-budget rule are not sent."""
    answers = []
    failures_in_a_row = 0
    deadline = None if budget is None else clock() + budget
    for request in requests:  # sequential: idempotency state depends on the order
        stop = stop_reason(failures_in_a_row, clock(), deadline, give_up_after, budget)
        if stop:
            answers.append({"error": stop})
            continue
        answer = send(request)
        failures_in_a_row = failures_in_a_row + 1 if "error" in answer else 0
        answers.append(answer)
    return answers


def send_one(opener, request, timeout, max_bytes):
    """One request sent: its status, headers and capped body, or the error."""
    body = request["body"].encode() if request["body"] is not None else None
    req = urllib.request.Request(
        request["url"], data=body, method=request["method"], headers=request["headers"]
    )
    try:
        resp = opener.open(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        resp = err
    except Exception as err:
        return {"error": type(err).__name__ + ": " + str(err)[:300]}
    data = resp.read(max_bytes + 1)
    return {
        "status": resp.status if hasattr(resp, "status") else resp.code,
        "headers": list(resp.headers.items())[:50],
        "body": data[:max_bytes].decode("utf-8", "replace"),
        "truncated": len(data) > max_bytes,
    }


def opener_without_proxy():
    """An opener that never goes through a proxy from the environment."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def main(argv):
    spec = json.load(open(argv[1]))
    nonce = argv[2]
    os.unlink(argv[1])
    log = open("/tmp/cr-stub.log", "wb")
    env = dict(os.environ, PORT=str(spec["port"]))
    stub = subprocess.Popen(
        ["/bin/sh", "-c", spec["command"]],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.time() + spec["start_timeout"]

    def tail():
        log.flush()
        return open("/tmp/cr-stub.log", "rb").read()[-2000:].decode("utf-8", "replace")

    while True:
        try:
            socket.create_connection(("127.0.0.1", spec["port"]), timeout=0.5).close()
            break
        except OSError:
            if stub.poll() is not None or time.time() > deadline:
                error = {"error": "the stub did not start listening", "log": tail()}
                print(nonce + json.dumps(error))
                return
            time.sleep(0.1)
    opener = opener_without_proxy()
    answers = send_all(
        spec["requests"],
        lambda r: send_one(opener, r, spec["timeout"], spec["max_bytes"]),
        spec["give_up_after"],
        spec["budget"],
    )
    print(nonce + json.dumps({"answers": answers, "log": tail()}))
    stub.terminate()


if __name__ == "__main__":
    main(sys.argv)
