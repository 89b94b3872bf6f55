"""Runs inside the sandbox with the runtime's python: starts the candidate's stub, waits for its
port, sends the recorded requests in order, prints the answers after a nonce. Stdlib only; it
reads its spec before the stub starts, so the stub cannot change what is sent.

Run as `python3 -c <this file's text> SPEC [NONCE]`; stdlib only, never imported by the app.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

spec = json.load(open(sys.argv[1]))
nonce = sys.argv[2]
os.unlink(sys.argv[1])
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
            print(nonce + json.dumps({"error": "the stub did not start listening", "log": tail()}))
            sys.exit(0)
        time.sleep(0.1)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
answers: list[dict[str, object]] = []
for r in spec["requests"]:
    body = r["body"].encode() if r["body"] is not None else None
    req = urllib.request.Request(r["url"], data=body, method=r["method"], headers=r["headers"])
    try:
        resp = opener.open(req, timeout=spec["timeout"])
    except urllib.error.HTTPError as err:
        resp = err
    except Exception as err:
        answers.append({"error": type(err).__name__ + ": " + str(err)[:300]})
        continue
    data = resp.read(spec["max_bytes"] + 1)
    answers.append(
        {
            "status": resp.status if hasattr(resp, "status") else resp.code,
            "headers": list(resp.headers.items())[:50],
            "body": data[: spec["max_bytes"]].decode("utf-8", "replace"),
            "truncated": len(data) > spec["max_bytes"],
        }
    )
print(nonce + json.dumps({"answers": answers, "log": tail()}))
stub.terminate()
