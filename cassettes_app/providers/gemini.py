"""Google Gemini generateContent: contents and parts, and streamed chunks merged into one."""

from __future__ import annotations

from typing import Any

from cassettes_app import safeload
from cassettes_app.limits import ParseLimits
from cassettes_app.providers.common import (
    Exchange,
    Malformed,
    Message,
    ToolResult,
    as_dict,
    as_list,
    as_text,
    canonical_json,
    first_model,
    make_tool_call,
    make_usage,
    map_role,
    opt_str,
    url_model,
    usage_obj,
)

__all__ = ["fold_events", "fold_stream", "parse"]


def _pick(d: dict, camel: str, snake: str) -> Any:
    """Read a Gemini field that may be spelled camelCase or snake_case."""
    return d[camel] if camel in d else d.get(snake)


def _gemini_content(c: Any, default_role: str) -> Message:
    """Parse one Gemini Content object."""
    if isinstance(c, str):
        return Message(default_role, c, raw=c)
    if not isinstance(c, dict):
        raise Malformed(f"content is {type(c).__name__}, expected an object")
    role = map_role(c.get("role"), default_role)
    msg = Message(role, raw=c)
    texts: list[str] = []
    for part in as_list(c.get("parts"), "parts"):
        if not isinstance(part, dict):
            texts.append(as_text(part))
            continue
        if part.get("thought") is True:
            continue
        call = _pick(part, "functionCall", "function_call")
        response = _pick(part, "functionResponse", "function_response")
        if "text" in part:
            texts.append(as_text(part["text"]))
        elif isinstance(call, dict):
            msg.tool_calls.append(
                make_tool_call(call.get("id"), call.get("name"), call.get("args"))
            )
        elif isinstance(response, dict):
            body = response.get("response")
            msg.tool_results.append(
                ToolResult(
                    opt_str(response.get("id")),
                    body if isinstance(body, str) else canonical_json(body),
                    name=opt_str(response.get("name")),
                )
            )
        elif isinstance(_pick(part, "executableCode", "executable_code"), dict):
            texts.append(as_text(_pick(part, "executableCode", "executable_code").get("code")))
        elif isinstance(_pick(part, "codeExecutionResult", "code_execution_result"), dict):
            texts.append(
                as_text(_pick(part, "codeExecutionResult", "code_execution_result").get("output"))
            )
        else:
            texts.append(f"[{next(iter(part), 'part')}]")
    msg.text = "\n".join(texts)
    if msg.role == "user" and msg.tool_results and not msg.text.strip():
        msg.role = "tool"
    return msg


# Two folds of one stream, kept side by side on purpose. `fold_stream` rebuilds the whole
# response object when a recorded body is decoded (for storage and the evidence pages, with
# problems); `fold_events` is what `normalise` reads a raw event list with (a trace hop, or
# a JSON list of chunks that was never decoded as a body). They disagree on odd streams:
# text parts that carry other keys such as `thoughtSignature`, candidates other than
# the first.
# Each caller's results are pinned by tests and reports, so merging them would change one.


def fold_events(events: list) -> dict:
    """Merge streamGenerateContent chunks into one response."""
    parts: list[dict] = []
    out: dict[str, Any] = {}
    finish = None
    for ev in events:
        if not isinstance(ev, dict):
            continue
        for key in ("usageMetadata", "modelVersion", "promptFeedback"):
            if key in ev:
                out[key] = ev[key]
        cands = ev.get("candidates")
        if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
            continue
        finish = cands[0].get("finishReason") or finish
        content = cands[0].get("content")
        chunk_parts = content.get("parts") if isinstance(content, dict) else None
        for part in chunk_parts if isinstance(chunk_parts, list) else []:
            if not isinstance(part, dict):
                continue
            if (
                "text" in part
                and parts
                and "text" in parts[-1]
                and bool(part.get("thought")) == bool(parts[-1].get("thought"))
            ):
                parts[-1] = {
                    **parts[-1],
                    "text": as_text(parts[-1]["text"]) + as_text(part["text"]),
                }
            else:
                parts.append(part)
    out["candidates"] = [{"content": {"role": "model", "parts": parts}, "finishReason": finish}]
    return out


def fold_stream(chunks: list[dict[str, Any]], limits: ParseLimits) -> tuple[Any, list[str]]:
    """Fold streamGenerateContent chunks into one GenerateContentResponse."""
    out: dict[str, Any] = {}
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback", "createTime"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        for candidate in chunk.get("candidates") or []:
            if not isinstance(candidate, dict):
                continue
            index = safeload.int_at(candidate, "index", 0)
            slot = candidates.setdefault(
                index, {"content": {"role": "model", "parts": []}, "index": index}
            )
            content = safeload.object_at(candidate, "content")
            if isinstance(content.get("role"), str):
                slot["content"]["role"] = content["role"]
            parts = slot["content"]["parts"]
            for part in content.get("parts") or []:
                if not isinstance(part, dict):
                    continue
                last = parts[-1] if parts else None
                if (
                    isinstance(part.get("text"), str)
                    and last is not None
                    and set(last) <= {"text", "thought"}
                    and set(part) <= {"text", "thought"}
                    and last.get("thought") == part.get("thought")
                ):
                    last["text"] += part["text"]
                else:
                    parts.append(dict(part))
            for key, value in candidate.items():
                if key not in ("content", "index") and value is not None:
                    slot[key] = value
    out["candidates"] = [candidates[k] for k in sorted(candidates)]
    return out, []


def parse(req: Any, resp: Any, url: str | None, ex: Exchange) -> None:
    """Fill ex from a Gemini generateContent request/response."""
    req = as_dict(req, "request")
    msgs: list[Message] = []
    system = _pick(req, "systemInstruction", "system_instruction")
    if system is not None:
        sys_msg = _gemini_content(system, "system")
        sys_msg.role = "system"
        msgs.append(sys_msg)
    for c in as_list(req.get("contents"), "contents"):
        msgs.append(_gemini_content(c, "user"))
    ex.request_messages = msgs
    if isinstance(resp, list):
        resp = fold_events(resp)
    resp = as_dict(resp, "response")
    req_model = req.get("model")
    if isinstance(req_model, str):
        req_model = req_model.removeprefix("models/")
    ex.model = first_model(resp.get("modelVersion"), req_model, url_model(url))
    cands = as_list(resp.get("candidates"), "candidates")
    if cands:
        c0 = as_dict(cands[0], "candidates[0]")
        content = c0.get("content")
        ex.response = (
            _gemini_content(content, "assistant")
            if content is not None
            else Message("assistant", raw=c0)
        )
        ex.stop_reason = opt_str(c0.get("finishReason"))
    else:
        feedback = resp.get("promptFeedback")
        if isinstance(feedback, dict):
            ex.stop_reason = opt_str(feedback.get("blockReason"))
    u = usage_obj(resp.get("usageMetadata"), "usageMetadata", ex)
    ex.usage = make_usage(
        u.get("promptTokenCount"), u.get("candidatesTokenCount"), u.get("totalTokenCount")
    )
