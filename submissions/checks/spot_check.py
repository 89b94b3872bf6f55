"""cassettes.live_spot_check: one recorded chat exchange re-asked against the team's model.

Run only when asked (`manage.py spot_check`, or the submission page's spot-check job), on the
host, with no candidate code: interactions of the hand-in's recordings (chosen by path, else
sampled with a seed that is shown, among those the endpoint's API family can re-ask) are sent
as recorded to the endpoint, and each live answer is compared with the recorded one on the
graded fields (`cassettes_app.checks.graded`): the tool calls, the finish reason, the
structure of a JSON answer. A model is not deterministic, so a recording reproduces when any
of its tries matches it (up to TRIES, stopping at the first match; or exactly K repeats, to
show the model's variance). It never fails: a recorded answer no try reproduces is a `warn`
naming the field, with every try shown; text drift is evidence only; a cap that left no try
is a `skip` naming the cap. Every try's answer is kept (redacted, key scrubbed) on the
SpotCheck row with its drift in tiers (`cassettes_app.checks.drift`), for the per-turn diff.

Spending: every call takes a ledger row first (`spot_spend`: month caps under a row lock),
and the endpoint's per-check caps bound the tries. A refused call ends that recording's tries,
the cap named (a `skip` when it left none). The key is read from the environment at the call
and scrubbed from anything stored (an error body may quote it).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import LIVE_SPOT_CHECK
from cassettes_app.checks.drift import drift
from cassettes_app.checks.graded import Departure, Graded, departures, graded
from cassettes_app.jsonvalues import maybe_json
from cassettes_app.pairing import exchange_turn
from cassettes_app.text import clipped
from submissions.blobs import blob_read
from submissions.checks.spot_spend import CapReached, spend_reserve, spend_settle
from submissions.checks.store import checks_store
from submissions.jobs.queue import job_create
from submissions.models import Interaction, Job, Recording, SpotCheck, Submission
from submissions.net.endpoints import Endpoint, EndpointKeyMissing, endpoint_key
from submissions.net.outbound import OutboundError, OutboundRefused
from submissions.net.reask import reask
from submissions.redact import json_storable, redact_text

logger = logging.getLogger(__name__)

TRIES = 3  # answers asked before a recording is called not reproducible
MAX_CANDIDATES = 200  # interactions read to find the re-askable ones
MAX_SAMPLE = 10  # recordings one spot check may re-ask
MAX_REPEATS = 10  # tries per recording one spot check may ask for
_SHOWN = 300  # characters of a value shown in evidence
_KEPT_ANSWER = 64_000  # characters of a live answer kept beside the recording
# A skipped recording (a cap left it no try) never hides what the others showed.
_SEVERITY = {"skip": -1, "pass": 0, "warn": 1, "error": 2}


@dataclass(slots=True)
class _Sample:
    path: str
    index: int
    url: str | None
    request: dict[str, Any]
    response: Any
    recorded: Graded


@dataclass(slots=True)
class _Budget:
    """What this spot check spent so far, against the endpoint's per-check caps."""

    made: int = 0
    tokens: int = 0


@dataclass(slots=True)
class _Tries:
    made: int = 0
    tokens: int = 0
    reproduced: bool = False
    drift: list[Departure] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first_field: str = ""
    stopped: str = ""  # why no further try was made (a cap, the endpoint's error)
    capped: bool = False  # `stopped` is a cap's refusal, not the endpoint's failure
    kept: list[dict[str, Any]] = field(default_factory=list)  # each try, for the diff page


def _endpoint(name: str | None) -> Endpoint | str:
    endpoints: tuple[Endpoint, ...] = settings.SPOT_CHECK_ENDPOINTS
    if not endpoints:
        return "no team model endpoint is configured (SPOT_CHECK_ENDPOINTS is empty)"
    if name is None:
        return endpoints[0]
    found = next((e for e in endpoints if e.name == name), None)
    known = ", ".join(e.name for e in endpoints)
    return found or f"no endpoint named {name!r} is configured (configured: {known})"


def _samples(submission: Submission, endpoint: Endpoint, paths: Sequence[str]) -> list[_Sample]:
    """The re-askable exchanges, in path order; the first of each path when paths are given."""
    rows = Interaction.objects.filter(
        recording__submission=submission, recording__role=Recording.Role.RECORDING
    ).select_related("recording", "request_blob", "response_blob")
    if paths:
        rows = rows.filter(recording__path__in=list(paths))
    out: list[_Sample] = []
    seen: set[str] = set()
    for row in rows.order_by("recording__path", "index")[:MAX_CANDIDATES]:
        if row.request_blob is None or row.response_blob is None:
            continue
        if paths and row.recording.path in seen:
            continue
        request = maybe_json(blob_read(row.request_blob))
        if not isinstance(request, dict):
            continue
        response = blob_read(row.response_blob)
        recorded = graded(request, response, row.url or None)
        if recorded.provider == endpoint.provider and not recorded.problems:
            seen.add(row.recording.path)
            out.append(
                _Sample(row.recording.path, row.index, row.url or None, request, response, recorded)
            )
    return out


def _shown(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return clipped(text, _SHOWN)


def _departure_item(sample: _Sample, number: int, d: Departure, *, graded_field: bool) -> dict:
    kind = "does not reproduce" if graded_field else "drifts (not graded)"
    return {
        "message": f"{sample.path} try {number}: {d.field} {kind}",
        "path": sample.path,
        "interaction": sample.index,
        "try": number,
        "field": d.field,
        "graded": graded_field,
        "recorded": _shown(d.recorded),
        "live": _shown(d.live),
    }


def _live_tokens(answer_body: Any, request: dict[str, Any]) -> int | None:
    """The tokens the endpoint says the call used (its usage block), None when it said none."""
    usage = graded(request, answer_body).usage if isinstance(answer_body, dict) else {}
    return usage.get("total_tokens")


def _cap_refusal(sample: _Sample, endpoint: Endpoint, budget: _Budget) -> str:
    estimate = sample.recorded.usage.get("total_tokens", 0)
    if budget.made + 1 > endpoint.check_calls:
        return (
            f"cap check_calls of endpoint {endpoint.name} reached: "
            f"{endpoint.check_calls} calls per spot check"
        )
    if budget.tokens + estimate > endpoint.check_tokens:
        return (
            f"cap check_tokens of endpoint {endpoint.name} reached: {budget.tokens} of "
            f"{endpoint.check_tokens} tokens spent, the next call estimated at {estimate}"
        )
    return ""


def _keep(tries: _Tries, sample: _Sample, answer: Any, graded_names: Sequence[str]) -> None:
    """Keep one try's answer and its drift in tiers, for the per-turn diff page."""
    body = answer.body if isinstance(answer.body, dict) else clipped(answer.text, _KEPT_ANSWER)
    items, more = drift(maybe_json(sample.response), body, graded_names=graded_names)
    text = json.dumps(body, ensure_ascii=False)
    tries.kept.append(
        {
            "try": tries.made,
            "http_status": answer.status,
            "turn": exchange_turn(sample.request, body, sample.url),
            "answer": body if len(text) <= _KEPT_ANSWER else clipped(text, _KEPT_ANSWER),
            "drift": [
                {**d.as_dict(), "recorded": _shown(d.recorded), "live": _shown(d.live)}
                for d in items
            ],
            "drift_more": more,
        }
    )


def _one_try(
    sample: _Sample,
    endpoint: Endpoint,
    key: str,
    submission: Submission,
    tries: _Tries,
    budget: _Budget,
    graded_names: Sequence[str],
) -> None:
    """Make one call (caps first) and record what it showed; sets `stopped` when it cannot."""
    estimate = sample.recorded.usage.get("total_tokens", 0)
    if refusal := _cap_refusal(sample, endpoint, budget):
        tries.stopped, tries.capped = refusal, True
        return
    try:
        spend = spend_reserve(submission=submission, endpoint=endpoint, estimate=estimate)
    except CapReached as exc:
        tries.stopped, tries.capped = str(exc), True
        return
    tries.made += 1
    budget.made += 1
    logger.info("spot check of submission %s: %s try %d", submission.pk, endpoint.name, tries.made)
    try:
        answer = reask(
            endpoint=endpoint,
            request=sample.request,
            key=key,
            allow=settings.OUTBOUND_ALLOW,
            timeout=settings.SPOT_CHECK_TIMEOUT_SECONDS,
        )
    except (OutboundRefused, OutboundError) as exc:
        spend_settle(spend=spend, tokens=0)
        tries.stopped = f"the endpoint {endpoint.name} could not be asked: {exc}"
        return
    used = _live_tokens(answer.body, sample.request)
    spend_settle(spend=spend, tokens=used if answer.status < 400 else 0)
    spent = used if used is not None else estimate
    tries.tokens += spent
    budget.tokens += spent
    _keep(tries, sample, answer, graded_names)
    if answer.status >= 300 or not isinstance(answer.body, dict):
        tries.stopped = (
            f"the endpoint {endpoint.name} answered HTTP {answer.status}: "
            f"{clipped(answer.text.strip(), 200)}"
        )
        return
    live = graded(sample.request, answer.body)
    graded_out, text_drift = departures(sample.recorded, live)
    for d in graded_out:
        tries.evidence.append(_departure_item(sample, tries.made, d, graded_field=True))
    for d in text_drift:
        tries.evidence.append(_departure_item(sample, tries.made, d, graded_field=False))
    tries.kept[-1]["reproduced"] = not graded_out
    if not graded_out:
        tries.reproduced, tries.drift = True, tries.drift or text_drift
    elif not tries.first_field:
        tries.first_field = graded_out[0].field


def _n_tries(count: int) -> str:
    return "1 try" if count == 1 else f"{count} tries"


def _verdict(sample: _Sample, endpoint: Endpoint, tries: _Tries) -> CheckOutcome:
    """One recording's verdict: `pass` when a try reproduces the graded fields (text drift
    is named, never held against it); `warn` when no try the caps allowed reproduces them,
    every try shown; `skip` when a cap left no try at all; `error` when the endpoint could
    not be asked. Never `fail`: a model's answer is evidence about the model as much as
    about the recording, so the reviewer judges it from the tries."""
    where = f"{sample.path} (interaction {sample.index})"
    spent = f"{counted(tries.made, 'call')}, {tries.tokens} tokens on {endpoint.name}"
    evidence = [
        {"message": f"re-asked {where} against endpoint {endpoint.name}", "path": sample.path},
        *tries.evidence,
    ]
    if tries.stopped:
        evidence.append({"message": tries.stopped, "path": sample.path})
    if tries.reproduced and tries.stopped:
        # Reproduced before a cap (or an error) cut the repeats short: say so.
        spent += f"; {_n_tries(tries.made)} made, then {tries.stopped}"
    if tries.reproduced:
        drifted = ""
        if tries.drift:
            fields = ", ".join(d.field for d in tries.drift)
            drifted = f"; its text drifts ({fields}), which is not graded"
        summary = f"{where} reproduces on the graded fields{drifted} ({spent})"
        return CheckOutcome(LIVE_SPOT_CHECK, "pass", summary, evidence)
    if tries.first_field:
        # Every answer the caps allowed departed on a graded field: what was observed.
        cut = f"; then {tries.stopped}" if tries.stopped else ""
        summary = (
            f"{where} is reproduced by no try ({_n_tries(tries.made)}): {tries.first_field} "
            f"differs from the recorded answer in every try shown ({spent}){cut}"
        )
        return CheckOutcome(LIVE_SPOT_CHECK, "warn", summary, evidence)
    if tries.capped and tries.made == 0:
        summary = f"{where} was not re-asked: {tries.stopped}"
        return CheckOutcome(LIVE_SPOT_CHECK, "skip", summary, evidence)
    made = _n_tries(tries.made)
    reason = tries.stopped or "no answer could be compared"
    summary = f"spot check of {where} not finished after {made}: {reason}"
    return CheckOutcome(LIVE_SPOT_CHECK, "error", summary, evidence)


def _combined(outcomes: list[CheckOutcome], spent: str) -> CheckOutcome:
    """One check from each recording's verdict: the worst decides (error, warn, pass, skip)."""
    if len(outcomes) == 1:
        return outcomes[0]
    worst = max(outcomes, key=lambda o: _SEVERITY[o.status])
    counts = ", ".join(
        f"{sum(o.status == s for o in outcomes)} {s}"
        for s in ("pass", "warn", "skip", "error")
        if any(o.status == s for o in outcomes)
    )
    summary = f"{len(outcomes)} recordings re-asked ({counts}; {spent}): {worst.summary}"
    evidence = [item for o in outcomes for item in o.evidence]
    return CheckOutcome(LIVE_SPOT_CHECK, worst.status, summary, evidence)


@dataclass(slots=True)
class SpotAsk:
    """What a spot check re-asks: chosen recordings, else `sample` sampled with `seed`."""

    endpoint: str | None = None
    paths: Sequence[str] = ()
    sample: int = 1
    seed: int | None = None
    repeats: int | None = None  # K tries each, all made; None: up to TRIES, first match ends


@dataclass(slots=True)
class _Judged:
    outcome: CheckOutcome
    key: str = ""  # the key read ("" when none), for scrubbing
    results: list[dict[str, Any]] = field(default_factory=list)
    budget: _Budget = field(default_factory=_Budget)


def _picked(submission: Submission, endpoint: Endpoint, ask: SpotAsk) -> list[_Sample] | str:
    samples = _samples(submission, endpoint, ask.paths)
    if not samples:
        where = f"recordings {', '.join(ask.paths)}" if ask.paths else "the hand-in's recordings"
        return f"{where} hold no {endpoint.api} exchange that endpoint {endpoint.name} can re-ask"
    if ask.paths:
        return samples
    # Reproducible sampling: the same hand-in and seed re-ask the same exchanges.
    seed = submission.pk if ask.seed is None else ask.seed
    count = max(1, min(ask.sample, MAX_SAMPLE, len(samples)))
    return sorted(random.Random(seed).sample(samples, count), key=lambda s: (s.path, s.index))


def _judge(
    submission: Submission,
    ask: SpotAsk,
    environ: Any,
    on_sample: Callable[[int, int], None] | None = None,
) -> _Judged:
    endpoint = _endpoint(ask.endpoint)
    if isinstance(endpoint, str):
        return _Judged(skip(LIVE_SPOT_CHECK, endpoint))
    picked = _picked(submission, endpoint, ask)
    if isinstance(picked, str):
        return _Judged(skip(LIVE_SPOT_CHECK, picked))
    try:
        key = endpoint_key(endpoint, environ)
    except EndpointKeyMissing as exc:
        return _Judged(CheckOutcome(LIVE_SPOT_CHECK, "error", str(exc)))
    judged = _Judged(CheckOutcome(LIVE_SPOT_CHECK, "skip", ""), key)
    graded_names = [n for n in submission.assignment.graded_fields or [] if isinstance(n, str)]
    outcomes = []
    for done, sample in enumerate(picked):
        if on_sample is not None:
            on_sample(done, len(picked))
        tries = _Tries()
        wanted = ask.repeats or TRIES
        while tries.made < wanted and not tries.stopped:
            if tries.reproduced and ask.repeats is None:
                break
            _one_try(sample, endpoint, key, submission, tries, judged.budget, graded_names)
        verdict = _verdict(sample, endpoint, tries)
        outcomes.append(verdict)
        recorded_answer = maybe_json(sample.response)
        judged.results.append(
            {
                "path": sample.path,
                "interaction": sample.index,
                "status": verdict.status,
                "summary": verdict.summary,
                "recorded_turn": exchange_turn(sample.request, recorded_answer, sample.url),
                "recorded_answer": recorded_answer,
                "tries": tries.kept,
            }
        )
    budget = judged.budget
    spent = f"{counted(budget.made, 'call')}, {budget.tokens} tokens on {endpoint.name}"
    judged.outcome = _combined(outcomes, spent)
    return judged


def _scrubbed(value: Any, key: str) -> Any:
    """`value` with every occurrence of the key replaced (recursively), then redacted."""
    if isinstance(value, str):
        return redact_text(value.replace(key, "[key removed]") if key else value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, key) for v in value]
    return value


def spot_check_run(
    *,
    submission: Submission,
    ask: SpotAsk,
    job: Job | None = None,
    spot: SpotCheck | None = None,
    environ: Any = None,
    on_sample: Callable[[int, int], None] | None = None,
) -> CheckOutcome:
    """Re-ask the recordings `ask` names; store the check (and each try, on `spot`)."""
    judged = _judge(submission, ask, environ, on_sample)
    key = judged.key
    outcome = CheckOutcome(
        judged.outcome.id,
        judged.outcome.status,
        _scrubbed(judged.outcome.summary, key),
        _scrubbed(judged.outcome.evidence, key),
    )
    checks_store(submission, job, [outcome])
    if spot is not None:
        SpotCheck.objects.filter(pk=spot.pk).update(
            status=SpotCheck.Status.ERROR if outcome.status == "error" else SpotCheck.Status.READY,
            check_status=outcome.status,
            summary=outcome.summary,
            results=json_storable(_scrubbed(judged.results, key)),
            calls=judged.budget.made,
            tokens=judged.budget.tokens,
        )
    return outcome


def cassettes_live_spot_check(
    *,
    submission: Submission,
    job: Job | None = None,
    endpoint: str | None = None,
    recording: str | None = None,
    environ: Any = None,
) -> CheckOutcome:
    """Re-ask one recorded exchange of the hand-in (at `recording`, else sampled)."""
    ask = SpotAsk(endpoint=endpoint, paths=[recording] if recording else ())
    return spot_check_run(submission=submission, ask=ask, job=job, environ=environ)


class SpotCheckRefused(Exception):
    """A spot check that cannot be queued; the message says why."""


def spot_check_create(
    *,
    submission: Submission,
    requested_by: Any,
    endpoint: str,
    paths: Sequence[str] = (),
    sample: int = 0,
    seed: int | None = None,
    repeats: int | None = None,
    scheduled: bool = False,
) -> SpotCheck:
    """Queue a spot-check job; SpotCheckRefused when it cannot run (nothing is spent)."""
    found = _endpoint(endpoint)
    if isinstance(found, str):
        raise SpotCheckRefused(found)
    if not paths and not 1 <= sample <= MAX_SAMPLE:
        raise SpotCheckRefused(f"pick recordings, or a sample of 1 to {MAX_SAMPLE}")
    if repeats is not None and not 1 <= repeats <= min(MAX_REPEATS, found.check_calls):
        raise SpotCheckRefused(
            f"repeats must be 1 to {min(MAX_REPEATS, found.check_calls)} "
            f"(the endpoint's check_calls cap is {found.check_calls})"
        )
    known = set(
        Recording.objects.filter(
            submission=submission, role=Recording.Role.RECORDING, path__in=list(paths)
        ).values_list("path", flat=True)
    )
    unknown = [p for p in paths if p not in known]
    if unknown:
        raise SpotCheckRefused(f"{unknown[0]!r} is not a recording of this hand-in")
    with transaction.atomic():
        # The submission row orders two requests: the second sees the first one's job.
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        pending = SpotCheck.objects.filter(
            submission=locked, status=SpotCheck.Status.QUEUED
        ).exists()
        if pending:
            raise SpotCheckRefused("a spot check of this hand-in is already queued or running")
        spot = SpotCheck.objects.create(
            submission=locked,
            requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            endpoint=found.name,
            paths=list(paths),
            sample=0 if paths else sample,
            seed=submission.pk if seed is None else seed,
            repeats=repeats,
            scheduled=scheduled,
        )
        spot.job = job_create(
            submission=locked, kind=Job.Kind.SPOT_CHECK, params={"spot_check": spot.pk}
        )
        spot.save(update_fields=["job"])
    return spot


def spot_check_ask(spot: SpotCheck) -> SpotAsk:
    """What a queued SpotCheck row asks for."""
    return SpotAsk(
        endpoint=spot.endpoint,
        paths=list(spot.paths or []),
        sample=spot.sample,
        seed=spot.seed,
        repeats=spot.repeats,
    )
