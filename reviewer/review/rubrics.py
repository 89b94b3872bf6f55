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


def install_builtin_rubrics(template_model: Any, row_model: Any) -> None:
    """Create or refresh the built-in templates (takes models so migrations can call it)."""
    for slug, spec in BUILTIN.items():
        template, _ = template_model.objects.update_or_create(
            slug=slug, defaults={"title": spec["title"], "builtin": True}
        )
        for order, (title, weight, how, check_ids) in enumerate(spec["rows"]):
            row_model.objects.update_or_create(
                template=template,
                order=order,
                defaults={
                    "title": title,
                    "weight": weight,
                    "how_to_check": how,
                    "check_ids": check_ids,
                },
            )


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
