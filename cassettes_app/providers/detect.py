"""Which provider a recorded request/response pair belongs to, from its body or URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["detect"]


def _detect_response(resp: Any) -> str | None:
    """Guess the provider from a response body."""
    if isinstance(resp, list):
        first = next((e for e in resp if isinstance(e, dict)), None)
        if first is None:
            return None
        kind = first.get("type")
        if first.get("object") == "chat.completion.chunk" or "choices" in first:
            return "openai-chat"
        if isinstance(kind, str) and kind.startswith("response."):
            return "openai-responses"
        if kind in ("message_start", "content_block_start", "ping"):
            return "anthropic"
        if "candidates" in first or "usageMetadata" in first:
            return "gemini"
        return None
    if not isinstance(resp, dict):
        return None
    if "candidates" in resp or "usageMetadata" in resp or "promptFeedback" in resp:
        return "gemini"
    obj = resp.get("object")
    if obj in ("chat.completion", "chat.completion.chunk") or isinstance(resp.get("choices"), list):
        return "openai-chat"
    if obj == "response" or (isinstance(resp.get("output"), list) and "status" in resp):
        return "openai-responses"
    if resp.get("type") == "message" or "stop_reason" in resp:
        return "anthropic"
    if resp.get("type") == "error" and isinstance(resp.get("error"), dict):
        return "anthropic"
    return None


_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}

_OPENAI_ONLY_KEYS = ("functions", "function_call", "response_format", "n", "logprobs")


def _detect_request(req: Any) -> str | None:
    """Guess the provider from a request body (strong signals only)."""
    if not isinstance(req, dict):
        return None
    if any(k in req for k in ("contents", "systemInstruction", "system_instruction")):
        return "gemini"
    if "generationConfig" in req:
        return "gemini"
    if "messages" not in req and ("input" in req or "instructions" in req):
        model = req.get("model")
        if not isinstance(model, str) or "embed" in model:
            # An embeddings call has "input" too; so do other APIs' bodies (a video
            # service's asset, an Assistants run): without a model it is no Responses call.
            return None
        return "openai-responses"
    if "messages" not in req:
        return None
    if "anthropic_version" in req or "system" in req or "stop_sequences" in req:
        return "anthropic"
    if any(k in req for k in (*_OPENAI_ONLY_KEYS, "max_completion_tokens")):
        return "openai-chat"
    tools = req.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[0], dict):
        if "input_schema" in tools[0]:
            return "anthropic"
        if "function" in tools[0]:
            return "openai-chat"
    messages = req.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if not isinstance(m, dict):
                continue
            if m.get("role") in ("system", "developer", "tool", "function"):
                return "openai-chat"
            if "tool_calls" in m or "function_call" in m or "tool_call_id" in m:
                return "openai-chat"
            content = m.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict):
                        if block.get("type") in _ANTHROPIC_BLOCKS:
                            return "anthropic"
                        if block.get("type") == "image" and "source" in block:
                            return "anthropic"
                        if block.get("type") == "image_url":
                            return "openai-chat"
    return None


def _detect_url(url: str | None) -> str | None:
    """Guess the provider from the request URL."""
    if not isinstance(url, str) or not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    path = parts.path.rstrip("/").lower()
    host = (parts.hostname or "").lower()
    if ":generatecontent" in path or ":streamgeneratecontent" in path:
        return "gemini"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages") and "/threads/" not in path:
        return "anthropic"
    if "anthropic" in host:
        return "anthropic"
    if "generativelanguage" in host:
        return "gemini"
    return None


_OTHER_OPENAI_APIS = ("/assistants", "/threads", "/vector_stores", "/files", "/batches")


def _other_openai_api(url: str | None) -> bool:
    """An OpenAI endpoint that is not a model call (Assistants objects, files, batches)."""
    try:
        path = urlsplit(url or "").path.lower()
    except ValueError:
        return False
    return any(part in path for part in _OTHER_OPENAI_APIS)


def detect(req: Any, resp: Any, url: str | None) -> str:
    """Body shape wins over URL because proxies and compat endpoints reuse each other's paths."""
    by_request = _detect_request(req)
    if by_request == "openai-responses" and _other_openai_api(url):
        by_request = None  # creating an assistant or a run has model and instructions too
    found = _detect_response(resp) or by_request or _detect_url(url)
    if found:
        return found
    if isinstance(req, dict) and isinstance(req.get("messages"), list):
        model = req.get("model")
        if isinstance(model, str) and model.startswith("claude"):
            return "anthropic"
        return "openai-chat"
    return "unknown"
