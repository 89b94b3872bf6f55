"""OpenTelemetry span exports of model calls: gen_ai.* (GenAI semantic conventions, old
and new) and OpenInference's llm.* attributes.

Shapes read: OTLP JSON (`{"resourceSpans": [...]}`, one document or one per line, as the
collector's file exporter writes), the SDK's span JSON (`context.trace_id`, attributes as
a dict; one per line, a JSON array, or the console exporter's concatenated objects), and
lists under `spans`/`data`. Each span that is a model call becomes one interaction whose
request and response are rebuilt in OpenAI chat shape from wherever the span keeps its
messages: `gen_ai.input.messages`/`gen_ai.output.messages` (JSON), the indexed
`gen_ai.prompt.N.*`/`gen_ai.completion.N.*`, OpenInference's
`llm.input_messages.N.message.*`, `gen_ai.*.message`/`gen_ai.choice` span events, else the
raw provider payloads in `input.value`/`output.value`. Other spans (tools, agents, HTTP)
are counted, not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from cassettes_app import safeload
from cassettes_app.formats.base import close_recording, run_parser, tally_finding
from cassettes_app.formats.conversation import iso_time, rebuilt_interaction, tool_call
from cassettes_app.formats.sniff import LIKELY, NO, SURE, head_text, json_doc_keys
from cassettes_app.limits import DEFAULT_LIMITS, PARSE_ERRORS, ParseLimits
from cassettes_app.parsed import ParsedFinding, ParsedInteraction, ParsedRecording, ParseResult
from cassettes_app.providers import detect_provider

NAME = "otel_spans"

SYNTHETIC = "rebuilt from span attributes"

_MARKS = re.compile(
    r'"(?:resourceSpans|scopeSpans|gen_ai\.[a-z_.]+|llm\.(?:model_name|input_messages|'
    r"token_count)[a-z_.0-9]*|openinference\.span\.kind)\"",
)
_SPAN_KEYS = re.compile(r'"(?:trace_?[iI]d|span_?[iI]d|traceId|spanId)"')

# gen_ai.operation.name values that are not one model call.
_NOT_CALLS = frozenset(
    {"embeddings", "execute_tool", "invoke_agent", "create_agent", "invoke_workflow"}
)


def sniff(path: str, head: bytes) -> float:
    """JSON with span ids and gen_ai.*/llm.* attributes or OTLP's resourceSpans."""
    text = head_text(head)
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return NO
    if '"resourceSpans"' in text[:4096] or '"instrumentationLibrarySpans"' in text:
        return SURE
    if '"batches"' in text[:64] and '"scopeSpans"' in text:
        return SURE  # a Tempo export
    kind, keys = json_doc_keys(path, head)
    if kind == "object" and keys & {"openinference.span.kind", "gen_ai.request.model"}:
        return SURE  # one span's attributes, flat
    if _SPAN_KEYS.search(text[:65536]) and _MARKS.search(text):
        return LIKELY  # span ids and gen_ai keys: also in other exports (Langfuse's)
    return NO


def parse(path: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParseResult:
    """One recording; one interaction per model-call span."""
    return run_parser(NAME, path, data, limits, lambda result: _fill(result, path, data, limits))


def _fill(result: ParseResult, path: str, data: bytes, limits: ParseLimits) -> None:
    recording = ParsedRecording(path=path, format=NAME)
    spans = 0
    kinds: dict[str, int] = {}
    for span in _spans(result, path, data, limits):
        spans += 1
        attrs = _attributes(span.get("attributes"))
        if not _is_model_call(attrs):
            kind = str(attrs.get("gen_ai.operation.name") or attrs.get("openinference.span.kind")
                       or span.get("name") or "span")[:40]  # fmt: skip
            kinds[kind] = kinds.get(kind, 0) + 1
            continue
        recording.interactions.append(_interaction(len(recording.interactions), span, attrs))
    recording.meta.update({"spans": spans, "other_spans": sum(kinds.values())})
    bare = [i for i in recording.interactions if _bare(i)]
    if bare:
        result.findings.append(
            ParsedFinding(
                "missing_field",
                "info",
                path,
                None,
                f"{len(bare)} of {len(recording.interactions)} model-call spans keep no messages "
                "(content capture off?): their turns show the model and usage only",
            )
        )
    times = [i.recorded_at for i in recording.interactions]
    if all(times):
        # Exports list spans by batch, not by time: the calls are put back in order.
        recording.interactions.sort(key=lambda i: i.recorded_at or "")
        for number, interaction in enumerate(recording.interactions):
            interaction.index = number
    if kinds:
        result.findings.append(tally_finding(path, "spans that are no model call", kinds))
    if not spans and not result.findings:
        result.findings.append(ParsedFinding("empty_file", "warn", path, None, "no spans"))
    close_recording(result, recording)


def _bare(interaction: ParsedInteraction) -> bool:
    request = interaction.request_body.json
    response = interaction.response_body.json
    return not (isinstance(request, Mapping) and request.get("messages")) and not (
        isinstance(response, Mapping) and response.get("choices")
    )


# --- where the spans are -----------------------------------------------------


def _documents(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> Iterator[tuple[int | None, Any]]:
    """The file's JSON values: one document, JSON Lines, or concatenated objects."""
    try:
        yield None, safeload.load_json(data, limits)
        return
    except PARSE_ERRORS as exc:
        first_error = exc
    text = safeload.decode_utf8(data)
    if "\n{" not in text and "}{" not in text:
        raise first_error
    decoder = json.JSONDecoder()
    load = safeload.json_loader(limits)
    at, line, size = 0, 1, len(text)
    while at < size:
        while at < size and text[at] in " \t\r\n,":
            line += text[at] == "\n"
            at += 1
        if at >= size:
            break
        try:
            _, end = decoder.raw_decode(text, at)
            value = load(text[at:end])  # the safe loader's caps on the piece
        except (ValueError, RecursionError, safeload.LoadError) as exc:
            message = getattr(exc, "message", None) or str(exc).split(":")[0]
            result.findings.append(
                ParsedFinding("bad_line", "warn", path, line, f"not a whole span: {message}")
            )
            nxt = text.find("\n{", at + 1)
            if nxt < 0:
                break
            line += text.count("\n", at, nxt + 1)
            at = nxt + 1
            continue
        yield line, value
        line += text.count("\n", at, end)
        at = end


def _spans(
    result: ParseResult, path: str, data: bytes, limits: ParseLimits
) -> Iterator[Mapping[str, Any]]:
    for _, doc in _documents(result, path, data, limits):
        yield from _spans_of(doc)


def _spans_of(doc: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _spans_of(item)
        return
    if not isinstance(doc, Mapping):
        return
    envelope = doc.get("resourceSpans", doc.get("batches"))  # Tempo exports say batches
    if isinstance(envelope, list):
        for resource in envelope:
            if not isinstance(resource, Mapping):
                continue
            for scope in (
                resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or []
            ):
                if isinstance(scope, Mapping):
                    yield from (s for s in scope.get("spans") or [] if isinstance(s, Mapping))
        return
    for key in ("spans", "data", "batch"):
        if isinstance(doc.get(key), list):
            yield from _spans_of(doc[key])
            return
    if "attributes" in doc or "name" in doc:
        yield dict(doc)
    elif _is_model_call(doc):  # a span's attributes alone, as test fixtures keep them
        yield {"attributes": dict(doc)}


def _attr_value(value: Any) -> Any:
    """An OTLP AnyValue ({"stringValue": ...}) as a plain value."""
    if not isinstance(value, Mapping):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if isinstance(value.get("arrayValue"), Mapping):
        return [_attr_value(v) for v in value["arrayValue"].get("values") or []]
    if isinstance(value.get("kvlistValue"), Mapping):
        return _attributes(value["kvlistValue"].get("values"))
    return value


def _attributes(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    out: dict[str, Any] = {}
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and isinstance(item.get("key"), str):
                out[item["key"]] = _attr_value(item.get("value"))
    return out


def _is_model_call(attrs: Mapping[str, Any]) -> bool:
    operation = attrs.get("gen_ai.operation.name")
    if operation in _NOT_CALLS:
        return False
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str):
        return kind.upper() == "LLM"
    if attrs.get("llm.request.type") == "embedding":
        return False
    return any(
        k in attrs
        for k in (
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.input.messages",
            "gen_ai.prompt.0.content",
            "gen_ai.prompt.0.role",
            "llm.model_name",
        )
    ) or operation in ("chat", "text_completion", "generate_content")


# --- one model call ----------------------------------------------------------


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.N.rest` attributes as a list (by N) of {rest: value}."""
    items: dict[int, dict[str, Any]] = {}
    dotted = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(dotted):
            continue
        number, _, rest = key[len(dotted) :].partition(".")
        if number.isdigit() and rest:
            items.setdefault(int(number), {})[rest] = value
    return [items[n] for n in sorted(items)]


def _loads(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _calls(flat: Mapping[str, Any], prefix: str, name: str, args: str, ids: str) -> list[dict]:
    calls = []
    for call in _indexed(flat, prefix):
        calls.append(
            {
                "id": call.get(ids),
                "type": "function",
                "function": {"name": call.get(name), "arguments": call.get(args)},
            }
        )
    return calls


def _flat_message(flat: Mapping[str, Any], openinference: bool) -> dict[str, Any]:
    """One indexed message ({rest: value}) as an OpenAI chat message."""
    if openinference:
        flat = {k[len("message.") :]: v for k, v in flat.items() if k.startswith("message.")}
        content = flat.get("content")
        if content is None:
            parts = _indexed(flat, "contents")
            texts = [p.get("message_content.text") for p in parts]
            content = "".join(t for t in texts if isinstance(t, str)) or None
        calls = _calls(
            flat, "tool_calls", "tool_call.function.name", "tool_call.function.arguments",
            "tool_call.id",
        )  # fmt: skip
    else:
        content = flat.get("content")
        calls = _calls(flat, "tool_calls", "name", "arguments", "id")
    message: dict[str, Any] = {"role": flat.get("role") or "user", "content": content}
    if calls:
        message["tool_calls"] = calls
    if flat.get("tool_call_id"):
        message["tool_call_id"] = flat["tool_call_id"]
    if flat.get("finish_reason"):
        message["_finish_reason"] = flat["finish_reason"]
    return message


def _part_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A GenAI semconv message ({role, parts: [{type, content | name, arguments}]})."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    out: dict[str, Any] = {"role": message.get("role") or "user"}
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind == "tool_call":
            arguments = part.get("arguments")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
        elif kind == "tool_call_response":
            out["role"] = "tool"
            out["tool_call_id"] = part.get("id")
            response = part.get("response", part.get("result"))
            texts.append(response if isinstance(response, str) else json.dumps(response))
    if "content" in message and not message.get("parts"):
        out["content"] = message["content"]
    else:
        out["content"] = "".join(texts) or None
    if calls:
        out["tool_calls"] = calls
    if message.get("finish_reason"):
        out["_finish_reason"] = message["finish_reason"]
    return out


def _event_messages(span: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    """Messages kept as span events (gen_ai.user.message, gen_ai.choice, ...)."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in span.get("events") or []:
        if not isinstance(event, Mapping):
            continue
        name = str(event.get("name") or "")
        attrs = _attributes(event.get("attributes"))
        body = _loads(attrs.get("gen_ai.event.content") or attrs.get("content")) or attrs
        if name == "gen_ai.choice":
            message = body.get("message") if isinstance(body, Mapping) else None
            message = dict(message) if isinstance(message, Mapping) else {"content": body}
            message.setdefault("role", "assistant")
            outputs.append(message)
        elif name.startswith("gen_ai.") and name.endswith(".message"):
            role = name[len("gen_ai.") : -len(".message")]
            message = dict(body) if isinstance(body, Mapping) else {"content": body}
            message.setdefault("role", role)
            inputs.append(message)
    return inputs, outputs


def _messages(span: Mapping[str, Any], attrs: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    for key_in, key_out in (("gen_ai.input.messages", "gen_ai.output.messages"),):
        loaded_in, loaded_out = _loads(attrs.get(key_in)), _loads(attrs.get(key_out))
        if isinstance(loaded_in, list) or isinstance(loaded_out, list):
            inputs = [_part_message(m) for m in loaded_in or [] if isinstance(m, Mapping)]
            system = _loads(attrs.get("gen_ai.system_instructions"))
            if isinstance(system, list):
                text = "".join(p.get("content", "") for p in system if isinstance(p, Mapping))
                inputs.insert(0, {"role": "system", "content": text})
            outputs = [_part_message(m) for m in loaded_out or [] if isinstance(m, Mapping)]
            if not outputs and "gen_ai.output" in attrs:
                outputs = [_output_reply(attrs["gen_ai.output"])]
            return inputs, outputs
    prompts = _indexed(attrs, "gen_ai.prompt")
    completions = _indexed(attrs, "gen_ai.completion")
    if prompts or completions:
        return (
            [_flat_message(m, False) for m in prompts],
            [
                {**_flat_message(m, False), "role": m.get("role") or "assistant"}
                for m in completions
            ],
        )
    inputs_oi = _indexed(attrs, "llm.input_messages")
    outputs_oi = _indexed(attrs, "llm.output_messages")
    if inputs_oi or outputs_oi:
        return (
            [_flat_message(m, True) for m in inputs_oi],
            [_flat_message(m, True) for m in outputs_oi],
        )
    vercel = _loads(attrs.get("ai.prompt.messages"))
    if isinstance(vercel, list) or "ai.response.text" in attrs or "ai.response.toolCalls" in attrs:
        inputs = [_vercel_message(m) for m in vercel or [] if isinstance(m, Mapping)]
        return inputs, _vercel_reply(attrs)
    inputs, outputs = _event_messages(span)
    if not outputs and "gen_ai.output" in attrs:
        outputs = [_output_reply(attrs["gen_ai.output"])]
    return inputs, outputs


def _vercel_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A Vercel AI SDK prompt message (content a string or typed parts) in chat shape."""
    content = message.get("content")
    out: dict[str, Any] = {"role": message.get("role") or "user"}
    if not isinstance(content, list):
        out["content"] = content
        return out
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "tool-call":
            arguments = part.get("input", part.get("args"))
            calls.append(tool_call(part.get("toolCallId"), part.get("toolName"), arguments))
        elif kind == "tool-result":
            out["role"] = "tool"
            out["tool_call_id"] = part.get("toolCallId")
            output = part.get("output", part.get("result"))
            texts.append(output if isinstance(output, str) else json.dumps(output))
    out["content"] = "".join(texts) or None
    if calls:
        out["tool_calls"] = calls
    return out


def _vercel_reply(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    text = attrs.get("ai.response.text")
    calls = _loads(attrs.get("ai.response.toolCalls"))
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": text if isinstance(text, str) else None,
    }
    if isinstance(calls, list):
        reply["tool_calls"] = [
            tool_call(c.get("toolCallId"), c.get("toolName"), c.get("input", c.get("args")))
            for c in calls
            if isinstance(c, Mapping)
        ]
    if attrs.get("ai.response.finishReason"):
        reply["_finish_reason"] = attrs["ai.response.finishReason"]
    return [reply] if reply["content"] is not None or reply.get("tool_calls") else []


def _output_reply(value: Any) -> dict[str, Any]:
    """any-agent's gen_ai.output: a list of {tool.name, tool.args} calls, or the answer."""
    loaded = _loads(value)
    if (
        isinstance(loaded, list)
        and loaded
        and all(isinstance(c, Mapping) and "tool.name" in c for c in loaded)
    ):
        calls = [tool_call(None, c.get("tool.name"), c.get("tool.args")) for c in loaded]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    return {"role": "assistant", "content": value if isinstance(value, str) else json.dumps(value)}


def _usage(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    def first(*keys: str) -> Any:
        return next((attrs[k] for k in keys if isinstance(attrs.get(k), int | float)), None)

    prompt = first("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                   "llm.token_count.prompt", "llm.usage.prompt_tokens",
                   "ai.usage.promptTokens", "ai.usage.inputTokens")  # fmt: skip
    completion = first("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                       "llm.token_count.completion", "llm.usage.completion_tokens",
                       "ai.usage.completionTokens", "ai.usage.outputTokens")  # fmt: skip
    total = first("llm.usage.total_tokens", "llm.token_count.total", "gen_ai.usage.total_tokens")
    if prompt is None and completion is None and total is None:
        return None
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    if total is not None:
        usage["total_tokens"] = total
    return {k: v for k, v in usage.items() if v is not None}


def _time(span: Mapping[str, Any]) -> str | None:
    """A span's start: OTLP's nanoseconds (often as text), else the SDK's own field."""
    for key in ("startTimeUnixNano", "start_time_unix_nano"):
        value = span.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and value:
            return iso_time(value)
    return next(
        (iso_time(span[key]) for key in ("start_time", "startTime", "timestamp") if key in span),
        None,
    )


def _raw_payloads(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """OpenInference's input.value/output.value when they are a provider's own payloads."""
    request, response = _loads(attrs.get("input.value")), _loads(attrs.get("output.value"))
    if (
        isinstance(request, Mapping)
        and isinstance(response, Mapping)
        and detect_provider(request, response) != "unknown"
    ):
        return request, response
    return None, None


def _interaction(
    index: int,
    span: Mapping[str, Any],
    attrs: Mapping[str, Any],
) -> ParsedInteraction:
    model = next(
        (attrs[k] for k in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name",
                            "ai.response.model", "ai.model.id")
         if isinstance(attrs.get(k), str) and attrs[k]),
        None,
    )  # fmt: skip
    inputs, outputs = _messages(span, attrs)
    request: Any
    response: Any
    if not inputs and not outputs:
        request, response = _raw_payloads(attrs)
        if request is None:
            request, response = {"messages": []}, None
            if _usage(attrs):  # the call's model and counts are still evidence
                response = {"object": "chat.completion", "choices": []}
    else:
        finish = next((m.pop("_finish_reason") for m in outputs if "_finish_reason" in m), None)
        for message in inputs:
            message.pop("_finish_reason", None)
        request = {"messages": inputs}
        reply = outputs[0] if outputs else None
        response = None
        if reply is not None:
            response = {
                "object": "chat.completion",
                "choices": [
                    {"index": n, "message": m, "finish_reason": finish}
                    for n, m in enumerate(outputs)
                ],
            }
    if model:
        request.setdefault("model", model)
        if isinstance(response, dict):
            response.setdefault("model", model)
    usage = _usage(attrs)
    if usage and isinstance(response, dict) and "choices" in response:
        response["usage"] = usage
    context = safeload.object_at(span, "context")
    status = safeload.object_at(span, "status")
    failed = str(status.get("status_code") or status.get("code") or "").upper() in (
        "ERROR",
        "STATUS_CODE_ERROR",
        "2",
    )
    return rebuilt_interaction(
        index,
        request,
        response,
        note=SYNTHETIC,
        recorded_at=_time(span),
        extra={
            "span": str(span.get("name") or "")[:200],
            "trace_id": span.get("traceId") or context.get("trace_id"),
            "span_id": span.get("spanId") or context.get("span_id"),
            "error": failed,
        },
    )
