"""Which checks apply to each take-home shape, and what `pass` means there.

From the take-home briefs (DESIGN.md, "Per-shape rules"). A check that does not apply to a
shape is stored as `skip` with the reason, whatever its code computed: a good hand-in of
any shape must get no `fail` from another shape's rules. An assignment file may override a
rule per check (`checks: {cassettes.model_metadata: {applies: false, reason: ...}}`).

Pure data and small functions: the recordings app, the jobs and the pages all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cassettes_app.checks import catalog as c

SHAPES = ("cassette", "run-twice", "trace", "ticket-service")


@dataclass(frozen=True)
class Rule:
    """One check under one shape: whether it applies, what pass means, why not."""

    applies: bool
    means: str
    reason: str = ""


class RuleError(ValueError):
    """A bad `checks:` override; the message names the key (`checks.<id>.<field>`)."""


def _no(reason: str) -> Rule:
    return Rule(False, "", reason)


_NO_TRACE = "this task has no trace of HTTP hops to a stub"
_NO_SERVICE = "this task has no service to probe"
_NO_LEDGER = "this task keeps no ledger of model calls"
_TRACE_CHECKS = (
    c.STUB_HOPS_PRESENT,
    c.TOOL_CALLS_REACH_STUB,
    c.NO_INVENTED_IDS,
    c.IDEMPOTENCY_KEYS_LOGGED,
    c.LIVE_MATCH,
    c.IDEMPOTENCY_ENFORCED,
)
_WITHOUT_TRACE = {cid: Rule(False, "", _NO_TRACE) for cid in _TRACE_CHECKS}
_WITHOUT_SERVICE = {cid: Rule(False, "", _NO_SERVICE) for cid in c.PROBE_CHECKS}

# Meanings shared by every shape that uses the check; a shape's own entry wins.
_COMMON: dict[str, str] = {spec.id: spec.establishes for spec in c.CATALOG.values()}

_SHAPE_RULES: dict[str, dict[str, Rule]] = {
    "cassette": {
        c.MISSING_FIXTURE: Rule(
            True, "with a used cassette removed, replay raises, names it, and calls no endpoint"
        ),
        c.KEYS_MATCH: Rule(
            True, "each key is the sha256 of the canonical request, volatile fields dropped"
        ),
        c.MODEL_METADATA: Rule(True, "every cassette names its model and recorded_at"),
        c.PRUNED: Rule(
            True, "no key has several files; equal responses under different keys are fine"
        ),
        c.PROVENANCE: Rule(
            True, "no cassette changed in a later commit while its recorded_at stayed"
        ),
        c.ENTRYPOINTS: Rule(True, "make record, make test, make demo and a REPLAY.md"),
        c.REPLAY_NOTES: Rule(True, "REPLAY.md names the normalised fields the keys drop"),
        c.LEDGER_CONSISTENT: _no(_NO_LEDGER),
        **_WITHOUT_SERVICE,
    },
    "run-twice": {
        c.BYTE_IDENTICAL: Rule(
            True, "two ./run.sh replay runs write a byte-identical out/answers.json"
        ),
        c.MISSING_FIXTURE: Rule(True, "with a used fixture removed, the run fails loudly"),
        c.KEYS_MATCH: Rule(
            True, "a fixture's key is the hash of model + prompt + params, when it stores them"
        ),
        c.MODEL_METADATA: Rule(
            True,
            "the run log (out/run.log) names the model; fixtures hold only the response text",
        ),
        c.PER_TURN: _no("run-twice fixtures hold one response text each"),
        c.LIVE_SPOT_CHECK: Rule(
            True,
            "a fixture that stores its chat request is re-asked; one holding only the "
            "response text has nothing to re-ask and is skipped",
        ),
        c.PROVENANCE: _no(
            "run-twice fixtures keep no recording time, so a re-record and a hand edit of "
            "one look alike in the history"
        ),
        c.ENTRYPOINTS: Rule(True, "./run.sh replay and ./run.sh record (tests welcome)"),
        c.REPLAY_NOTES: _no("the run-twice brief asks for no REPLAY.md"),
        **_WITHOUT_TRACE,
        c.LEDGER_CONSISTENT: _no(_NO_LEDGER),
        **_WITHOUT_SERVICE,
    },
    "trace": {
        c.MODEL_METADATA: Rule(True, "the model hops name their model"),
        c.ENTRYPOINTS: Rule(True, "a stub, a harness and replay.jsonl"),
        c.LEDGER_CONSISTENT: _no(_NO_LEDGER),
        **_WITHOUT_SERVICE,
    },
    "ticket-service": {
        c.MISSING_FIXTURE: _no(
            "a ticket service must degrade, not fail, without its model: judged by "
            "service.degrades_gracefully (the service probed with the model unavailable)"
        ),
        c.MODEL_METADATA: Rule(True, "the ledger or the fixtures name the model"),
        c.ENTRYPOINTS: Rule(True, "a runbook: one command to start, one to test, one to replay"),
        c.LEDGER_CONSISTENT: Rule(
            True, "model calls, cache hits and fallbacks accounted for; retries bounded"
        ),
        **_WITHOUT_TRACE,
    },
}

_OVERRIDE_KEYS = {"applies", "reason", "means"}


def shape_rules(shape: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Rule]:
    """Every catalog check's rule for `shape`, with the assignment's overrides applied."""
    own = _SHAPE_RULES.get(shape, {})
    rules = {cid: own.get(cid, Rule(True, _COMMON[cid])) for cid in c.CATALOG}
    for cid, override in (overrides or {}).items():
        rule = rules[cid]
        applies = override.get("applies", rule.applies)
        reason = override.get("reason") or (
            rule.reason if not applies and not rule.applies else "the assignment turns it off"
        )
        means = override.get("means") or rule.means or _COMMON[cid]
        rules[cid] = replace(rule, applies=applies, means=means, reason="" if applies else reason)
    return rules


def validate_overrides(value: Any) -> dict[str, dict[str, Any]]:
    """A `checks:` mapping as stored, or RuleError naming the offending key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RuleError("checks: must be a mapping of check ids to settings")
    out: dict[str, dict[str, Any]] = {}
    for cid, setting in value.items():
        if cid not in c.CATALOG:
            raise RuleError(f"checks.{cid}: unknown check id (see the check catalog)")
        if not isinstance(setting, dict) or not setting:
            raise RuleError(f"checks.{cid}: must be a mapping such as {{applies: false}}")
        unknown = sorted(str(k) for k in setting if k not in _OVERRIDE_KEYS)
        if unknown:
            allowed = ", ".join(sorted(_OVERRIDE_KEYS))
            raise RuleError(f"checks.{cid}.{unknown[0]}: unknown setting (allowed: {allowed})")
        if "applies" in setting and not isinstance(setting["applies"], bool):
            raise RuleError(f"checks.{cid}.applies: must be true or false")
        for key in ("reason", "means"):
            if key in setting and (not isinstance(setting[key], str) or not setting[key].strip()):
                raise RuleError(f"checks.{cid}.{key}: must be a non-empty string")
        out[cid] = {k: v.strip() if isinstance(v, str) else v for k, v in setting.items()}
    return out


def not_applicable(rule: Rule, shape: str) -> str:
    """The skip summary of a check that does not apply."""
    return f"does not apply to the {shape} task: {rule.reason}"
