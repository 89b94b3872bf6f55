"""Built-in rubric templates, from the take-home articles.

Each template is named after its shape and each row cites only checks that apply to that
shape (`cassettes_app/checks/rules.py`), so a row's evidence never comes from another
task's rules; tests/reviewer/test_rubrics.py holds both to each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cassettes_app.checks.catalog import (
    BYTE_IDENTICAL,
    CACHES,
    DEGRADES_GRACEFULLY,
    ENTRYPOINTS,
    FRESH,
    IDEMPOTENCY_ENFORCED,
    IDEMPOTENCY_KEYS_LOGGED,
    KEYS_MATCH,
    LEDGER_CONSISTENT,
    LIVE_MATCH,
    MISSING_FIXTURE,
    MODEL_METADATA,
    NO_INVENTED_IDS,
    NO_NETWORK,
    NO_SECRETS,
    OFFLINE_PASS,
    PER_TURN,
    PRUNED,
    REPLAY_NOTES,
    SCHEMA_VALID,
    SERVICE_STARTS,
    STUB_HOPS_PRESENT,
    TOOL_CALLS_REACH_STUB,
)
from reviewer.models import RubricRow, RubricTemplate, Score
from submissions.models import Assignment

# (title, weight, how to check, check ids that feed it evidence)
BUILTIN: dict[str, dict[str, Any]] = {
    "cassette": {
        "title": "Cassette take-home",
        "rows": [
            (
                "Replays offline",
                25,
                "Run the replay command with the network off and no credentials; it exits 0.",
                [OFFLINE_PASS, NO_NETWORK],
            ),
            (
                "Canonical keys",
                20,
                "Recompute each cassette key from its canonical request; REPLAY.md names the "
                "normalised fields and they agree with the keys.",
                [KEYS_MATCH, REPLAY_NOTES],
            ),
            (
                "Missing recording fails loudly",
                20,
                "Remove one used cassette: the run fails, names it, and never calls the live API.",
                [MISSING_FIXTURE],
            ),
            (
                "Recording hygiene",
                20,
                "No secrets; model and time recorded; fresh; one turn per cassette; pruned.",
                [
                    NO_SECRETS,
                    MODEL_METADATA,
                    FRESH,
                    PER_TURN,
                    PRUNED,
                ],
            ),
            (
                "Entry points and notes",
                15,
                "make record, make test and make demo exist and do what they say.",
                [ENTRYPOINTS],
            ),
        ],
    },
    "run-twice": {
        "title": "Run-twice take-home",
        "rows": [
            (
                "Byte-identical replays",
                30,
                "Two replay runs with different hash seeds, time zones and paths give the same "
                "bytes.",
                [BYTE_IDENTICAL],
            ),
            (
                "No network",
                20,
                "Replay makes no connection or name lookup.",
                [NO_NETWORK, OFFLINE_PASS],
            ),
            (
                "Missing fixture fails loudly",
                20,
                "Remove one used fixture: non-zero exit naming it, no network fallback.",
                [MISSING_FIXTURE],
            ),
            (
                "Record is capped and re-runnable",
                20,
                "./run.sh record exists, bounds its calls and can be run again.",
                [ENTRYPOINTS],
            ),
            (
                "Volatile data outside the graded file",
                10,
                "Timings and model ids go to a separate log (out/run.log), not to "
                "out/answers.json.",
                [BYTE_IDENTICAL, MODEL_METADATA],
            ),
        ],
    },
    "trace": {
        "title": "Trace take-home",
        "rows": [
            (
                "Tool calls reach the stub",
                30,
                "Every create_order call is followed by a stub request with the same arguments.",
                [STUB_HOPS_PRESENT, TOOL_CALLS_REACH_STUB],
            ),
            (
                "No invented ids",
                20,
                "Every order id the model mentions was issued by the stub.",
                [NO_INVENTED_IDS],
            ),
            (
                "Idempotency",
                25,
                "Writes carry an Idempotency-Key; the stub answers 201, 200, 409 as specified.",
                [IDEMPOTENCY_KEYS_LOGGED, IDEMPOTENCY_ENFORCED],
            ),
            (
                "Trace matches the live stub",
                25,
                "Rows re-fetched from /_trace/{id} match the file.",
                [LIVE_MATCH],
            ),
        ],
    },
    "ticket-service": {
        "title": "Ticket-service take-home",
        "rows": [
            (
                "Correctness",
                35,
                "Every response is a schema-valid ticket for its log line.",
                [SERVICE_STARTS, SCHEMA_VALID],
            ),
            (
                "Reproducibility",
                25,
                "Tests replay offline; repeated inputs come from the cache.",
                [OFFLINE_PASS, CACHES],
            ),
            (
                "Failure handling",
                25,
                "With the model down, tickets are still valid, marked needs_human, evidence "
                "quoted, unknowns left unknown; retries bounded.",
                [DEGRADES_GRACEFULLY, LEDGER_CONSISTENT],
            ),
            (
                "Communication",
                15,
                "The runbook's start, test and replay commands exist and work.",
                [ENTRYPOINTS],
            ),
        ],
    },
}

# What each level means on each built-in row, 0 to 3 (`RubricRow.anchors`), from the row's
# "how to check" and the rule for a 3: the reviewer reproduced it without asking anything.
ANCHORS: dict[str, dict[str, tuple[str, str, str, str]]] = {
    "cassette": {
        "Replays offline": (
            "Replay needs the network or credentials, or does not run at all.",
            "Replay runs offline only after fixes or by hand; some tests fail.",
            "Replays offline and exits 0, with a gap (a test skipped, an env var to guess).",
            "Reproduced: network off, no credentials, the replay command exits 0.",
        ),
        "Canonical keys": (
            "No canonical key: files are named by hand or by something volatile.",
            "Keys are derived, but recomputing them disagrees with several files.",
            "Keys recompute; REPLAY.md is missing or vague about the normalised fields.",
            "Reproduced: every key recomputes and REPLAY.md names the fields it drops.",
        ),
        "Missing recording fails loudly": (
            "A missing cassette falls through to the live API or passes silently.",
            "It fails, but later and without naming the missing cassette.",
            "It fails at once, but the message does not say which cassette is missing.",
            "Reproduced: one cassette removed, the run fails naming it, no live call.",
        ),
        "Recording hygiene": (
            "A secret is in the recordings, or they are unreadable.",
            "No secret, but model and time are missing and stale or unused files remain.",
            "Clean apart from one gap (an unused cassette, a missing recorded_at).",
            "Reproduced: no secrets; model and time recorded; fresh; one turn each; pruned.",
        ),
        "Entry points and notes": (
            "No make targets or notes: the reviewer has to work out how to run it.",
            "Targets exist but fail or do something other than they say.",
            "make record, test and demo work; the notes leave a question open.",
            "Reproduced: make record, make test and make demo do what they say.",
        ),
    },
    "run-twice": {
        "Byte-identical replays": (
            "Two replay runs differ, or replay does not run.",
            "Identical only with the same seed, time zone and path.",
            "Identical across runs, with one volatile field left (an order, a float).",
            "Reproduced: different hash seeds, time zones and paths, the same bytes.",
        ),
        "No network": (
            "Replay calls the network.",
            "Replay tries a connection or lookup and swallows the error.",
            "No connection, but a client is built that would connect if reached.",
            "Reproduced: replay makes no connection and no name lookup.",
        ),
        "Missing fixture fails loudly": (
            "A missing fixture falls back to the network or passes silently.",
            "It fails, but with exit 0 or a message that does not name the fixture.",
            "Non-zero exit, but the fixture is not named.",
            "Reproduced: one fixture removed, a non-zero exit naming it, no network.",
        ),
        "Record is capped and re-runnable": (
            "No record mode.",
            "./run.sh record exists but is unbounded or cannot be run twice.",
            "Capped and re-runnable, with a manual step left.",
            "Reproduced: ./run.sh record bounds its calls and runs again cleanly.",
        ),
        "Volatile data outside the graded file": (
            "Timings and model ids are written into out/answers.json.",
            "Some volatile data moved out; some still in the graded file.",
            "The graded file is clean; the separate log is missing a field.",
            "Reproduced: timings and model ids only in out/run.log, never in answers.",
        ),
    },
    "trace": {
        "Tool calls reach the stub": (
            "Tool calls never reach the stub.",
            "Some create_order calls have no matching stub request.",
            "Every call reaches the stub; an argument differs on one hop.",
            "Reproduced: every create_order call, then a stub request with its arguments.",
        ),
        "No invented ids": (
            "The model states order ids the stub never issued.",
            "One invented id, or ids reused across orders.",
            "Every id comes from the stub; one is paraphrased or truncated.",
            "Reproduced: every order id mentioned was issued by the stub.",
        ),
        "Idempotency": (
            "Writes carry no Idempotency-Key.",
            "Keys are sent but the stub's 200 or 409 is not handled.",
            "Keys sent, 201 and 200 handled; the 409 case is untested.",
            "Reproduced: every write keyed; 201, 200 and 409 answered as specified.",
        ),
        "Trace matches the live stub": (
            "The trace file cannot be matched to the stub at all.",
            "Several rows differ from /_trace/{id}.",
            "Rows match apart from one field or one row.",
            "Reproduced: every row re-fetched from /_trace/{id} matches the file.",
        ),
    },
    "ticket-service": {
        "Correctness": (
            "The service does not start, or answers are not tickets.",
            "Tickets come back but several fail the schema.",
            "Schema-valid tickets; one field is wrong for its log line.",
            "Reproduced: every response is a schema-valid ticket for its log line.",
        ),
        "Reproducibility": (
            "Tests need the live model.",
            "Tests replay offline only in part; the cache is not used.",
            "Tests replay offline; repeated inputs sometimes miss the cache.",
            "Reproduced: tests replay offline and repeated inputs come from the cache.",
        ),
        "Failure handling": (
            "With the model down the service errors or invents data.",
            "It degrades, but tickets are invalid or not marked needs_human.",
            "Valid tickets marked needs_human; retries unbounded or evidence missing.",
            "Reproduced: model down, valid tickets marked needs_human, retries bounded.",
        ),
        "Communication": (
            "No runbook.",
            "A runbook whose commands fail.",
            "Start, test and replay commands work; one needs a guess.",
            "Reproduced: the runbook's start, test and replay commands work as written.",
        ),
    },
}


def install_builtin_rubrics(template_model: Any, row_model: Any) -> None:
    """Create or refresh the built-in templates (takes models so migrations can call it)."""
    # A migration older than the anchors field passes a model without it.
    has_anchors = any(f.name == "anchors" for f in row_model._meta.get_fields())
    for slug, spec in BUILTIN.items():
        template, _ = template_model.objects.update_or_create(
            slug=slug, defaults={"title": spec["title"], "builtin": True}
        )
        for order, (title, weight, how, check_ids) in enumerate(spec["rows"]):
            defaults = {
                "title": title,
                "weight": weight,
                "how_to_check": how,
                "check_ids": check_ids,
            }
            if has_anchors:
                defaults["anchors"] = list(ANCHORS[slug][title])
            row_model.objects.update_or_create(template=template, order=order, defaults=defaults)


def rubric_for(assignment: Assignment) -> RubricTemplate | None:
    """The assignment's rubric template, if it names one that exists."""
    return RubricTemplate.objects.filter(slug=assignment.rubric).first()


def weighted_total(rows: list[tuple[int, int | None]]) -> float | None:
    """Weighted total out of 100 from (weight, value 0–3) pairs; None until a row is scored."""
    scored = [(w, v) for w, v in rows if v is not None]
    if not scored:
        return None
    weight_sum = sum(w for w, _ in rows) or 1
    return round(sum(w * v / 3 for w, v in scored) * 100 / weight_sum, 1)


def review_total(rows: Iterable[RubricRow], scores: Iterable[Score]) -> float | None:
    """One review's weighted total over every row of its rubric."""
    values = {s.row_id: s.value for s in scores}
    return weighted_total([(row.weight, values.get(row.pk)) for row in rows])
