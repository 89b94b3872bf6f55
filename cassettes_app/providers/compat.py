"""Providers whose payloads are read by translating them to OpenAI chat: Ollama, Cohere
(v1 and v2 chat) and Bedrock's Converse API.

Each has its own request and answer shape (their streams are folded into that answer by
`ndjson`, `cohere` and `eventstream`); `detect` names the provider, `translate` rewrites
the pair as an OpenAI chat request and completion so `openai_chat.parse` makes the turns,
and the exchange keeps the provider's own name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from cassettes_app import safeload

OLLAMA, COHERE, BEDROCK = "ollama", "cohere", "bedrock-converse"
NAMES = (OLLAMA, COHERE, BEDROCK)

_BEDROCK_PATH = re.compile(r"/model/([^/]+)/converse(?:-stream)?$")


def _path(url: str | None) -> str:
    try:
        return urlsplit(url or "").path.rstrip("/").lower()
    except ValueError:
        return ""


def detect(req: Any, resp: Any, url: str | None) -> str | None:
    """The compat provider a pair belongs to, or None."""
    req = req if isinstance(req, Mapping) else {}
    resp = resp if isinstance(resp, Mapping) else {}
    path = _path(url)
    if "done" in resp and ("message" in resp or "response" in resp) and "choices" not in resp:
        return OLLAMA
    if path.endswith(("/api/chat", "/api/generate")) and ":11434" in (url or ""):
        return OLLAMA
    if isinstance(resp.get("output"), Mapping) and "stopReason" in resp:
        return BEDROCK
    if _BEDROCK_PATH.search(path):
        return BEDROCK
    message = resp.get("message")
    if isinstance(message, Mapping) and "finish_reason" in resp and "choices" not in resp:
        return COHERE  # v2
    if "generation_id" in resp and "text" in resp:
        return COHERE  # v1
    if path.endswith(("/v1/chat", "/v2/chat")) and "cohere" in (url or ""):
        return COHERE
    return None


def translate(
    provider: str, req: Any, resp: Any, url: str | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The pair as an OpenAI chat (request, completion)."""
    req = dict(req) if isinstance(req, Mapping) else {}
    resp = resp if isinstance(resp, Mapping) else None
    if provider == OLLAMA:
        return _ollama(req, resp)
    if provider == COHERE:
        return _cohere(req, resp)
    return _bedrock(req, resp, url)


def _completion(
    model: Any, message: dict[str, Any], finish: Any, prompt: Any, completion: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if isinstance(model, str):
        out["model"] = model
    usage = {
        k: v
        for k, v in (("prompt_tokens", prompt), ("completion_tokens", completion))
        if isinstance(v, int) and not isinstance(v, bool)
    }
    if usage:
        out["usage"] = usage
    return out


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _ollama(req: dict[str, Any], resp: Mapping[str, Any] | None) -> tuple[dict, dict | None]:
    messages = list(req.get("messages") or [])
    if not messages and isinstance(req.get("prompt"), str):
        messages = [{"role": "user", "content": req["prompt"]}]
        if isinstance(req.get("system"), str):
            messages.insert(0, {"role": "system", "content": req["system"]})
    request = {"model": req.get("model"), "messages": messages}
    if resp is None:
        return request, None
    message = resp.get("message") if isinstance(resp.get("message"), Mapping) else None
    if message is None:
        reply: dict[str, Any] = {"role": "assistant", "content": resp.get("response")}
    else:
        reply = {"role": "assistant", "content": message.get("content")}
        calls = [
            _call(c.get("id"), (c.get("function") or {}).get("name"),
                  (c.get("function") or {}).get("arguments"))
            for c in message.get("tool_calls") or []
            if isinstance(c, Mapping)
        ]  # fmt: skip
        if calls:
            reply["tool_calls"] = calls
    finish = resp.get("done_reason") or ("stop" if resp.get("done") else None)
    completion = _completion(
        resp.get("model"), reply, finish, resp.get("prompt_eval_count"), resp.get("eval_count")
    )
    return request, completion


_COHERE_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}


def _cohere_text(content: Any) -> Any:
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return content


def _cohere(req: dict[str, Any], resp: Mapping[str, Any] | None) -> tuple[dict, dict | None]:
    if isinstance(req.get("messages"), list):  # v2: chat-like messages
        messages = [
            {**m, "content": _cohere_text(m.get("content"))}
            for m in req["messages"]
            if isinstance(m, Mapping)
        ]
    else:  # v1: preamble, chat_history, message
        messages = []
        if isinstance(req.get("preamble"), str):
            messages.append({"role": "system", "content": req["preamble"]})
        for turn in req.get("chat_history") or []:
            if isinstance(turn, Mapping):
                role = _COHERE_ROLES.get(str(turn.get("role")).upper(), "user")
                messages.append({"role": role, "content": turn.get("message")})
        if isinstance(req.get("message"), str):
            messages.append({"role": "user", "content": req["message"]})
    request = {"model": req.get("model"), "messages": messages}
    if resp is None:
        return request, None
    message = resp.get("message") if isinstance(resp.get("message"), Mapping) else None
    if message is not None:  # v2
        reply: dict[str, Any] = {
            "role": "assistant",
            "content": _cohere_text(message.get("content")),
        }
        calls = [
            _call(c.get("id"), (c.get("function") or {}).get("name"),
                  (c.get("function") or {}).get("arguments"))
            for c in message.get("tool_calls") or []
            if isinstance(c, Mapping)
        ]  # fmt: skip
        usage = safeload.object_at(resp, "usage")
        tokens = safeload.object_at(usage, "tokens")
    else:  # v1
        reply = {"role": "assistant", "content": resp.get("text")}
        calls = [
            _call(None, c.get("name"), c.get("parameters"))
            for c in resp.get("tool_calls") or []
            if isinstance(c, Mapping)
        ]
        meta = safeload.object_at(resp, "meta")
        tokens = safeload.object_at(meta, "tokens")
        tokens = tokens or safeload.object_at(meta, "billed_units")
    if calls:
        reply["tool_calls"] = calls
    completion = _completion(
        req.get("model"),
        reply,
        resp.get("finish_reason"),
        tokens.get("input_tokens"),
        tokens.get("output_tokens"),
    )
    return request, completion


def _bedrock_content(content: Any) -> tuple[str | None, list[dict[str, Any]], list[dict]]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        tool = block.get("toolUse")
        if isinstance(tool, Mapping):
            calls.append(_call(tool.get("toolUseId"), tool.get("name"), tool.get("input")))
        result = block.get("toolResult")
        if isinstance(result, Mapping):
            inner = result.get("content")
            text, _, _ = _bedrock_content(inner)
            results.append(
                {"role": "tool", "tool_call_id": result.get("toolUseId"), "content": text or ""}
            )
    return ("".join(texts) if texts else None), calls, results


def _bedrock(
    req: dict[str, Any], resp: Mapping[str, Any] | None, url: str | None
) -> tuple[dict, dict | None]:
    messages: list[dict[str, Any]] = []
    system = req.get("system")
    if isinstance(system, list):
        text, _, _ = _bedrock_content(system)
        messages.append({"role": "system", "content": text})
    for message in req.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        text, calls, results = _bedrock_content(message.get("content"))
        if results:
            messages.extend(results)
            if text is None:
                continue
        entry: dict[str, Any] = {"role": message.get("role") or "user", "content": text}
        if calls:
            entry["tool_calls"] = calls
        messages.append(entry)
    match = _BEDROCK_PATH.search(_path(url))
    model = unquote(match.group(1)) if match else req.get("modelId")
    request = {"model": model, "messages": messages}
    if resp is None:
        return request, None
    output = safeload.object_at(resp, "output")
    message = safeload.object_at(output, "message")
    text, calls, _ = _bedrock_content(message.get("content"))
    reply: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        reply["tool_calls"] = calls
    usage = safeload.object_at(resp, "usage")
    completion = _completion(
        model, reply, resp.get("stopReason"), usage.get("inputTokens"), usage.get("outputTokens")
    )
    return request, completion
