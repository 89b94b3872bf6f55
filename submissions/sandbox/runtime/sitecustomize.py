"""Audit hook loaded into every Python process of the replay sandbox: evidence, not enforcement.

The worker bind-mounts this file read-only at /opt/cr-hooks/sitecustomize.py and puts
/opt/cr-hooks on PYTHONPATH, so `site` imports it at start-up (before sys.path[0], the
candidate's script folder, is added: a sitecustomize.py in the submission cannot shadow it).

What it records, one JSON object per line, appended to the file named by CR_AUDIT_LOG:
  socket.connect / socket.sendto (address), socket.getaddrinfo (host, port),
  subprocess.Popen / os.exec / os.posix_spawn / os.system (argv[0..3]),
  open of a path under one of the CR_AUDIT_WATCH folders (colon-separated, relative to
  CR_AUDIT_ROOT, the workspace mount): relative path, mode and flags.
Each event names the caller's file:line: the first frame outside the stdlib and
site-packages, i.e. the candidate's own code.

Trust model. The network namespace is the guarantee: nothing leaves the sandbox whether or
not this hook sees it. The hook only gathers evidence for `replay.no_network_attempts` and
`replay.recordings_used`, and the candidate can defeat it: `python -I`/`-S`, a child
started with a cleared environment, non-Python tools, ctypes, or writing fake or junk lines
to the log (it runs as the same uid). The worker therefore pre-creates the log in a
root-owned folder (no deleting, renaming or planting links/FIFOs there), reads it back
with O_NOFOLLOW as the sandbox uid with a byte cap, and labels what it finds "seen by the
audit hook"; an empty log means "no attempt seen", never "no attempt".

The hook must never raise into the candidate's code, never recurse (it runs inside audited
operations), and is bounded: per process it stops after MAX_EVENTS events or MAX_BYTES
bytes, writing one final `cr.audit.truncated` line.
"""

from __future__ import annotations

import os
import sys

# Not `typing.TYPE_CHECKING`: neither typing nor types is loaded at start-up, and every
# process in the sandbox runs this file; type checkers take the name as true all the same.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType, ModuleType

MAX_EVENTS = 256
MAX_BYTES = 128 * 1024
_ARGV_KEEP = 4
_TEXT_KEEP = 300

_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.exec", "os.posix_spawn"})
_NET_EVENTS = frozenset({"socket.connect", "socket.sendto", "socket.getaddrinfo"})
_EVENTS = _SPAWN_EVENTS | _NET_EVENTS | {"open", "os.system"}


def _text(value: object) -> object:
    """Make value JSON-safe and short."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value[:_TEXT_KEEP] if isinstance(value, str) else value
    if isinstance(value, (tuple, list)):
        return [_text(v) for v in list(value)[:_ARGV_KEEP]]
    if isinstance(value, os.PathLike):
        try:
            return str(os.fspath(value))[:_TEXT_KEEP]
        except TypeError:
            pass
    return type(value).__name__


def _argv_of(args: object) -> object:
    """Return argv[0..3] of a spawn argument (str, bytes, path or sequence)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return [_text(args)]
    try:
        items = list(args)  # type: ignore[call-overload]  # a TypeError marks a non-sequence
        return [_text(a) for a in items[:_ARGV_KEEP]]
    except TypeError:
        return [_text(args)]


def _record(event: str, args: tuple) -> dict | None:
    """The fields kept of a network or spawn event (opens are filtered by _Auditor)."""
    if event == "socket.getaddrinfo":
        return {"host": _text(args[0]), "port": _text(args[1])}
    if event in _NET_EVENTS:
        return {"address": _text(args[1])}
    if event == "os.system":
        return {"command": _text(args[0])}
    if event == "subprocess.Popen":
        return {"argv": _argv_of(args[1] if args[1] is not None else args[0])}
    # os.exec, os.posix_spawn: (path, argv, env)
    return {"argv": _argv_of(args[1])}


class _Auditor:
    """The hook's state: where to log, what to watch, how much was written."""

    def __init__(self, log_path: str, root: str, watch: tuple[str, ...]) -> None:
        import _thread  # builtin; threading itself may not be imported yet

        self.log_path = log_path
        self.root = root
        self.watch = watch
        self.stdlib = os.path.dirname(os.__file__) + os.sep
        # Thread ids inside the hook: audited calls the hook makes must not recurse.
        self.busy: set[int] = set()
        self.get_ident = _thread.get_ident
        self.events = 0
        self.bytes = 0
        self.done = False
        self.json: ModuleType | None = None

    def caller(self) -> str | None:
        """Return file:line of the first frame that is the candidate's own code."""
        frame: FrameType | None = sys._getframe(2)
        fallback = None
        while frame is not None:
            name = frame.f_code.co_filename
            if name != __file__ and not name.startswith("<frozen"):
                if fallback is None:
                    fallback = f"{name}:{frame.f_lineno}"
                if not name.startswith(self.stdlib) and "-packages" + os.sep not in name:
                    if name.startswith(self.root + os.sep):
                        name = name[len(self.root) + 1 :]
                    return f"{name}:{frame.f_lineno}"
            frame = frame.f_back
        return fallback

    def watched_open(self, args: tuple) -> dict | None:
        """Return the event for an open under a watched folder, else None."""
        path, mode, flags = (*tuple(args), None, None, None)[:3]
        if isinstance(path, int) or not self.watch:
            return None
        path = os.fsdecode(os.fspath(path))
        full = os.path.normpath(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))
        root = self.root
        for w in self.watch:
            if full == w or full.startswith(w + os.sep):
                rel = full[len(root) + 1 :] if full.startswith(root + os.sep) else full
                return {"path": rel, "mode": mode, "flags": flags}
        return None

    def write(self, record: dict) -> None:
        """Append one JSON line; open-write-close so a closed or reused fd is never hit."""
        if self.json is None:
            import json as json_module  # lazily: most processes never log anything

            self.json = json_module
        json = self.json
        line = (json.dumps(record, default=str, ensure_ascii=True) + "\n").encode()
        if self.events >= MAX_EVENTS or self.bytes + len(line) > MAX_BYTES:
            self.done = True
            line = (json.dumps({"event": "cr.audit.truncated", "pid": os.getpid()}) + "\n").encode()
        # O_NOFOLLOW and no O_CREAT: only the file the worker pre-created is ever written.
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        self.events += 1
        self.bytes += len(line)

    def hook(self, event: str, args: tuple) -> None:
        """Record the events we care about; swallow every error."""
        if event not in _EVENTS or self.done:
            return
        me = self.get_ident()
        if me in self.busy:
            return
        self.busy.add(me)
        try:
            record = self.watched_open(args) if event == "open" else _record(event, args)
            if record is not None:
                self.write({"event": event, **record, "caller": self.caller(), "pid": os.getpid()})
        except Exception:
            pass
        finally:
            self.busy.discard(me)


def _install() -> None:
    """Install the audit hook when CR_AUDIT_LOG names a log file."""
    log_path = os.environ.get("CR_AUDIT_LOG")
    if not log_path:
        return
    root = os.path.normpath(os.environ.get("CR_AUDIT_ROOT", "/work"))
    watch = tuple(
        os.path.normpath(os.path.join(root, w))
        for w in os.environ.get("CR_AUDIT_WATCH", "").split(":")
        if w.strip()
    )
    sys.addaudithook(_Auditor(log_path, root, watch).hook)


def _add_site() -> None:
    """Put a hand-in's installed dependencies (CR_SITE) on sys.path, and read their .pth files.

    After the standard library (a package named `json` must not replace it) and before the
    runtime's own packages (the hand-in's pins win). A .pth line may run code, so this comes
    after the audit hook is in place.
    """
    folder = os.environ.get("CR_SITE")
    if not folder or not os.path.isdir(folder) or folder in sys.path:
        return
    import site

    at = next(
        (i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))),
        len(sys.path),
    )
    sys.path.insert(at, folder)
    site.addsitedir(folder)


try:
    _install()
except Exception:
    pass
try:
    _add_site()
except Exception:
    pass
