"""The check catalog: every check id, its title, what it establishes and where it is computed.

Ids are stable (the report, the rubrics and the pages use them): code names a check through
these constants, never a string literal. Each id is computed by exactly one function named
after it (`replay.offline_pass` → `replay_offline_pass`) in the module listed here; a
module that also gives the id an outcome for another shape or path (the run-twice run log,
the sandboxed re-drive, the service probe's ledger) is listed in `also`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSpec:
    """One catalog row."""

    id: str
    title: str
    establishes: str
    module: str
    also: tuple[str, ...] = ()  # other modules that give this id an outcome

    @property
    def function(self) -> str:
        """The name of the function that computes it."""
        return self.id.replace(".", "_")


DEPENDENCIES_INSTALLED = "env.dependencies_installed"
OFFLINE_PASS = "replay.offline_pass"  # noqa: S105 - a check id, not a password
BYTE_IDENTICAL = "replay.byte_identical"
MISSING_FIXTURE = "replay.missing_fixture_fails_loudly"
NO_NETWORK = "replay.no_network_attempts"
RECORDINGS_USED = "replay.recordings_used"
KEYS_MATCH = "cassettes.keys_match"
NO_SECRETS = "cassettes.no_secrets"
MODEL_METADATA = "cassettes.model_metadata"
FRESH = "cassettes.fresh"
PRUNED = "cassettes.pruned"
PER_TURN = "cassettes.per_turn"
PROVENANCE = "cassettes.provenance"
LIVE_SPOT_CHECK = "cassettes.live_spot_check"
STUB_HOPS_PRESENT = "trace.stub_hops_present"
TOOL_CALLS_REACH_STUB = "trace.tool_calls_reach_stub"
NO_INVENTED_IDS = "trace.no_invented_ids"
IDEMPOTENCY_KEYS_LOGGED = "trace.idempotency_keys_logged"
LIVE_MATCH = "trace.live_match"
IDEMPOTENCY_ENFORCED = "trace.idempotency_enforced"
LEDGER_CONSISTENT = "ledger.consistent"
SERVICE_STARTS = "service.starts"
SCHEMA_VALID = "service.schema_valid"
DEGRADES_GRACEFULLY = "service.degrades_gracefully"
CACHES = "service.caches"
ENTRYPOINTS = "docs.entrypoints"
REPLAY_NOTES = "docs.replay_notes"
RECORDINGS_UNIQUE = "cohort.recordings_unique"
CODE_SIMILARITY = "cohort.code_similarity"

_ENV = "submissions.checks.environment"
_REPLAY = "submissions.checks.replay"
_SERVICE = "submissions.checks.service"
_LIVE = "submissions.checks.trace_live.live"
_IDEMPOTENCY = "submissions.checks.trace_live.idempotency"
_CASSETTES = "cassettes_app.checks.cassettes"
_TRACE = "cassettes_app.checks.trace"
_ENTRYPOINTS = "cassettes_app.checks.docs.entrypoints"
_REPLAY_NOTES = "cassettes_app.checks.docs.replay_notes"
_COHORT = "submissions.checks.cohort"  # needs the other hand-ins of the assignment
_SIMILARITY = "submissions.checks.similarity"  # the cohort's stored fingerprints
_LEDGER = "cassettes_app.checks.ledger"
_PROVENANCE = "cassettes_app.checks.provenance"
_SPOT = "submissions.checks.spot_check"  # host-side: the team endpoint and its spend ledger
_ANALYZER = "cassettes_app.analysis.analyzer"  # skips model metadata for run-twice
_RUNLOG = "cassettes_app.checks.runlog"  # run-twice: the model named in the run log
_TRACE_ROWS = "submissions.checks.trace_live.rows"  # compared rows, live or re-driven
_REDRIVE = "submissions.runs.trace"  # the stub re-driven in the sandbox

CATALOG: dict[str, CheckSpec] = {
    spec.id: spec
    for spec in (
        CheckSpec(
            DEPENDENCIES_INSTALLED,
            "Dependencies installed",
            "the declared dependencies were fetched as wheels from the package index and "
            "installed in the sandbox with the network off",
            _ENV,
        ),
        CheckSpec(
            OFFLINE_PASS,
            "Replay passes offline",
            "the replay command exits 0 in the sandbox, network off, no credentials in env",
            _REPLAY,
        ),
        CheckSpec(
            BYTE_IDENTICAL,
            "Byte-identical replays",
            "two runs (different hash seed, time zone, fresh copies) give identical outputs",
            _REPLAY,
        ),
        CheckSpec(
            MISSING_FIXTURE,
            "Missing recording fails loudly",
            "with one used recording removed, the run fails, names it, and makes no network try",
            _REPLAY,
        ),
        CheckSpec(
            NO_NETWORK,
            "No network attempts",
            "no connect/resolve attempt was seen during replay",
            _REPLAY,
        ),
        CheckSpec(
            RECORDINGS_USED,
            "Recordings used",
            "which recordings the suite actually read; unread ones are orphans",
            _REPLAY,
        ),
        CheckSpec(
            KEYS_MATCH,
            "Keys match requests",
            "each stored key equals the key recomputed from its canonical request",
            _CASSETTES,
        ),
        CheckSpec(
            NO_SECRETS,
            "No secrets",
            "no credential in recordings, traces, logs or repo files (shown redacted)",
            _CASSETTES,
        ),
        CheckSpec(
            MODEL_METADATA,
            "Model metadata",
            "every recording names its model and recording time",
            _CASSETTES,
            (_RUNLOG, _ANALYZER),
        ),
        CheckSpec(
            FRESH,
            "Fresh recordings",
            "recordings are younger than the threshold, not dated after upload, expected model",
            _CASSETTES,
        ),
        CheckSpec(
            PRUNED,
            "Pruned recordings",
            "no duplicate recordings per key; total size under the limit",
            _CASSETTES,
        ),
        CheckSpec(
            PER_TURN,
            "One turn per recording",
            "multi-turn conversations are stored one turn per recording, not as one blob",
            _CASSETTES,
        ),
        CheckSpec(
            PROVENANCE,
            "Recordings' history",
            "with the hand-in's git history: no recording was changed after the commit that "
            "recorded it while its recording time stayed",
            _PROVENANCE,
        ),
        CheckSpec(
            LIVE_SPOT_CHECK,
            "Live spot check",
            "sampled recordings re-asked against the team's allowed model endpoint reproduce "
            "on the graded fields (tool calls, finish reason, JSON structure); a warning "
            "with every try when none reproduces, never a fail",
            _SPOT,
        ),
        CheckSpec(
            STUB_HOPS_PRESENT,
            "Stub hops present",
            "the trace holds stub hops, not only model chat",
            _TRACE,
        ),
        CheckSpec(
            TOOL_CALLS_REACH_STUB,
            "Tool calls reach the stub",
            "every model tool call is followed by a stub request with the same arguments",
            _TRACE,
        ),
        CheckSpec(
            NO_INVENTED_IDS,
            "No invented ids",
            "no id in model output or trace rows that the stub never issued",
            _TRACE,
        ),
        CheckSpec(
            IDEMPOTENCY_KEYS_LOGGED,
            "Idempotency keys logged",
            "every stub write in the trace carries its Idempotency-Key",
            _TRACE,
        ),
        CheckSpec(
            LIVE_MATCH,
            "Trace matches the live stub",
            "rows re-fetched from the live stub's /_trace/{id} match the file",
            _LIVE,
            (_REDRIVE, _TRACE_ROWS),
        ),
        CheckSpec(
            IDEMPOTENCY_ENFORCED,
            "Idempotency enforced",
            "probing the stub gives 201, then 200 for the same body, 409 for a different body",
            _IDEMPOTENCY,
            (_REDRIVE,),
        ),
        CheckSpec(
            LEDGER_CONSISTENT,
            "Ledger consistent",
            "ledger entries agree with the recordings and bound retries",
            _LEDGER,
            (_SERVICE,),
        ),
        CheckSpec(
            SERVICE_STARTS,
            "Service starts",
            "the candidate's service, started in the sandbox, answers on its port",
            _SERVICE,
        ),
        CheckSpec(
            SCHEMA_VALID,
            "Schema-valid tickets",
            "every probe response is a schema-valid ticket",
            _SERVICE,
        ),
        CheckSpec(
            DEGRADES_GRACEFULLY,
            "Degrades gracefully",
            "with the model unavailable, tickets stay valid, marked needs_human, evidence quoted",
            _SERVICE,
        ),
        CheckSpec(
            CACHES,
            "Caches repeats",
            "repeated inputs are served from the cache, with no second model attempt",
            _SERVICE,
        ),
        CheckSpec(
            ENTRYPOINTS,
            "Entrypoints exist",
            "the commands the assignment asks for exist",
            _ENTRYPOINTS,
        ),
        CheckSpec(
            REPLAY_NOTES,
            "Replay notes",
            "REPLAY.md names the normalised request fields, and they agree with the keys",
            _REPLAY_NOTES,
        ),
        CheckSpec(
            RECORDINGS_UNIQUE,
            "Recordings not copied",
            "no recorded response id of this hand-in appears in another candidate's hand-in "
            "of the same assignment (a provider issues each id once)",
            _COHORT,
        ),
        CheckSpec(
            CODE_SIMILARITY,
            "Code not copied",
            "no source file of this hand-in shares most of its winnowed fingerprints (names "
            "and literals abstracted, starter code left out) with another candidate's file "
            "of the same assignment; a warning to read, never a failure",
            _SIMILARITY,
        ),
    )
}

REPLAY_CHECKS = (OFFLINE_PASS, BYTE_IDENTICAL, MISSING_FIXTURE, NO_NETWORK, RECORDINGS_USED)
PROBE_CHECKS = (SERVICE_STARTS, SCHEMA_VALID, DEGRADES_GRACEFULLY, CACHES)


def title(check_id: str) -> str:
    """The check's title, or the id itself for an id the catalog does not know."""
    spec = CATALOG.get(check_id)
    return spec.title if spec else check_id
