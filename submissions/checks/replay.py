"""The replay.* checks, one function per catalog id, judged from sandboxed runs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, cast

from cassettes_app.checks import CheckOutcome, Status, counted
from cassettes_app.checks.catalog import (
    BYTE_IDENTICAL,
    ENTRYPOINTS,
    MISSING_FIXTURE,
    NO_NETWORK,
    OFFLINE_PASS,
    RECORDINGS_USED,
    REPLAY_CHECKS,
)
from cassettes_app.checks.docs.entrypoints import docs_entrypoints_after_replay
from submissions import sandbox
from submissions.checks.replay_compare import (
    classify,
    describe_attempts,
    files_read,
    missing_module,
    network_attempts,
    probe_outcome,
)
from submissions.models import CheckResult, Submission
from submissions.redact import redact_text

_TAIL = 4000


@dataclass
class Run:
    """One sandboxed run as the checks see it."""

    label: str
    result: sandbox.RunResult
    outputs: dict[str, bytes | None] = field(default_factory=dict)
    # Graded outputs present after the run exactly as before it (a committed copy the run
    # never wrote): their `outputs` entry is None, they are no evidence of this run.
    untouched: set[str] = field(default_factory=set)

    @cached_property
    def output_text(self) -> str:
        """Both streams, redacted: computed once, since every replay check reads it."""
        data = self.result.stdout + b"\n" + self.result.stderr
        return redact_text(data.decode("utf-8", "replace"))

    def tail(self) -> str:
        return self.output_text[-_TAIL:]


def suite_blocker(run: Run) -> tuple[Literal["error", "skip"], str] | None:
    """Why a run cannot stand as evidence for the checks that build on it, or None.

    ("error", why) when the suite could not run at all (the checks could not be judged),
    ("skip", why) when it ran and failed (offline_pass reports that failure; the checks
    that need a passing suite have nothing to judge).
    """
    r = run.result
    module = missing_module(run.output_text) if r.exit_code != 0 else None
    if module:
        return "error", f"the suite could not run in {run.label}: no module {module!r}"
    if r.timed_out:
        return "skip", f"{run.label} was killed after the wall-time limit"
    if r.exit_code != 0:
        why = f", {r.killed_reason}" if r.killed_reason else ""
        return "skip", f"{run.label} did not pass (exit {r.exit_code}{why})"
    return None


def replay_offline_pass(run: Run) -> CheckOutcome:
    """replay.offline_pass: the replay command exits 0 in the sandbox, network off."""
    r = run.result
    evidence: list[dict[str, Any]] = [
        {"message": "output (tail)", "output": run.tail()},
        sandbox_evidence(r),
    ]
    if r.exit_code == 0:
        return CheckOutcome(OFFLINE_PASS, "pass", f"exit 0 in {r.duration_s:.1f} s", evidence)
    module = missing_module(run.output_text)
    if module:
        return CheckOutcome(
            OFFLINE_PASS,
            "error",
            f"the sandbox runtime has no module {module!r}: the suite could not be judged",
            evidence,
        )
    if r.timed_out:
        return CheckOutcome(
            OFFLINE_PASS,
            "fail",
            f"killed after the wall-time limit of {r.limits.get('wall_seconds')} s",
            evidence,
        )
    why = f" ({r.killed_reason})" if r.killed_reason else ""
    return CheckOutcome(OFFLINE_PASS, "fail", f"exit {r.exit_code}{why}", evidence)


def sandbox_evidence(r: sandbox.RunResult) -> dict[str, Any]:
    return {
        "message": "sandbox" if r.sandboxed else "NOT SANDBOXED (development setting)",
        "limits": r.limits,
        "layers": r.layers,
    }


def replay_byte_identical(run1: Run, run2: Run, outputs: list[str]) -> CheckOutcome:
    """replay.byte_identical: two runs give byte-identical graded outputs; a diff when not."""
    cid = BYTE_IDENTICAL
    if not outputs:
        return CheckOutcome(cid, "skip", "the assignment names no graded outputs")
    for run in (run1, run2):
        if blocked := suite_blocker(run):
            status, why = blocked
            return CheckOutcome(cid, status, f"{why}: its outputs are not compared")
    evidence: list[dict[str, object]] = []
    kinds = []
    missing = []
    for path in outputs:
        a, b = run1.outputs.get(path), run2.outputs.get(path)
        if a is None or b is None:
            evidence.append({"path": path, "message": _not_written(path, run1, run2)})
            missing.append(path)
            continue
        diff = classify(a, b, path)
        if diff.kind != "identical":
            kinds.append(diff.kind)
            evidence.append(
                {
                    "path": path,
                    "message": f"differs: {diff.kind}",
                    "kind": diff.kind,
                    "first_json_path": diff.first_json_path,
                    "diff": redact_text(diff.diff),
                }
            )
        else:
            digest = hashlib.sha256(a).hexdigest()[:16]
            evidence.append(
                {"path": path, "message": f"identical ({len(a)} bytes, sha256 {digest})"}
            )
    if kinds:
        return CheckOutcome(
            cid, "fail", f"outputs differ: {', '.join(sorted(set(kinds)))}", evidence
        )
    if missing:
        # A file a run did not write (absent, or a committed copy it left untouched) says
        # nothing about whether the replay is deterministic.
        return CheckOutcome(
            cid,
            "skip",
            f"graded output not written by the replay: {', '.join(missing)}",
            evidence,
        )
    return CheckOutcome(
        cid, "pass", f"{counted(len(outputs), 'graded output')} byte-identical", evidence
    )


def _not_written(path: str, run1: Run, run2: Run) -> str:
    """'not written by run 1 (the committed copy was left untouched) and run 2'."""
    parts = []
    for run in (run1, run2):
        if run.outputs.get(path) is None:
            kept = path in run.untouched
            parts.append(run.label + (" (the committed copy was left untouched)" if kept else ""))
    return f"not written by {' and '.join(parts)}"


def replay_no_network_attempts(runs: list[Run], probes: list[Run] | None = None) -> CheckOutcome:
    """replay.no_network_attempts: no connect/resolve attempt was seen during replay.

    `runs` are the replays (every recording present); `probes` the runs with a recording
    removed. Both are replay: an attempt in either fails this check (a probe's attempt is
    also what replay.missing_fixture_fails_loudly reports as a network fallback).
    """
    cid = NO_NETWORK
    if (blocked := suite_blocker(runs[0])) and blocked[0] == "error":
        return CheckOutcome(cid, "error", f"{blocked[1]}: nothing ran to watch")
    attempts = [(run.label, e) for run in runs for e in network_attempts(run.result.audit_events)]
    probed = [e for run in probes or [] for e in network_attempts(run.result.audit_events)]
    note = "seen by the audit hook; the network namespace blocks them regardless"
    if not attempts and not probed:
        return CheckOutcome(cid, "pass", f"no network attempt seen ({note})")
    evidence = [
        {"message": f"{label}: {describe_attempts([e])}", "event": e} for label, e in attempts
    ]
    evidence += [{"message": f"probe: {describe_attempts([e])}", "event": e} for e in probed]
    parts = [describe_attempts([e for _, e in attempts])] if attempts else []
    if probed:
        parts.append(f"with a recording removed: {describe_attempts(probed)}")
    return CheckOutcome(cid, "fail", f"{'; '.join(parts)} ({note})", evidence)


def replay_recordings_used(run1: Run, recordings: list[str]) -> tuple[CheckOutcome, set[str]]:
    """replay.recordings_used: which recordings the suite read; unread ones are orphans."""
    cid = RECORDINGS_USED
    read = files_read(run1.result.audit_events)
    used = {path for path in recordings if path in read}
    if (blocked := suite_blocker(run1)) and blocked[0] == "error":
        return CheckOutcome(cid, "error", f"{blocked[1]}: nothing ran to watch"), used
    if not recordings:
        return CheckOutcome(cid, "skip", "no recordings were found to watch"), used
    orphans = sorted(set(recordings) - used)
    evidence = [{"path": p, "message": "never read by the suite"} for p in orphans]
    summary = f"{len(used)} of {len(recordings)} recordings read"
    if not used:
        return CheckOutcome(
            cid,
            "warn",
            summary + " (the suite may read them from outside Python, or not at all)",
            evidence,
        ), used
    return CheckOutcome(cid, "warn" if orphans else "pass", summary, evidence), used


def replay_missing_fixture_fails_loudly(
    probes: list[tuple[str, str | None, Run]], baseline: Run
) -> CheckOutcome:
    """replay.missing_fixture_fails_loudly: without a used recording, the run fails and says so.

    Only against a suite that passes with every recording present (`baseline`): a failure
    without one proves nothing when the suite failed anyway (an import, a broken test).
    """
    cid = MISSING_FIXTURE
    if blocked := suite_blocker(baseline):
        status, why = blocked
        return CheckOutcome(cid, status, f"{why} with every recording present: no probe judged")
    if not probes:
        return CheckOutcome(cid, "skip", "no recording was seen being read, so none was removed")
    evidence = []
    rank = {"fails_loudly": 0, "fails_unclearly": 1, "passes_silently": 2, "network_fallback": 3}
    outcomes = []
    for removed, key, run in probes:
        outcome, reason = probe_outcome(
            exit_code=run.result.exit_code,
            output=run.output_text,
            removed=removed,
            key=key,
            attempts=network_attempts(run.result.audit_events),
        )
        outcomes.append(outcome)
        evidence.append(
            {
                "path": removed,
                "message": f"{outcome}: {reason}",
                "outcome": outcome,
                "output": run.tail(),
            }
        )
    # Silent passes only count when no probe was conclusive (see the probe loop's comment).
    judged = [o for o in outcomes if o != "passes_silently"] or outcomes
    worst = max(judged, key=rank.__getitem__)
    evidence.sort(key=lambda e: -rank[e["outcome"]])
    verdicts: dict[str, Status] = {"fails_loudly": "pass", "fails_unclearly": "warn"}
    return CheckOutcome(
        cid,
        verdicts.get(worst, "fail"),
        f"with a recording removed the run {_SAID[worst]}",
        evidence,
    )


# What a run with a recording removed did, as the end of "with a recording removed the run …".
_SAID = {
    "fails_loudly": "fails loudly, naming what is missing",
    "fails_unclearly": "fails without naming what is missing",
    "passes_silently": "passes silently",
    "network_fallback": "falls back to the network",
}


def replay_error_outcomes(reason: str, cause: str = "") -> list[CheckOutcome]:
    return [CheckOutcome(cid, "error", reason, cause=cause) for cid in REPLAY_CHECKS]


def entrypoints_after_replay(
    submission: Submission, command: str, run1: Run
) -> CheckOutcome | None:
    """docs.entrypoints again once the replay ran: an entrypoint the product itself ran and
    saw exit 0 is proven present, whatever the static reading guessed. None when nothing
    changes (run 1 failed, no static outcome stored, or nothing to upgrade)."""
    if run1.result.exit_code != 0:
        return None
    row = CheckResult.objects.filter(submission=submission, check_id=ENTRYPOINTS).first()
    if row is None:
        return None
    # The status column's choices are exactly the Status values.
    status = cast(Status, row.status)
    static = CheckOutcome(row.check_id, status, row.summary, list(row.evidence), row.cause)
    proven = docs_entrypoints_after_replay(static, [command])
    return None if proven is static else proven
