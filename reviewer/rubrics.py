"""Built-in rubric templates, from the take-home articles."""

from __future__ import annotations

from typing import Any

# (title, weight, how to check, check ids that feed it evidence)
BUILTIN: dict[str, dict[str, Any]] = {
    "cassette": {
        "title": "Cassette take-home",
        "rows": [
            (
                "Replays offline",
                25,
                "Run the replay command with the network off and no credentials; it exits 0.",
                ["replay.offline_pass", "replay.no_network_attempts"],
            ),
            (
                "Canonical keys",
                20,
                "Recompute each cassette key from its canonical request; REPLAY.md names the "
                "normalised fields and they agree with the keys.",
                ["cassettes.keys_match", "docs.replay_notes"],
            ),
            (
                "Missing recording fails loudly",
                20,
                "Remove one used cassette: the run fails, names it, and never calls the live API.",
                ["replay.missing_fixture_fails_loudly"],
            ),
            (
                "Recording hygiene",
                20,
                "No secrets; model and time recorded; fresh; one turn per cassette; pruned.",
                [
                    "cassettes.no_secrets",
                    "cassettes.model_metadata",
                    "cassettes.fresh",
                    "cassettes.per_turn",
                    "cassettes.pruned",
                ],
            ),
            (
                "Entry points and notes",
                15,
                "make record, make test and make demo exist and do what they say.",
                ["docs.entrypoints"],
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
                ["replay.byte_identical"],
            ),
            (
                "No network",
                20,
                "Replay makes no connection or name lookup.",
                ["replay.no_network_attempts", "replay.offline_pass"],
            ),
            (
                "Missing fixture fails loudly",
                20,
                "Remove one used fixture: non-zero exit naming it, no network fallback.",
                ["replay.missing_fixture_fails_loudly"],
            ),
            (
                "Record is capped and re-runnable",
                20,
                "./run.sh record exists, bounds its calls and can be run again.",
                ["docs.entrypoints"],
            ),
            (
                "Volatile data outside the graded file",
                10,
                "Timings and model ids go to a separate log, not to out/answers.json.",
                ["replay.byte_identical"],
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
                ["trace.stub_hops_present", "trace.tool_calls_reach_stub"],
            ),
            (
                "No invented ids",
                20,
                "Every order id the model mentions was issued by the stub.",
                ["trace.no_invented_ids"],
            ),
            (
                "Idempotency",
                25,
                "Writes carry an Idempotency-Key; the stub answers 201, 200, 409 as specified.",
                ["trace.idempotency_keys_logged", "trace.idempotency_enforced"],
            ),
            (
                "Trace matches the live stub",
                25,
                "Rows re-fetched from /_trace/{id} match the file.",
                ["trace.live_match"],
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
                ["service.starts", "service.schema_valid"],
            ),
            (
                "Reproducibility",
                25,
                "Tests replay offline; repeated inputs come from the cache.",
                ["replay.offline_pass", "service.caches"],
            ),
            (
                "Failure handling",
                25,
                "With the model down, tickets are still valid, marked needs_human, evidence "
                "quoted, unknowns left unknown; retries bounded.",
                ["service.degrades_gracefully", "ledger.consistent"],
            ),
            (
                "Communication",
                15,
                "The runbook's start, test and replay commands exist and work.",
                ["docs.entrypoints"],
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
