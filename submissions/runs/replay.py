"""The replay job: run the suite offline in the sandbox, twice, then without a recording.

The checks it writes (replay.*) are computed in `submissions.checks.replay`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath
from typing import Any, TypedDict

from django.conf import settings

from cassettes_app.checks import CheckOutcome, Status
from cassettes_app.checks.catalog import REPLAY_CHECKS
from cassettes_app.checks.runlog import RUN_LOG, cassettes_model_metadata_from_run_log
from submissions import sandbox
from submissions.checks.environment import env_dependencies_installed, env_dependencies_unmet
from submissions.checks.replay import (
    Run,
    entrypoints_after_replay,
    replay_byte_identical,
    replay_error_outcomes,
    replay_missing_fixture_fails_loudly,
    replay_no_network_attempts,
    replay_offline_pass,
    replay_recordings_used,
    suite_blocker,
)
from submissions.checks.replay_compare import (
    network_attempts,
)
from submissions.checks.store import checks_store
from submissions.deps.ecosystems import unmet_need
from submissions.deps.prepare import dependencies
from submissions.intake.trees import submission_tree
from submissions.jobs.types import JobError, Outcome, Progress
from submissions.models import CheckResult, Job, Recording, Submission
from submissions.runfiles import run_files_keep
from submissions.sandbox.slots import Slot, parallel_runs, sandbox_slot, spare_slots
from submissions.sandbox.types import SandboxUnavailable

log = logging.getLogger(__name__)


RUN1_ENV = {"PYTHONHASHSEED": "1", "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


RUN2_ENV = {"PYTHONHASHSEED": "2718", "TZ": "Asia/Kathmandu", "LC_ALL": "C", "LANG": "C"}


RUN2_SUBDIR = "run-2"  # run 2 works at /work/run-2: another absolute path than run 1


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


def _run(
    label: str,
    tree: Path,
    command: str,
    *,
    env: dict[str, str],
    slot: Slot,
    outputs: list[str],
    watch: list[str],
    subdir: str = "",
    remove: str | None = None,
    cancel_fd: int | None = None,
    workspace: Path | None = None,
) -> Run:
    """Copy the tree into a fresh workspace, run the command there, read the outputs back.

    A committed copy of a graded output stays where it is (the candidate's own tests may
    compare against it); whether this run wrote it is learnt from its stamp before and
    after. One the run left untouched is not read: it is no output of this run.
    With `workspace` (a fresh copy from slot.workspace_make) the run uses it and leaves
    its removal to the caller.
    """
    with contextlib.ExitStack() as stack:
        if workspace is None:
            workspace = stack.enter_context(slot.workspace(tree))
        if subdir:
            _nest(workspace, subdir, slot.uid)
        # Before any candidate code runs the copy holds no planted links: plain unlink.
        if remove:
            (workspace / subdir / remove).unlink()
        # Where each graded output sits in the workspace (run 2's one folder down).
        full = {rel: f"{subdir}/{rel}" if subdir else rel for rel in outputs}
        before = sandbox.fresh_file_stamps(workspace, list(full.values()))
        cwd = f"{sandbox.WORK_MOUNT}/{subdir}" if subdir else sandbox.WORK_MOUNT
        result = slot.run(
            command,
            workspace=workspace,
            env=env,
            audit_watch=[f"{subdir}/{w}".strip("/") if subdir else w for w in watch],
            cwd_in_sandbox=cwd,
            cancel_fd=cancel_fd,
        )
        # One child as the sandbox uid: each output's stamp, and what the run wrote.
        back = sandbox.outputs_read_back(
            workspace, list(full.values()), before, settings.REPLAY_OUTPUT_MAX_BYTES, slot.uid
        )
        untouched = set()
        read: dict[str, bytes | None] = {}
        for rel in outputs:
            stamp, content = back[full[rel]]
            if stamp is not None and stamp == before[full[rel]]:
                untouched.add(rel)
                read[rel] = None
            elif isinstance(content, OSError):
                log.info("output %s unreadable: %s", rel, content)
                read[rel] = None
            else:
                read[rel] = content
        return Run(label, result, read, untouched)


def _nest(workspace: Path, subdir: str, uid: int) -> None:
    """Move a fresh copy one folder down, so run 2 sees another absolute path."""
    entries = os.listdir(workspace)
    target = workspace / subdir
    target.mkdir(mode=0o700)
    os.chown(target, uid, sandbox.gid_of(uid))
    for name in entries:
        os.rename(workspace / name, target / name)


def choose_probes(
    used: set[str], count: int, *, preferred: Collection[str] = frozenset()
) -> list[str]:
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


def _note(progress: Progress, percent: int) -> Callable[[str], None]:
    """A job step for each dependency stage (resolving, fetching N wheels, installing...)."""

    def note(label: str) -> None:
        progress.step(label, percent)
        progress.log(label)

    return note


def _blocked(
    submission: Submission, job: Job, env_check: CheckOutcome, status: Status, reason: str
) -> Outcome:
    """The suite cannot be judged in this environment: every replay check says why."""
    outcomes = [env_check] + [CheckOutcome(cid, status, reason) for cid in REPLAY_CHECKS]
    checks_store(submission, job, outcomes)
    state = Job.State.FAILED if status == "error" else Job.State.PASSED
    return Outcome(state, reason)


def replay_run(job: Job, progress: Progress) -> Outcome:
    """Install the hand-in's dependencies, run the suite twice and once per probe."""
    submission: Submission = job.submission
    command = submission.assignment.replay_command.strip()
    if not command:
        raise JobError("the assignment has no replay command")
    progress.step("copy", 5)
    tree = submission_tree(submission)
    # A suite needing what the sandbox cannot provide (npm packages, a Go toolchain) is not
    # run: its failure would be the sandbox's, judged as the hand-in's.
    if unmet := unmet_need(tree, command):
        return _blocked(submission, job, env_dependencies_unmet(unmet), "skip", unmet.reason())
    try:
        with (
            sandbox_slot() as slot,
            dependencies(tree, slot, _note(progress, 10)) as prepared,
        ):
            env_check = env_dependencies_installed(prepared)
            if prepared.blocker:
                return _blocked(submission, job, env_check, "error", prepared.blocker)
            if prepared.python_refused:
                return _blocked(submission, job, env_check, "skip", prepared.python_refused)
            slot = slot.with_site(prepared.site)
            outcomes, run1, run2 = _replay(submission, tree, command, slot, progress)
    except SandboxUnavailable as exc:
        reason = f"the replay needs the sandbox: {exc.cause}"
        checks_store(submission, job, replay_error_outcomes(reason, CheckResult.Cause.SANDBOX))
        raise JobError(reason) from exc
    if proven := entrypoints_after_replay(submission, command, run1):
        outcomes.append(proven)
    checks_store(submission, job, [env_check, *outcomes])
    run_files_keep(submission=submission, job=job, runs={1: run1.outputs, 2: run2.outputs})
    progress.step("done", 100)
    failing = [o.id for o in outcomes if o.status == "fail"]
    state = Job.State.PASSED if run1.result.exit_code == 0 else Job.State.FAILED
    return Outcome(state, f"replay checks written; failing: {', '.join(failing) or 'none'}")


class _Shared(TypedDict):
    """What every run of one replay shares (keywords of `_run`)."""

    outputs: list[str]
    watch: list[str]


def _conclusive(probe: Run) -> bool:
    """A probe that tells something: the suite failed, or reached for the network."""
    return probe.result.exit_code != 0 or bool(network_attempts(probe.result.audit_events))


def _maybe_wanted(i: int, done: dict[int, Run]) -> bool:
    """Whether probe i of the tries may still be wanted, with what is known so far.

    One after another, probe i runs unless REPLAY_MISSING_PROBES earlier ones were
    conclusive; an earlier probe not yet ended may still turn out inconclusive."""
    conclusive = sum(1 for j in range(i) if j in done and _conclusive(done[j]))
    return conclusive < settings.REPLAY_MISSING_PROBES


def _needed(i: int, done: dict[int, Run]) -> bool:
    """Whether probe i is wanted for certain: every earlier one has ended, too few conclusive."""
    return all(j in done for j in range(i)) and _maybe_wanted(i, done)


def spare_core() -> bool:
    """Whether a core is idle at this moment: fewer runnable tasks than cores, this thread
    aside (/proc/loadavg's instant count, our own runs included)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            runnable = int(handle.read().split()[3].partition("/")[0])
    except (OSError, ValueError, IndexError):
        return False
    return runnable - 1 < (os.cpu_count() or 1)


def _run2_and_probes(
    tree: Path,
    command: str,
    common: _Shared,
    slots: list[Slot],
    tries: list[str],
    leftover: Path | None = None,
) -> tuple[Run, list[Run]]:
    """Run 2 and the missing-recording probes, up to one per slot at once.

    The result is the sequential order's: run 2, and the probes of `tries` in order until
    REPLAY_MISSING_PROBES were conclusive. A later probe starts on a free slot before an
    earlier one has ended (it may be needed) when a core is idle, and is cancelled (killed,
    its result dropped) once it is known not to be: each probe sees only its own fresh
    copy, so running beside another changes nothing it shows. Run 1 has ended before any of
    these starts, so run 2 still runs after it, as the byte-identical check expects of a
    second run. `leftover` (run 1's workspace, of the first slot's uid) is removed on that
    slot first, beside run 2 when another slot is free.
    """
    free = list(slots)
    done: dict[int, Run] = {}
    run2: list[Run] = []
    pipes: dict[int | str, tuple[int, int]] = {}  # each run's cancel pipe (read, write)
    cancelled: set[int | str] = set()
    running: dict[Future[Any], tuple[int | str, Slot]] = {}  # a Run, or None (a removal)

    def cancel(key: int | str) -> None:
        if key not in cancelled:
            cancelled.add(key)
            os.write(pipes[key][1], b"x")

    with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="replay-run") as pool:

        def start(key: int | str) -> None:
            slot = free.pop(0)
            pipes[key] = os.pipe()
            second = key == "run 2"
            future = pool.submit(
                _run,
                "run 2" if second else "probe",
                tree,
                command,
                env=RUN2_ENV if second else RUN1_ENV,
                slot=slot,
                subdir=RUN2_SUBDIR if second else "",
                remove=None if second else tries[int(key)],
                cancel_fd=pipes[key][0],
                **common,
            )
            running[future] = (key, slot)

        try:
            if leftover is not None:  # the first slot's next run waits for it
                slot = free.pop(0)
                running[pool.submit(sandbox.remove_workspace, leftover)] = ("leftover", slot)
            following = 0  # the next probe to start
            while True:
                if not run2 and "run 2" not in pipes and free:
                    start("run 2")
                while free and following < len(tries) and _maybe_wanted(following, done):
                    # Ahead of need (an earlier probe still running) only on an idle core: on
                    # a busy host a run that may be dropped would slow the ones that count.
                    if not _needed(following, done) and not spare_core():
                        break
                    start(following)
                    following += 1
                if not running:
                    break
                ended, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in ended:
                    key, slot = running.pop(future)
                    free.append(slot)
                    run = future.result()
                    if run is None:  # the leftover removed
                        continue
                    if key == "run 2":
                        run2.append(run)
                    elif key not in cancelled:
                        done[int(key)] = run
                for key, _ in list(running.values()):
                    if isinstance(key, int) and not _maybe_wanted(key, done):
                        cancel(key)
        except BaseException:
            for key in pipes:
                cancel(key)
            raise
        finally:
            # Every run has ended once the pool is left: then its pipe can go.
            pool.shutdown(wait=True)
            for r, w in pipes.values():
                os.close(r)
                os.close(w)
    probes = []
    for i in range(len(tries)):
        if not _maybe_wanted(i, done):
            break
        probes.append(done[i])
    return run2[0], probes


def _replay(
    submission: Submission, tree: Path, command: str, slot: Slot, progress: Progress
) -> tuple[list[CheckOutcome], Run, Run]:
    """Run 1, then run 2 and the probes (at once when slots and cores allow); the replay
    checks judged from them."""
    assignment = submission.assignment
    outputs = list(assignment.graded_outputs)
    watch = recording_dirs(list(assignment.recording_globs))
    rows = list(
        Recording.objects.filter(submission=submission, role=Recording.Role.RECORDING).values_list(
            "path", "key", "recomputed_key", "sha256"
        )
    )
    # run-twice keeps the model id in a separate run log: read back, never compared.
    run_log = [RUN_LOG] if assignment.shape == "run-twice" else []
    reads = outputs + [p for p in run_log if p not in outputs]
    common: _Shared = {"outputs": reads, "watch": watch}
    progress.step("run 1", 15)
    # Run 1's copy is removed beside run 2 (see _run2_and_probes), or here on an error.
    first = slot.workspace_make(tree)
    try:
        return _after_run1(submission, tree, command, slot, progress, first, common, rows)
    finally:
        sandbox.remove_workspace(first)  # nothing left when _run2_and_probes removed it


def _after_run1(
    submission: Submission,
    tree: Path,
    command: str,
    slot: Slot,
    progress: Progress,
    first: Path,
    common: _Shared,
    rows: list[tuple[str, str, str, str]],
) -> tuple[list[CheckOutcome], Run, Run]:
    """Run 1 in the workspace `first`, then run 2 and the probes; the checks judged."""
    assignment = submission.assignment
    outputs = list(assignment.graded_outputs)
    recordings = {path: key for path, key, _, _ in rows}
    run1 = _run("run 1", tree, command, env=RUN1_ENV, slot=slot, workspace=first, **common)
    progress.log(f"run 1: exit {run1.result.exit_code} in {run1.result.duration_s:.1f} s")
    progress.log(run1.tail())
    recordings_check, used = replay_recordings_used(run1, sorted(recordings))
    # A loader that opens every file makes "read" a weak signal: a silent pass after
    # removing a file it never needed proves nothing, so such probes try the next one.
    candidates = choose_probes(used, len(used), preferred=probe_preferred(rows))
    if suite_blocker(run1) is not None:
        candidates = []  # nothing to learn from removing a file from a failing suite
    tries = candidates[: settings.REPLAY_MISSING_PROBE_TRIES]
    if not settings.REPLAY_MISSING_PROBES:
        tries = []
    progress.step("run 2" + (" and probes" if tries else ""), 40)
    with spare_slots(slot, parallel_runs() - 1) as spares:
        run2, probe_runs = _run2_and_probes(
            tree, command, common, [slot, *spares], tries, leftover=first
        )
    progress.log(f"run 2: exit {run2.result.exit_code} in {run2.result.duration_s:.1f} s")
    progress.step("compare", 65)
    Recording.objects.filter(submission=submission, role="recording").update(used=False)
    Recording.objects.filter(submission=submission, path__in=used).update(used=True)
    probes = []
    for removed, probe in zip(tries, probe_runs, strict=False):
        progress.log(f"probe without {removed}: exit {probe.result.exit_code}")
        probes.append((removed, recordings.get(removed) or None, probe))
    outcomes = [
        replay_offline_pass(run1),
        replay_byte_identical(run1, run2, outputs),
        replay_missing_fixture_fails_loudly(probes, run1),
        replay_no_network_attempts([run1, run2], [p[2] for p in probes]),
        recordings_check,
    ]
    if assignment.shape == "run-twice" and suite_blocker(run1) is None:
        outcomes.append(cassettes_model_metadata_from_run_log(run1.outputs.get(RUN_LOG)))
    return outcomes, run1, run2
