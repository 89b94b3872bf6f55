"""The replay job: run the suite offline in the sandbox, twice, then without a recording.

Writes replay.offline_pass, replay.byte_identical, replay.missing_fixture_fails_loudly,
replay.no_network_attempts and replay.recordings_used.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings

from cassettes_app.checks import CheckOutcome
from submissions import sandbox
from submissions.analysis import checks_store
from submissions.intake import submission_tree
from submissions.jobs import JobError, Outcome, Progress, handler
from submissions.models import Job, Recording, Submission
from submissions.redact import redact_text
from submissions.replay_compare import (
    classify,
    describe_attempts,
    files_read,
    missing_module,
    network_attempts,
    probe_outcome,
)

log = logging.getLogger(__name__)

RUN1_ENV = {"PYTHONHASHSEED": "1", "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
RUN2_ENV = {"PYTHONHASHSEED": "2718", "TZ": "Asia/Kathmandu", "LC_ALL": "C", "LANG": "C"}
RUN2_SUBDIR = "run-2"  # run 2 works at /work/run-2: another absolute path than run 1
REPLAY_CHECKS = (
    "replay.offline_pass",
    "replay.byte_identical",
    "replay.missing_fixture_fails_loudly",
    "replay.no_network_attempts",
    "replay.recordings_used",
)
_TAIL = 4000


@dataclass
class Run:
    """One sandboxed run as the checks see it."""

    label: str
    result: sandbox.RunResult
    outputs: dict[str, bytes | None] = field(default_factory=dict)

    @property
    def output_text(self) -> str:
        data = self.result.stdout + b"\n" + self.result.stderr
        return redact_text(data.decode("utf-8", "replace"))

    def tail(self) -> str:
        return self.output_text[-_TAIL:]


def sandbox_limits() -> sandbox.SandboxLimits:
    """The sandbox limits in force, from settings."""
    return sandbox.SandboxLimits(
        wall_seconds=settings.SANDBOX_WALL_SECONDS,
        cpu_seconds=settings.SANDBOX_CPU_SECONDS,
        address_space_bytes=settings.SANDBOX_MEMORY_BYTES,
        processes=settings.SANDBOX_PROCESSES,
        file_size_bytes=settings.SANDBOX_FILE_BYTES,
        open_files=settings.SANDBOX_OPEN_FILES,
        tmpfs_bytes=settings.SANDBOX_TMPFS_BYTES,
        output_bytes=settings.SANDBOX_OUTPUT_BYTES,
    )


def _sandbox_kwargs() -> dict[str, object]:
    return {
        "bwrap": settings.SANDBOX_BWRAP,
        "runtime": Path(settings.SANDBOX_RUNTIME),
        "uid_base": settings.SANDBOX_UID_BASE,
    }


def sandbox_problems() -> list[str]:
    """What stops the sandbox here (empty when it can run)."""
    return sandbox.self_check(slots=range(settings.SANDBOX_SLOTS), probe=False, **_sandbox_kwargs())


def _work_parent() -> Path:
    """The folder workspaces are made in; the sandbox uids must be able to traverse it."""
    parent = Path(settings.SANDBOX_WORK_DIR)
    parent.mkdir(parents=True, exist_ok=True)
    os.chmod(parent, 0o711)  # noqa: S103 - traversable, not listable, by the sandbox uids
    return parent


@contextlib.contextmanager
def _slot() -> Iterator[int]:
    """A free sandbox slot for this process (slots are exclusive; busy ones are skipped)."""
    count = settings.SANDBOX_SLOTS
    start = os.getpid() % count
    for i in range(count):
        slot = (start + i) % count
        lock = Path(sandbox.LOCK_DIR) / f"job-slot-{slot}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        import fcntl

        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield slot
        finally:
            os.close(fd)
        return
    raise JobError(f"all {count} sandbox slots are busy")


def sandbox_run(command: str | list[str], **kwargs: object) -> sandbox.RunResult:
    """sandbox.run, waiting out a slot that another process holds for a single short run."""
    import time

    deadline = time.monotonic() + 60
    while True:
        try:
            return sandbox.run(command, **kwargs)  # type: ignore[arg-type]
        except sandbox.SandboxBusy:
            if time.monotonic() > deadline:
                raise JobError("the sandbox slot stayed busy for 60 s") from None
            time.sleep(0.2)


def recording_dirs(globs: list[str]) -> list[str]:
    """The folders the audit hook watches: the fixed prefix of each recording glob."""
    dirs = set()
    for pattern in globs:
        parts = []
        for part in PurePosixPath(pattern).parts[:-1]:
            if any(ch in part for ch in "*?["):
                break
            parts.append(part)
        dirs.add("/".join(parts) if parts else ".")
    return sorted(dirs)


def _read_outputs(
    workspace: Path, base: str, paths: list[str], uid: int
) -> dict[str, bytes | None]:
    """Graded outputs read back as the sandbox uid, never following a planted link."""
    out: dict[str, bytes | None] = {}
    for rel in paths:
        full = f"{base}/{rel}" if base else rel
        try:
            out[rel] = sandbox.read_output_file(
                workspace, full, settings.REPLAY_OUTPUT_MAX_BYTES, uid
            )
        except (OSError, sandbox.OutputFileRefused) as exc:
            log.info("output %s unreadable: %s", rel, exc)
            out[rel] = None
    return out


def _run(
    label: str,
    tree: Path,
    command: str,
    *,
    env: dict[str, str],
    slot: int,
    outputs: list[str],
    watch: list[str],
    subdir: str = "",
    remove: str | None = None,
) -> Run:
    """Copy the tree into a fresh workspace, run the command there, read the outputs back."""
    uid = sandbox.slot_uid(slot, settings.SANDBOX_UID_BASE)
    workspace = sandbox.prepare_workspace(tree, _work_parent(), uid)
    try:
        if subdir:
            _nest(workspace, subdir, uid)
        if remove:
            # Before any candidate code runs the copy holds no planted links: plain unlink.
            (workspace / subdir / remove).unlink()
        cwd = f"{sandbox.WORK_MOUNT}/{subdir}" if subdir else sandbox.WORK_MOUNT
        result = sandbox_run(
            command,
            workspace=workspace,
            limits=sandbox_limits(),
            slot=slot,
            env=env,
            audit_watch=[f"{subdir}/{w}".strip("/") if subdir else w for w in watch],
            allow_unsandboxed=settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED,
            cwd_in_sandbox=cwd,
            **_sandbox_kwargs(),
        )
        return Run(label, result, _read_outputs(workspace, subdir, outputs, uid))
    finally:
        sandbox.remove_workspace(workspace)


def _nest(workspace: Path, subdir: str, uid: int) -> None:
    """Move a fresh copy one folder down, so run 2 sees another absolute path."""
    entries = os.listdir(workspace)
    target = workspace / subdir
    target.mkdir(mode=0o700)
    os.chown(target, uid, sandbox._gid_of(uid))
    for name in entries:
        os.rename(workspace / name, target / name)


# ------------------------------------------------------------------ the checks


def check_offline_pass(run: Run) -> CheckOutcome:
    """replay.offline_pass: the replay command exits 0 in the sandbox, network off."""
    r = run.result
    evidence = [{"message": "output (tail)", "output": run.tail()}, _layers(r)]
    if r.exit_code == 0:
        return CheckOutcome(
            "replay.offline_pass", "pass", f"exit 0 in {r.duration_s:.1f} s", evidence
        )
    module = missing_module(run.output_text)
    if module:
        return CheckOutcome(
            "replay.offline_pass",
            "error",
            f"the sandbox runtime has no module {module!r}: the suite could not be judged",
            evidence,
        )
    if r.timed_out:
        return CheckOutcome(
            "replay.offline_pass",
            "fail",
            f"killed after the wall-time limit of {r.limits.get('wall_seconds')} s",
            evidence,
        )
    why = f" ({r.killed_reason})" if r.killed_reason else ""
    return CheckOutcome("replay.offline_pass", "fail", f"exit {r.exit_code}{why}", evidence)


def _layers(r: sandbox.RunResult) -> dict[str, object]:
    return {
        "message": "sandbox" if r.sandboxed else "NOT SANDBOXED (development setting)",
        "limits": r.limits,
        "layers": r.layers,
    }


def check_byte_identical(run1: Run, run2: Run, outputs: list[str]) -> CheckOutcome:
    """replay.byte_identical: two runs give byte-identical graded outputs; a diff when not."""
    cid = "replay.byte_identical"
    if not outputs:
        return CheckOutcome(cid, "skip", "the assignment names no graded outputs")
    evidence: list[dict[str, object]] = []
    kinds = []
    for path in outputs:
        a, b = run1.outputs.get(path), run2.outputs.get(path)
        if a is None or b is None:
            missing = [label for label, v in (("run 1", a), ("run 2", b)) if v is None]
            evidence.append({"path": path, "message": f"not written by {' and '.join(missing)}"})
            kinds.append("missing")
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
    if not kinds:
        return CheckOutcome(
            cid, "pass", f"{len(outputs)} graded output(s) byte-identical", evidence
        )
    return CheckOutcome(cid, "fail", f"outputs differ: {', '.join(sorted(set(kinds)))}", evidence)


def check_no_network(runs: list[Run]) -> CheckOutcome:
    """replay.no_network_attempts: no connect/resolve attempt was seen during replay."""
    cid = "replay.no_network_attempts"
    attempts = [(run.label, e) for run in runs for e in network_attempts(run.result.audit_events)]
    note = "seen by the audit hook; the network namespace blocks them regardless"
    if not attempts:
        return CheckOutcome(cid, "pass", "no network attempt seen (" + note + ")")
    evidence = [
        {"message": f"{label}: {describe_attempts([e])}", "event": e} for label, e in attempts
    ]
    summary = describe_attempts([e for _, e in attempts])
    return CheckOutcome(cid, "fail", f"{summary} ({note})", evidence)


def check_recordings_used(run1: Run, recordings: list[str]) -> tuple[CheckOutcome, set[str]]:
    """replay.recordings_used: which recordings the suite read; unread ones are orphans."""
    cid = "replay.recordings_used"
    read = files_read(run1.result.audit_events)
    used = {path for path in recordings if path in read}
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


def choose_probes(used: set[str], count: int, *, preferred: set[str] = frozenset()) -> list[str]:
    """A deterministic choice of used recordings to remove: preferred ones first, then by hash."""
    ranked = sorted(
        used, key=lambda p: (p not in preferred, hashlib.sha256(p.encode()).hexdigest())
    )
    return ranked[:count]


def probe_preferred(rows: list[tuple[str, str, str, str]]) -> set[str]:
    """Recordings whose removal must matter: a verified key held by no other file.

    rows are (path, key, recomputed_key, sha256). A duplicate copy, a hand-edited key or a
    leftover would let a correct solution pass without it, which proves nothing.
    """
    keys: dict[str, int] = {}
    shas: dict[str, int] = {}
    for _, key, _, sha in rows:
        keys[key] = keys.get(key, 0) + 1
        shas[sha] = shas.get(sha, 0) + 1
    return {
        path
        for path, key, recomputed, sha in rows
        if key and key == recomputed and keys[key] == 1 and shas[sha] == 1
    }


def check_missing_fixture(probes: list[tuple[str, str | None, Run]]) -> CheckOutcome:
    """replay.missing_fixture_fails_loudly: without a used recording, the run fails and says so."""
    cid = "replay.missing_fixture_fails_loudly"
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
    status = {"fails_loudly": "pass", "fails_unclearly": "warn"}.get(worst, "fail")
    return CheckOutcome(
        cid, status, f"with a recording removed the run {worst.replace('_', ' ')}", evidence
    )


def _error_outcomes(reason: str) -> list[CheckOutcome]:
    return [CheckOutcome(cid, "error", reason) for cid in REPLAY_CHECKS]


# ------------------------------------------------------------------ the job


@handler(Job.Kind.REPLAY)
def replay_run(job: Job, progress: Progress) -> Outcome:
    """Run the suite twice and once per probe; write the replay checks."""
    submission: Submission = job.submission
    assignment = submission.assignment
    command = assignment.replay_command.strip()
    if not command:
        raise JobError("the assignment has no replay command")
    problems = sandbox_problems()
    if problems and not settings.SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED:
        reason = "the sandbox cannot run here: " + "; ".join(problems)
        checks_store(submission, job, _error_outcomes(reason))
        raise JobError(reason)
    progress.step("copy", 5)
    tree = submission_tree(submission)
    outputs = list(assignment.graded_outputs)
    watch = recording_dirs(list(assignment.recording_globs))
    rows = list(
        Recording.objects.filter(submission=submission, role=Recording.Role.RECORDING).values_list(
            "path", "key", "recomputed_key", "sha256"
        )
    )
    recordings = {path: key for path, key, _, _ in rows}
    try:
        with _slot() as slot:
            common = {"slot": slot, "outputs": outputs, "watch": watch}
            progress.step("run 1", 15)
            run1 = _run("run 1", tree, command, env=RUN1_ENV, **common)
            progress.log(f"run 1: exit {run1.result.exit_code} in {run1.result.duration_s:.1f} s")
            progress.log(run1.tail())
            progress.step("run 2", 40)
            run2 = _run("run 2", tree, command, env=RUN2_ENV, subdir=RUN2_SUBDIR, **common)
            progress.log(f"run 2: exit {run2.result.exit_code} in {run2.result.duration_s:.1f} s")
            progress.step("compare", 65)
            recordings_check, used = check_recordings_used(run1, sorted(recordings))
            Recording.objects.filter(submission=submission, role="recording").update(used=False)
            Recording.objects.filter(submission=submission, path__in=used).update(used=True)
            probes = []
            # A loader that opens every file makes "read" a weak signal: a silent pass after
            # removing a file it never needed proves nothing, so such probes try the next one.
            candidates = choose_probes(used, len(used), preferred=probe_preferred(rows))
            conclusive = 0
            for i, removed in enumerate(candidates[: settings.REPLAY_MISSING_PROBE_TRIES]):
                if conclusive >= settings.REPLAY_MISSING_PROBES:
                    break
                progress.step(f"probe {i + 1}", 75 + i)
                probe = _run("probe", tree, command, env=RUN1_ENV, remove=removed, **common)
                progress.log(f"probe without {removed}: exit {probe.result.exit_code}")
                probes.append((removed, recordings.get(removed) or None, probe))
                if probe.result.exit_code != 0 or network_attempts(probe.result.audit_events):
                    conclusive += 1
    except sandbox.SandboxUnavailable as exc:
        reason = f"the sandbox cannot run here: {exc}"
        checks_store(submission, job, _error_outcomes(reason))
        raise JobError(reason) from exc
    outcomes = [
        check_offline_pass(run1),
        check_byte_identical(run1, run2, outputs),
        check_missing_fixture(probes),
        check_no_network([run1, run2] + [p[2] for p in probes]),
        recordings_check,
    ]
    checks_store(submission, job, outcomes)
    progress.step("done", 100)
    failing = [o.id for o in outcomes if o.status == "fail"]
    state = Job.State.PASSED if run1.result.exit_code == 0 else Job.State.FAILED
    return Outcome(state, f"replay checks written; failing: {', '.join(failing) or 'none'}")
