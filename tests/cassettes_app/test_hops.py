"""Which trace hops are model chat: one classifier for the static and the live trace checks."""

from __future__ import annotations

import pytest

from cassettes_app.checks import trace as static_trace
from cassettes_app.hops import EMPTY, MODEL, STUB, hop_kind, is_model_hop, is_model_url, stub_hops
from cassettes_app.parsed import TraceHop

# Every host either old classifier knew (checks/trace.py and submissions/trace_verify.py).
PROVIDER_HOSTS = [
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
]
# Hosts known by their ending or beginning, with a made-up resource name.
PATTERN_HOSTS = [
    "myres.openai.azure.com",
    "us-central1-aiplatform.googleapis.com",
    "eu.anthropic.com",
    "bedrock-runtime.us-east-1.amazonaws.com",
]
MODEL_PATHS = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/openai/responses",
    "/v1/completions",
    "/v1/embeddings",
    "/v1beta/models/gemini-2.0-flash:generateContent",
    "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
]
STUB_URLS = [
    "http://127.0.0.1:8080/orders",
    "http://localhost:8000/orders/ord_1",
    "https://shop.example.com/orders/ord_1",
    "http://stub:9000/_trace/t-1",
    "https://openai.com.example.net/orders",  # a provider name inside another host
]


def hop(url: str | None, req: object = None, resp: object = None) -> TraceHop:
    return TraceHop(1, url, "POST", 200, "t", None, [], req, resp)


@pytest.mark.parametrize("host", PROVIDER_HOSTS + PATTERN_HOSTS)
def test_every_known_provider_host_is_a_model_hop(host: str) -> None:
    assert is_model_hop(hop(f"https://{host}/anything"))
    assert is_model_url(f"https://{host.upper()}:443/anything")


@pytest.mark.parametrize("host", PROVIDER_HOSTS)
def test_subdomains_of_provider_hosts_are_model_hops(host: str) -> None:
    assert is_model_hop(hop(f"https://eu.{host}/anything"))


@pytest.mark.parametrize("path", MODEL_PATHS)
def test_model_api_paths_are_model_hops_on_any_host(path: str) -> None:
    assert is_model_hop(hop(f"https://proxy.example.com{path}"))
    assert is_model_hop(hop(f"http://127.0.0.1:4000{path}/"))


@pytest.mark.parametrize("url", STUB_URLS)
def test_stub_urls_are_not_model_hops(url: str) -> None:
    assert not is_model_hop(hop(url, req={"sku": "A-1", "qty": 1}, resp={"id": "ord_1"}))
    assert hop_kind(hop(url)) == STUB


def test_chat_shaped_bodies_are_model_hops_whatever_the_url() -> None:
    url = "http://127.0.0.1:8080/llm"
    assert is_model_hop(hop(url, req={"messages": []}))
    assert is_model_hop(hop(url, req='{"model": "m", "input": "hi"}'))
    assert is_model_hop(hop(url, resp={"choices": []}))
    assert is_model_hop(hop(url, resp={"type": "message", "content": []}))
    assert not is_model_hop(hop(url, req="not json", resp=b"[1]"))


def test_kinds_and_stub_hops() -> None:
    hops = [hop("https://api.openai.com/v1/chat/completions"), hop("http://s/orders"), hop(None)]
    hops[2].method = None
    assert [hop_kind(h) for h in hops] == [MODEL, STUB, EMPTY]
    assert stub_hops(hops) == [hops[1]]


def test_the_static_checks_use_the_one_classifier() -> None:
    assert static_trace.is_model_hop is is_model_hop
