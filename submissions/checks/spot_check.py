"""cassettes.live_spot_check: one recorded chat exchange re-asked against the team's model.

Run only when asked (`manage.py spot_check`), on the host, with no candidate code: one
interaction of the hand-in's recordings (chosen by path, else sampled reproducibly from those
the endpoint's API family can re-ask) is sent as recorded to the endpoint, and the live answer
is compared with the recorded one on the graded fields (`cassettes_app.checks.graded`): the
tool calls, the finish reason, the structure of a JSON answer. A model is not deterministic,
so the recording reproduces when any of TRIES answers matches it; it fails only when none
does, naming the field. Text drift is evidence, a `warn` at most.

Spending: every call takes a ledger row first (`spot_spend`: month caps under a row lock),
and the endpoint's per-check caps bound the tries. A refused call ends the check in `error`
naming the cap. The key is read from the environment at the call and scrubbed from anything
stored (an error body may quote it).
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from cassettes_app.checks import CheckOutcome, counted, skip
from cassettes_app.checks.catalog import LIVE_SPOT_CHECK
from cassettes_app.checks.graded import Departure, Graded, departures, graded
from cassettes_app.jsonvalues import maybe_json
from cassettes_app.text import clipped
from submissions.blobs import blob_read
from submissions.checks.spot_spend import CapReached, spend_reserve, spend_settle
from submissions.checks.store import checks_store
from submissions.models import Interaction, Job, Recording, Submission
from submissions.net.endpoints import Endpoint, EndpointKeyMissing, endpoint_key
from submissions.net.outbound import OutboundError, OutboundRefused
from submissions.net.reask import reask
from submissions.redact import redact_text

logger = logging.getLogger(__name__)

TRIES = 3  # answers asked before a recording is called not reproducible
MAX_CANDIDATES = 200  # interactions read to find the re-askable ones
_SHOWN = 300  # characters of a value shown in evidence


@dataclass(slots=True)
class _Sample:
    path: str
    index: int
    request: dict[str, Any]
    recorded: Graded


@dataclass(slots=True)
class _Tries:
    made: int = 0
    tokens: int = 0
    reproduced: bool = False
    drift: list[Departure] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first_field: str = ""
    stopped: str = ""  # why no further try was made (a cap, the endpoint's error)


def _endpoint(name: str | None) -> Endpoint | str:
    endpoints: tuple[Endpoint, ...] = settings.SPOT_CHECK_ENDPOINTS
    if not endpoints:
        return "no team model endpoint is configured (SPOT_CHECK_ENDPOINTS is empty)"
    if name is None:
        return endpoints[0]
    found = next((e for e in endpoints if e.name == name), None)
    known = ", ".join(e.name for e in endpoints)
    return found or f"no endpoint named {name!r} is configured (configured: {known})"


def _samples(submission: Submission, endpoint: Endpoint, path: str | None) -> list[_Sample]:
    rows = Interaction.objects.filter(
        recording__submission=submission, recording__role=Recording.Role.RECORDING
    ).select_related("recording", "request_blob", "response_blob")
    if path is not None:
        rows = rows.filter(recording__path=path)
    out = []
    for row in rows.order_by("recording__path", "index")[:MAX_CANDIDATES]:
        if row.request_blob is None or row.response_blob is None:
            continue
        request = maybe_json(blob_read(row.request_blob))
        if not isinstance(request, dict):
            continue
        recorded = graded(request, blob_read(row.response_blob), row.url or None)
        if recorded.provider == endpoint.provider and not recorded.problems:
            out.append(_Sample(row.recording.path, row.index, request, recorded))
    return out


def _shown(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return clipped(text, _SHOWN)


def _departure_item(sample: _Sample, number: int, d: Departure, *, graded_field: bool) -> dict:
    kind = "does not reproduce" if graded_field else "drifts (not graded)"
    return {
        "message": f"try {number}: {d.field} {kind}",
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


def _one_try(
    sample: _Sample, endpoint: Endpoint, key: str, submission: Submission, tries: _Tries
) -> None:
    """Make one call (caps first) and record what it showed; sets `stopped` when it cannot."""
    estimate = sample.recorded.usage.get("total_tokens", 0)
    if tries.made + 1 > endpoint.check_calls:
        tries.stopped = (
            f"cap check_calls of endpoint {endpoint.name} reached: "
            f"{endpoint.check_calls} calls per spot check"
        )
        return
    if tries.tokens + estimate > endpoint.check_tokens:
        tries.stopped = (
            f"cap check_tokens of endpoint {endpoint.name} reached: {tries.tokens} of "
            f"{endpoint.check_tokens} tokens spent, the next call estimated at {estimate}"
        )
        return
    try:
        spend = spend_reserve(submission=submission, endpoint=endpoint, estimate=estimate)
    except CapReached as exc:
        tries.stopped = str(exc)
        return
    tries.made += 1
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
    tries.tokens += used if used is not None else estimate
    if answer.status >= 300 or not isinstance(answer.body, dict):
        tries.stopped = (
            f"the endpoint {endpoint.name} answered HTTP {answer.status}: "
            f"{clipped(answer.text.strip(), 200)}"
        )
        return
    live = graded(sample.request, answer.body)
    graded_out, drift = departures(sample.recorded, live)
    for d in graded_out:
        tries.evidence.append(_departure_item(sample, tries.made, d, graded_field=True))
    for d in drift:
        tries.evidence.append(_departure_item(sample, tries.made, d, graded_field=False))
    if not graded_out:
        tries.reproduced, tries.drift = True, drift
    elif not tries.first_field:
        tries.first_field = graded_out[0].field


def _n_tries(count: int) -> str:
    return "1 try" if count == 1 else f"{count} tries"


def _verdict(sample: _Sample, endpoint: Endpoint, tries: _Tries) -> CheckOutcome:
    where = f"{sample.path} (interaction {sample.index})"
    spent = f"{counted(tries.made, 'call')}, {tries.tokens} tokens on {endpoint.name}"
    evidence = [
        {"message": f"re-asked {where} against endpoint {endpoint.name}", "path": sample.path},
        *tries.evidence,
    ]
    if tries.reproduced and tries.drift:
        summary = (
            f"{where} reproduces on the graded fields; its text drifts "
            f"({', '.join(d.field for d in tries.drift)}), which is not graded ({spent})"
        )
        return CheckOutcome(LIVE_SPOT_CHECK, "warn", summary, evidence)
    if tries.reproduced:
        summary = f"{where} reproduces on the graded fields ({spent})"
        return CheckOutcome(LIVE_SPOT_CHECK, "pass", summary, evidence)
    if tries.stopped:
        evidence.append({"message": tries.stopped, "path": sample.path})
        made = _n_tries(tries.made)
        summary = f"spot check of {where} not finished after {made}: {tries.stopped}"
        return CheckOutcome(LIVE_SPOT_CHECK, "error", summary, evidence)
    summary = (
        f"{where} does not reproduce in {_n_tries(tries.made)}: {tries.first_field} "
        f"differs from the recorded answer ({spent})"
    )
    return CheckOutcome(LIVE_SPOT_CHECK, "fail", summary, evidence)


def _judge(
    submission: Submission, endpoint_name: str | None, path: str | None, environ: Any
) -> tuple[CheckOutcome, str]:
    """The outcome, and the key used ("" when none was read) for scrubbing."""
    endpoint = _endpoint(endpoint_name)
    if isinstance(endpoint, str):
        return skip(LIVE_SPOT_CHECK, endpoint), ""
    samples = _samples(submission, endpoint, path)
    if not samples:
        where = f"recording {path}" if path else "the hand-in's recordings"
        reason = f"{where} hold no {endpoint.api} exchange that endpoint {endpoint.name} can re-ask"
        return skip(LIVE_SPOT_CHECK, reason), ""
    # Reproducible sampling: the same hand-in re-asks the same exchange unless told which.
    sample = samples[0] if path else random.Random(submission.pk).choice(samples)
    try:
        key = endpoint_key(endpoint, environ)
    except EndpointKeyMissing as exc:
        return CheckOutcome(LIVE_SPOT_CHECK, "error", str(exc)), ""
    tries = _Tries()
    while tries.made < TRIES and not tries.reproduced and not tries.stopped:
        _one_try(sample, endpoint, key, submission, tries)
    return _verdict(sample, endpoint, tries), key


def _scrubbed(value: Any, key: str) -> Any:
    """`value` with every occurrence of the key replaced (recursively), then redacted."""
    if isinstance(value, str):
        return redact_text(value.replace(key, "[key removed]") if key else value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, key) for v in value]
    return value


def cassettes_live_spot_check(
    *,
    submission: Submission,
    job: Job | None = None,
    endpoint: str | None = None,
    recording: str | None = None,
    environ: Any = None,
) -> CheckOutcome:
    """Re-ask one recorded exchange of the hand-in, store and return the outcome."""
    outcome, key = _judge(submission, endpoint, recording, environ)
    outcome = CheckOutcome(
        outcome.id,
        outcome.status,
        _scrubbed(outcome.summary, key),
        _scrubbed(outcome.evidence, key),
    )
    checks_store(submission, job, [outcome])
    return outcome
