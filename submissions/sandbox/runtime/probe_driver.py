"""Runs inside the sandbox with the runtime's python, stdlib only. It reads (and deletes) its spec,
nonce included, before the service starts and makes itself non-dumpable, so the service (same
uid) can neither learn the nonce nor write into this process's stdout. Events are printed one
per line as they happen: a run cut short still tells what it saw.

Run as `python3 -c <this file's text> SPEC [NONCE]`; stdlib only, never imported by the app.
"""

import ctypes
import glob
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

try:
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
except Exception:
    pass
spec = json.load(open(sys.argv[1], encoding="utf-8"))
os.unlink(sys.argv[1])
NONCE = spec["nonce"]


def emit(kind, **data):
    data["type"] = kind
    sys.stdout.write(NONCE + json.dumps(data) + "\n")
    sys.stdout.flush()


LOG = "/tmp/cr-service.log"
logf = open(LOG, "wb")


def tail():
    logf.flush()
    with open(LOG, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - spec["log_tail"]))
        return f.read().decode("utf-8", "replace")


def regular(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def ledgers():
    found = []
    for pattern in spec["ledgers"]:
        for p in sorted(glob.glob(pattern, recursive=True))[:20]:
            if p not in found and not p.startswith(".cr-"):
                found.append(p)
    return found[:20]


tracked = {}
budget = [spec["ledger_max_bytes"]]


def snapshot():
    for p in ledgers():
        fd = regular(p)
        if fd is None:
            continue
        try:
            size, lines, done = os.fstat(fd).st_size, 0, 0
            while done < min(size, 32 << 20):
                chunk = os.read(fd, min(1 << 20, size - done))
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                done += len(chunk)
            tracked[p] = {"offset": size, "lines": lines if done >= size else None}
        finally:
            os.close(fd)
    emit("ledger_start", files={p: s["offset"] for p, s in tracked.items()})


def collect(after, final=False):
    for p in ledgers():
        state = tracked.setdefault(p, {"offset": 0, "lines": 0})
        fd = regular(p)
        if fd is None:
            continue
        try:
            size = os.fstat(fd).st_size
            if size < state["offset"]:
                emit(
                    "ledger_note",
                    path=p,
                    note="%s shrank from %d to %d bytes during the "
                    "probe: rewritten, not appended" % (p, state["offset"], size),
                )
                state["offset"], state["lines"] = 0, None
            want = min(size - state["offset"], budget[0])
            if size > state["offset"] and want <= 0:
                if not state.get("capped"):
                    emit(
                        "ledger_note",
                        path=p,
                        note="ledger output cap reached; later lines of %s not read" % p,
                    )
                state["capped"] = True
                continue
            data = b""
            if want > 0:
                os.lseek(fd, state["offset"], 0)
                while len(data) < want:
                    chunk = os.read(fd, want - len(data))
                    if not chunk:
                        break
                    data += chunk
        finally:
            os.close(fd)
        if not final:
            data = data[: data.rfind(b"\n") + 1]
        if not data:
            continue
        budget[0] -= len(data)
        emit(
            "ledger",
            path=p,
            after=after,
            line_base=state["lines"],
            text=data.decode("utf-8", "replace"),
        )
        state["offset"] += len(data)
        if state["lines"] is not None:
            state["lines"] += data.count(b"\n")


snapshot()
env = dict(os.environ, PORT=str(spec["port"]))
started = time.time()
service = subprocess.Popen(
    ["/bin/sh", "-c", spec["command"]],
    env=env,
    stdin=subprocess.DEVNULL,
    stdout=logf,
    stderr=logf,
    start_new_session=True,
)


def stop():
    if service.poll() is None:
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 3)):
            try:
                os.killpg(service.pid, sig)
            except OSError:
                pass
            try:
                service.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
    return service.poll()


while True:
    try:
        socket.create_connection(("127.0.0.1", spec["port"]), timeout=0.5).close()
        break
    except OSError:
        code = service.poll()
        if code is not None or time.time() - started > spec["start_timeout"]:
            if code is None:
                reason = "did not answer on port %d within %g s" % (
                    spec["port"],
                    spec["start_timeout"],
                )
            else:
                reason = "exited with code %s before answering on port %d" % (code, spec["port"])
            code = stop()
            emit(
                "not_started",
                reason=reason,
                seconds=time.time() - started,
                exit_code=code,
                log=tail(),
            )
            sys.exit(0)
        time.sleep(0.05)
emit("started", seconds=time.time() - started)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
body_budget = spec["body_max_total"]
deadline = time.time() + spec["probe_seconds"]
for r in spec["requests"]:
    if time.time() > deadline:
        emit("answer", index=r["index"], error="not sent: the probe's time budget ran out")
        continue
    data = r["body"].encode("utf-8") if r["body"] is not None else None
    req = urllib.request.Request(r["url"], data=data, method=r["method"], headers=r["headers"])
    t0 = time.time()
    try:
        try:
            resp = opener.open(req, timeout=spec["timeout"])
        except urllib.error.HTTPError as err:
            resp = err
        cap = max(1024, min(spec["body_max"], body_budget))
        raw = resp.read(cap + 1) or b""
        body_budget -= min(len(raw), cap)
        emit(
            "answer",
            index=r["index"],
            status=getattr(resp, "status", None) or resp.code,
            content_type=resp.headers.get("Content-Type", "") if resp.headers else "",
            body=raw[:cap].decode("utf-8", "replace"),
            truncated=len(raw) > cap,
            seconds=time.time() - t0,
        )
    except Exception as err:
        emit(
            "answer",
            index=r["index"],
            error=(type(err).__name__ + ": " + str(err))[:300],
            seconds=time.time() - t0,
        )
    time.sleep(spec["settle"])
    collect(r["index"])
code = stop()
collect("end", final=True)
emit("done", exit_code=code, log=tail())
