"""What stops the sandbox on this host, said once (`python -m submissions.sandbox check`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from submissions.sandbox.bwrap import run
from submissions.sandbox.preflight import static_problems
from submissions.sandbox.types import (
    DEFAULT_BWRAP,
    DEFAULT_RUNTIME,
    SANDBOX_SLOTS,
    SANDBOX_UID_BASE,
    SandboxBusy,
    SandboxLimits,
    SandboxUnavailable,
)
from submissions.sandbox.uids import gid_of, slot_uid


def self_check(
    *,
    bwrap: str = DEFAULT_BWRAP,
    runtime: Path | None = None,
    slots: Iterable[int] | None = None,
    uid_base: int = SANDBOX_UID_BASE,
    probe: bool = True,
) -> list[str]:
    """Return what stops the sandbox from running here (empty when ready)."""
    runtime = runtime or DEFAULT_RUNTIME
    slot_list = list(range(SANDBOX_SLOTS) if slots is None else slots)
    uids = [slot_uid(s, uid_base) for s in slot_list]
    problems = static_problems(bwrap, runtime, uids)
    if problems or not probe:
        return problems
    # Start a real sandbox once: proves user namespaces work here, the uid can read the
    # runtime and the hook, and the network namespace holds nothing but loopback.
    probe_src = (
        "import sitecustomize, sys\n"
        "names = [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]\n"
        "print('cr-probe', sys.version_info[0], ','.join(names))\n"
    )
    with tempfile.TemporaryDirectory(prefix="cr-probe-") as tmp:
        os.chmod(tmp, 0o711)  # noqa: S103 - bwrap resolves the bind source as the sandbox uid
        for slot in slot_list:
            uid = slot_uid(slot, uid_base)
            ws = Path(tmp) / f"ws-{slot}"
            ws.mkdir(mode=0o700)
            os.chown(ws, uid, gid_of(uid))
            try:
                res = run(
                    ["python3", "-c", probe_src],
                    workspace=ws,
                    limits=SandboxLimits(wall_seconds=30, output_bytes=4096),
                    slot=slot,
                    runtime=runtime,
                    bwrap=bwrap,
                    uid_base=uid_base,
                )
            except SandboxBusy:
                continue  # a run is using this slot right now: try the next one
            except SandboxUnavailable as exc:
                return [f"bwrap cannot start as uid {uid}: {exc.cause}"]
            out = res.stdout.decode(errors="replace").split()
            if res.exit_code != 0 or out[:2] != ["cr-probe", "3"]:
                tail = res.stderr[-300:].decode(errors="replace").strip()
                return [f"sandbox probe failed (exit {res.exit_code}): {tail}"]
            if out[2:] != ["lo"]:
                return [f"sandbox network namespace is not empty: interfaces {out[2:]}"]
            return []
    return []  # every slot busy: the sandbox is evidently in use, nothing to report


def ensure_ready(**kwargs: object) -> None:
    """Raise SandboxUnavailable with the cause unless self_check() finds nothing wrong."""
    problems = self_check(**kwargs)  # type: ignore[arg-type]  # the caller's self_check options
    if problems:
        raise SandboxUnavailable("; ".join(problems))


def main(argv: list[str] | None = None) -> int:
    """`python -m submissions.sandbox check`: print the self-check result (exit 1 on problems)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["check"]:
        print("usage: python -m submissions.sandbox check [RUNTIME_DIR]", file=sys.stderr)
        return 2
    problems = self_check(runtime=Path(args[1]) if len(args) > 1 else None)
    for problem in problems:
        print(f"sandbox: {problem}")
    if not problems:
        print("sandbox: ready")
    return 1 if problems else 0
