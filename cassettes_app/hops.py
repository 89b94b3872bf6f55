"""Which hops of a trace are model chat and which went to the candidate's stub.

One classifier for the static trace checks and the live trace verification, so the two can
never disagree on which hop is a stub hop. It is the union of the two lists the project
used to keep apart: a hop is model chat when either old classifier said so.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from cassettes_app.jsonvalues import maybe_json
from cassettes_app.parsed import TraceHop

__all__ = [
    "EMPTY",
    "MODEL",
    "MODEL_HOSTS",
    "MODEL_PATHS",
    "STUB",
    "hop_kind",
    "is_model_hop",
    "is_model_url",
    "stub_hops",
]

# Path fragments of model APIs (lowercased): OpenAI chat/completions/responses/embeddings
# (also Azure's /openai/responses), Anthropic messages, Gemini generateContent.
MODEL_PATHS = (
    "/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/openai/responses",
    "/v1/completions",
    "/v1/embeddings",
    ":generatecontent",
    ":streamgeneratecontent",
)
# Provider API hosts; any subdomain of one counts too (`eu.api.openai.com`).
MODEL_HOSTS = frozenset(
    {
        "api.openai.com",
        "openai.azure.com",
        "api.anthropic.com",
        "generativelanguage.googleapis.com",
        "aiplatform.googleapis.com",
        "api.mistral.ai",
        "api.groq.com",
        "openrouter.ai",
        "api.together.xyz",
        "api.together.ai",
        "api.deepseek.com",
        "api.cohere.com",
        "api.cohere.ai",
        "api.x.ai",
        "api.fireworks.ai",
        "api.perplexity.ai",
    }
)
# Host endings that are model APIs whatever comes before them (regional Vertex AI hosts such
# as `us-central1-aiplatform.googleapis.com` have no dot before the suffix).
_MODEL_HOST_SUFFIXES = (".openai.azure.com", "aiplatform.googleapis.com", ".anthropic.com")
_MODEL_HOST_PREFIXES = ("bedrock-runtime.",)

_MODEL_PATH_RE = re.compile("|".join(re.escape(fragment) for fragment in MODEL_PATHS))

MODEL, STUB, EMPTY = "model", "stub", "empty"


def _host(lowered: str) -> str:
    """The host of a lowercased URL (userinfo, port, brackets and trailing dot dropped)."""
    rest = lowered.partition("://")[2] or lowered
    host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]
    return host.rstrip(".")


def _model_host(host: str) -> bool:
    if host in MODEL_HOSTS or host.endswith(_MODEL_HOST_SUFFIXES):
        return True
    if host.startswith(_MODEL_HOST_PREFIXES):
        return True
    parts = host.split(".")
    return any(".".join(parts[i:]) in MODEL_HOSTS for i in range(1, len(parts)))


@functools.lru_cache(maxsize=4096)
def is_model_url(url: str | None) -> bool:
    """True when a URL is a model API's: a model API path, or a provider host."""
    # Cached, and string slicing rather than urlsplit: a trace repeats a handful of URLs
    # thousands of times, and `GET /orders/{id}` URLs are all different.
    if not url:
        return False
    lowered = url.lower()
    return bool(_MODEL_PATH_RE.search(lowered)) or _model_host(_host(lowered))


def _body_says_model(req: Any, resp: Any) -> bool:
    req = maybe_json(req)
    if isinstance(req, dict):
        if isinstance(req.get("messages"), list) or isinstance(req.get("contents"), list):
            return True
        # Responses / completions / embeddings requests: a model plus its input.
        if isinstance(req.get("model"), str) and ("input" in req or "prompt" in req):
            return True
    resp = maybe_json(resp)
    if isinstance(resp, dict):
        if isinstance(resp.get("choices"), list) or isinstance(resp.get("candidates"), list):
            return True
        if resp.get("object") in ("chat.completion", "response", "text_completion"):
            return True
        if resp.get("type") == "message" and "content" in resp:
            return True
    return False


def is_model_hop(hop: TraceHop) -> bool:
    """True when a hop is model chat: a provider URL or host, else a chat-shaped body."""
    url = hop.url if isinstance(hop.url, str) else None  # the cache needs a hashable key
    return is_model_url(url) or _body_says_model(hop.req, hop.resp)


def hop_kind(hop: TraceHop) -> str:
    """MODEL, STUB (any other hop that records something) or EMPTY (an all-None row)."""
    if is_model_hop(hop):
        return MODEL
    if hop.url or hop.method or hop.req is not None or hop.resp is not None:
        return STUB
    return EMPTY


def stub_hops(hops: Iterable[TraceHop]) -> list[TraceHop]:
    """The hops that went to the stub (have a URL and are not model chat), in file order."""
    return [h for h in hops if h.url and not is_model_hop(h)]
