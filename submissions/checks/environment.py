"""env.dependencies_installed: what the hand-in declared, and what the sandbox got of it."""

from __future__ import annotations

from typing import Any

from cassettes_app.checks import CheckOutcome, Status, counted, skip
from cassettes_app.checks.catalog import DEPENDENCIES_INSTALLED
from cassettes_app.text import clipped
from submissions.deps.ecosystems import Unmet
from submissions.deps.prepare import Prepared
from submissions.redact import redact_text

_SHOWN = 12  # packages named in the summary's evidence before "and N more"


def _declared_evidence(prepared: Prepared) -> list[dict[str, Any]]:
    declared = prepared.declared
    items: list[dict[str, Any]] = []
    if declared.source:
        items.append(
            {
                "message": f"declared in {declared.source}: "
                f"{counted(len(declared.requirements), 'requirement')}"
                + (" (locked)" if declared.locked else ""),
                "path": declared.source.split(", ")[0],
            }
        )
    if declared.ignored:
        ignored = ", ".join(declared.ignored)
        items.append({"message": f"also present, less trusted, not read: {ignored}"})
    for refusal in declared.refused[:20]:
        item: dict[str, Any] = {"message": refusal.message, "path": refusal.path}
        if refusal.line:
            item["line"] = refusal.line
        items.append(item)
    items += [{"message": warning} for warning in prepared.warnings]
    return items


def _installed_evidence(prepared: Prepared) -> list[dict[str, Any]]:
    env = prepared.env
    if env is None:
        return []
    names = env.packages
    shown = ", ".join(names[:_SHOWN])
    if len(names) > _SHOWN:
        shown += f" and {len(names) - _SHOWN} more"
    fetched = sum(1 for f in prepared.fetched if not f.cached)
    reused = len(prepared.fetched) - fetched
    where = (
        "environment from the cache"
        if env.cached
        else f"{counted(fetched, 'wheel')} fetched, {reused} from the wheel cache"
    )
    return [
        {"message": f"installed: {shown}", "packages": names},
        {"message": f"{where}; {env.size_bytes / 2**20:.1f} MiB; {prepared.seconds:.1f} s"},
    ]


def env_dependencies_installed(prepared: Prepared) -> CheckOutcome:
    """env.dependencies_installed: the declared set was installed offline in the sandbox."""
    evidence = _declared_evidence(prepared) + _installed_evidence(prepared)
    if prepared.python_refused:
        return CheckOutcome(DEPENDENCIES_INSTALLED, "skip", prepared.python_refused, evidence)
    if prepared.state in ("failed", "error"):
        cause = redact_text(prepared.cause)
        evidence.append({"message": f"{prepared.stage}: {cause}", "output": clipped(cause, 4000)})
        status: Status = "fail" if prepared.state == "failed" else "error"
        summary = clipped(f"{prepared.stage}: {cause}", 300)
        return CheckOutcome(DEPENDENCIES_INSTALLED, status, summary, evidence)
    if prepared.env is None:
        reason = "the hand-in declares no dependencies: the sandbox runtime is used as it is"
        return CheckOutcome(DEPENDENCIES_INSTALLED, "skip", reason, evidence)
    env = prepared.env
    how = "from the cache" if env.cached else "fetched and installed"
    summary = (
        f"{counted(len(env.packages), 'package')} from {prepared.declared.source}, {how}, "
        f"{prepared.seconds:.1f} s"
    )
    if prepared.warnings:
        summary += f"; {prepared.warnings[0]}"
    return CheckOutcome(DEPENDENCIES_INSTALLED, "pass", summary, evidence)


def env_dependencies_unmet(unmet: Unmet) -> CheckOutcome:
    """env.dependencies_installed for a suite this sandbox cannot run: never "declares no
    dependencies" beside a package.json, never a pass; what it declares and what is lacking."""
    return skip(DEPENDENCIES_INSTALLED, unmet.declared())
