"""What can be known without running anything: bwrap, setpriv, prlimit, the runtime, the uids."""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Iterable
from pathlib import Path

from submissions.sandbox.types import (
    PRLIMIT,
    SETPRIV,
    SITECUSTOMIZE,
    SYSTEM_RUNTIME,
)


def static_problems(bwrap: str, runtime: Path, uids: Iterable[int]) -> list[str]:
    """Return problems found without starting anything (cheap enough for every run)."""
    problems = []
    if os.geteuid() != 0:
        problems.append(
            "worker is not root: it cannot drop to the dedicated sandbox uids (setpriv)"
        )
    if not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)):
        problems.append(f"bubblewrap not found at {bwrap} (apt-get install bubblewrap)")
    for tool in (SETPRIV, PRLIMIT):
        if not os.access(tool, os.X_OK):
            problems.append(f"{tool} not found (apt-get install util-linux)")
    for path, bad, why in (
        (
            "/proc/sys/user/max_user_namespaces",
            "0",
            "user namespaces are disabled (user.max_user_namespaces=0)",
        ),
        (
            "/proc/sys/kernel/unprivileged_userns_clone",
            "0",
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)",
        ),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "AppArmor restricts unprivileged user namespaces"
            " (kernel.apparmor_restrict_unprivileged_userns=1)",
        ),
    ):
        with contextlib.suppress(OSError):
            if Path(path).read_text().strip() == bad:
                problems.append(why)
    for uid in uids:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            problems.append(
                f"sandbox uid {uid} is missing: run scripts/sandbox-setup.sh --users-only"
            )
    if runtime != SYSTEM_RUNTIME:
        python = runtime / "bin" / "python3"
        if not python.exists():
            problems.append(f"sandbox runtime missing at {runtime}: run make sandbox-runtime")
    if not SITECUSTOMIZE.is_file():
        problems.append(f"audit hook missing at {SITECUSTOMIZE}")
    return problems
