"""LangSmith runs: exports and captured batch-ingest payloads (`{"post": [...], "patch":
[...]}`), a list of runs, or one run with its `child_runs`.

Runs are merged by id (a patch updates its post; a patch without id matches by trace id
and dotted order), the tree is flattened, and each `run_type: "llm"` run becomes one model
call rebuilt from its `inputs` (messages or a prompt) and `outputs` (an OpenAI response,
LangChain generations, a message).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.formats.base import close_recording, run_parser
from cassettes_app.formats.conversation import (
    as_chat_messages,
    as_reply,
    chat_call,
    iso_time,
    rebuilt_interaction,
    token_usage,
)
from cassettes_app.formats.sniff import NO, SURE, head_text, json_doc_keys
from cassettes_app.limits import DEFAULT_LIMITS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedRecording, ParseResult

NAME = "langsmith"
NOTE = "rebuilt from a LangSmith run"


def sniff(path: str, head: bytes) -> float:
    """Runs: `run_type` with `inputs`, or batch payloads under post/patch."""
    kind, keys = json_doc_keys(path, head)
    text = head_text(head)[:65536]
    if kind == "object" and keys & {"post", "patch"} and '"run_type"' in text:
        return SURE
    if kind in ("object", "array") and {"run_type", "inputs"} <= keys:
        return SURE
    if kind in ("object", "array") and '"run_type"' in text and '"dotted_order"' in text:
        return SURE
    return NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per llm run, in start order."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _walk(run: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield run
    for child in run.get("child_runs") or []:
        if isinstance(child, Mapping):
            yield from _walk(child)


def _runs(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, Mapping) and ("post" in doc or "patch" in doc):
        merged: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for run in doc.get("post") or []:
            if isinstance(run, Mapping):
                key = str(run.get("id") or run.get("dotted_order") or len(order))
                merged.setdefault(key, {}).update(run)
                order.append(key) if key not in order else None
        for patch in doc.get("patch") or []:
            if not isinstance(patch, Mapping):
                continue
            key = str(patch.get("id") or "")
            if key not in merged:
                key = next(
                    (k for k, r in merged.items() if _same_run(r, patch)), key or str(len(order))
                )
            merged.setdefault(key, {}).update(patch)
            order.append(key) if key not in order else None
        roots: list[Mapping[str, Any]] = [merged[k] for k in order]
    elif isinstance(doc, list):
        roots = [r for r in doc if isinstance(r, Mapping)]
    elif isinstance(doc, Mapping):
        roots = [single if isinstance(single := doc.get("run"), Mapping) else doc]
        roots = [*roots, *(r for r in doc.get("runs") or [] if isinstance(r, Mapping))]
    else:
        roots = []
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for root in roots:
        for run in _walk(root):
            ident = str(run.get("id") or id(run))
            if ident not in seen:
                seen.add(ident)
                out.append(dict(run))
    return out


def _same_run(run: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """A patch without an id updates the post with its dotted order (or trace id)."""
    for key in ("dotted_order", "trace_id"):
        if patch.get(key):
            return run.get(key) == patch[key]
    return False


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _model(run: Mapping[str, Any]) -> str | None:
    outputs, inputs, extra = _map(run, "outputs"), _map(run, "inputs"), _map(run, "extra")
    metadata, params = _map(extra, "metadata"), _map(extra, "invocation_params")
    for value in (
        outputs.get("model"),
        inputs.get("model"),
        metadata.get("ls_model_name"),
        params.get("model"),
        params.get("model_name"),
    ):
        if isinstance(value, str) and value:
            return value
    return None


def _usage(outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    usage = _map(outputs, "usage") or _map(_map(outputs, "llm_output"), "token_usage")
    if usage:
        return dict(usage)
    meta = _map(outputs, "usage_metadata")
    if not meta:
        return None
    return token_usage(
        meta.get("input_tokens"), meta.get("output_tokens"), meta.get("total_tokens")
    )


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    runs = _runs(safeload.load_json(data, limits))
    recording = ParsedRecording(path=path, format=NAME, meta={"runs": len(runs)})
    llm = [r for r in runs if r.get("run_type") == "llm"]
    llm.sort(key=lambda r: iso_time(r.get("start_time")) or "")
    for run in llm:
        inputs = run.get("inputs")
        outputs = safeload.object_at(run, "outputs")
        model = _model(run)
        request, response = chat_call(
            as_chat_messages(inputs),
            as_reply(outputs) if outputs else None,
            model=model,
            usage=_usage(outputs),
        )
        if run.get("error"):
            result.findings.append(
                ParsedFinding(
                    "invalid_field",
                    "info",
                    path,
                    None,
                    f"run {run.get('name') or run.get('id')}: failed: {str(run['error'])[:200]}",
                )
            )
        recording.interactions.append(
            rebuilt_interaction(
                len(recording.interactions),
                request,
                response,
                note=NOTE,
                recorded_at=iso_time(run.get("start_time")),
                extra={"run": str(run.get("name") or "")[:200], "run_id": run.get("id")},
            )
        )
    if not runs:
        result.findings.append(ParsedFinding("empty_file", "warn", path, None, "no runs"))
    elif not llm:
        result.findings.append(
            ParsedFinding("empty_file", "info", path, None, f"{len(runs)} runs, none an llm run")
        )
    close_recording(result, recording)
