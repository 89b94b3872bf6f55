"""Normalise recorded provider request/response JSON into one turn model.

One module per provider (openai_chat, openai_responses, anthropic, gemini) owns its
normalisation and its stream folding; `common` holds the turn model, `detect` tells the
providers apart, `sse` parses event streams. `normalise`, `detect_provider` and PROVIDERS
are the doors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cassettes_app.jsonvalues import maybe_json
from cassettes_app.providers import (
    anthropic,
    compat,
    gemini,
    openai_chat,
    openai_responses,
    sse,
)
from cassettes_app.providers.common import (
    Exchange,
    Malformed,
    Message,
    ToolCall,
    ToolResult,
    canonical_json,
    error_problem,
    first_model,
)
from cassettes_app.providers.detect import detect

__all__ = [
    "PROVIDERS",
    "Exchange",
    "Message",
    "ToolCall",
    "ToolResult",
    "canonical_json",
    "detect_provider",
    "normalise",
]

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini", *compat.NAMES, "unknown")


def _load(body: Any) -> Any:
    """Decode a body given as bytes/str JSON or SSE; anything else is returned as is."""
    if isinstance(body, bytes | bytearray | memoryview):
        body = bytes(body).decode("utf-8", errors="replace")
    if not isinstance(body, str):
        return body
    stripped = body.strip()
    if not stripped:
        return None
    if stripped.startswith(("data:", "event:")):
        return sse.event_payloads(stripped)
    return maybe_json(body, keep_text=True)


def detect_provider(request: Any, response: Any, url: str | None = None) -> str:
    """Return the provider id for a recorded request/response (never raises)."""
    try:
        req, resp = _load(request), _load(response)
        return compat.detect(req, resp, url) or detect(req, resp, url)
    except Exception:
        return "unknown"


_PARSERS: dict[str, Callable[[Any, Any, str | None, Exchange], None]] = {
    "openai-chat": openai_chat.parse,
    "openai-responses": openai_responses.parse,
    "anthropic": anthropic.parse,
    "gemini": gemini.parse,
}


def _unknown(request: Any, response: Any, req: Any, resp: Any, problems: list[str]) -> Exchange:
    """Build the fallback exchange that keeps both raw bodies."""
    model = None
    for body in (resp, req):
        if isinstance(body, dict):
            model = model or first_model(body.get("model"), body.get("modelVersion"))
    return Exchange("unknown", model, [], None, {}, request, response, None, problems)


def normalise(request: Any, response: Any, url: str | None = None) -> Exchange:
    """Normalise one recorded request/response into an Exchange (never raises)."""
    req: Any = None
    resp: Any = None
    provider = "unknown"
    try:
        req, resp = _load(request), _load(response)
        provider = compat.detect(req, resp, url) or detect(req, resp, url)
        if provider in compat.NAMES:
            # Ollama, Cohere, Bedrock Converse: read through their OpenAI chat translation.
            chat_req, chat_resp = compat.translate(provider, req, resp, url)
            ex = Exchange(provider, None, [], None, {}, request, response)
            openai_chat.parse(chat_req, chat_resp, url, ex)
            return ex
        if provider == "unknown":
            return _unknown(request, response, req, resp, [])
        ex = Exchange(provider, None, [], None, {}, request, response)
        problem = error_problem(resp)
        if problem:
            ex.problems.append(problem)
            resp = None
        elif resp is not None and not isinstance(resp, dict | list):
            ex.problems.append(f"response body is not JSON ({type(resp).__name__})")
            resp = None
        _PARSERS[provider](req, resp, url, ex)
        return ex
    except Malformed as exc:
        return _unknown(request, response, req, resp, [f"malformed {provider} payload: {exc}"])
    except Exception as exc:
        # Recordings are untrusted input: any surprise degrades to unknown, never an exception.
        return _unknown(
            request, response, req, resp, [f"could not parse {provider} payload: {exc!r}"]
        )
