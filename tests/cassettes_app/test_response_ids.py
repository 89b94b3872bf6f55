"""Recorded response ids, read from real recordings (tests/fixtures/wild) and hostile ones."""

from __future__ import annotations

import json

import pytest

from cassettes_app.formats import parse_file
from cassettes_app.parsed import Body, ParsedInteraction
from cassettes_app.response_ids import MAX_VALUE, response_ids
from tests.paths import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild"


def _ids(rel: str) -> list[tuple[str, str]]:
    result = parse_file(rel, (WILD / rel).read_bytes())
    return [
        (found.kind, found.value)
        for recording in result.recordings
        for found in response_ids(recording.interactions)
    ]


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (
            "vcrpy-aiohttp/dd-apm-test-agent-openai-chat-completion.yaml",
            [
                ("body.id", "chatcmpl-BmQAy5YZmY2VqBd67WEjAf7PL8pMR"),
                ("header:x-request-id", "req_b5d28a41a22c127bf77ef18ffae70449"),
            ],
        ),
        (
            "vcrpy-httpx/mirascope-anthropic-call-with-params.yaml",
            [
                ("body.id", "msg_01VUbFw9RRCE1vQgmEsYq25J"),
                ("header:request-id", "req_011CWvuzy2hPvFLrGCo7xtEU"),
            ],
        ),
        # Event streams: the id of the folded body.
        (
            "go-vcr/fantasy-anthropic-simple-streaming.yaml",
            [("body.id", "msg_01R8GdyyLQUhUfyjqSCMbnWg")],
        ),
        (
            "go-vcr/ai-gateway-openai-chat-streaming.yaml",
            [
                ("body.id", "chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp"),
                ("header:x-request-id", "req_cce54d2033034299a777db6f8ce812cf"),
            ],
        ),
        (
            "vcrpy-requests/opentelemetry-python-contrib-vertexai-generate-content.yaml",
            [("body.responseId", "T5akaImrHM2Dm9IPlu_Z0QI")],
        ),
        (
            "gemini-stream/openinference-langchain-vertex-gemini-streaming.yaml",
            [("body.responseId", "neNFaaLJOd68gLUP2eiwkQE")],
        ),
        (
            "vcrpy-requests/openinference-bedrock-claude-invoke-model.yaml",
            [
                ("body.id", "msg_bdrk_01XwpES7uwPrhtHvHZsW2zCr"),
                ("header:x-amzn-requestid", "90d78b28-0041-4c86-a776-55ac9e8cddc6"),
            ],
        ),
        # An error response has no body id, but its request id was issued all the same.
        (
            "vcrpy-aiohttp/dd-trace-py-anthropic-messages-401.yaml",
            [("header:request-id", "req_011CVa2kby3oF8B4piMDuD4C")],
        ),
        # A HAR of the chat API: each request's id once.
        (
            "polly/ragged-openai-chat-tool-calling.har",
            [
                ("body.id", "chatcmpl-9YOpvZZR0firRtPJLT1RJyANsQN3g"),
                ("header:x-request-id", "req_3e7342c31f21a8cd10e823a39960d38d"),
            ],
        ),
    ],
)
def test_it_reads_the_ids_a_provider_issued(rel: str, expected: list[tuple[str, str]]) -> None:
    assert _ids(rel) == expected


@pytest.mark.parametrize(
    "rel",
    [
        # Mistral and Ollama bodies carry no prefixed id; Mistral's x-kong-request-id and
        # Cohere's trace header are not on the list.
        "ruby-vcr/ruby_llm-mistral-system-prompt.yml",
        "ollama-ndjson/openllmetry-streaming-chat.yaml",
        "cohere-stream/langchain-cohere-v2-chat-stream.yaml",
        # Agent logs: their interactions are rebuilt by the reader, not sent by a provider.
        "claude-code/hunch-claude-session.jsonl",
        "codex-rollout/scout-codex-session.jsonl",
    ],
)
def test_recordings_without_issued_ids_give_none(rel: str) -> None:
    assert _ids(rel) == []


def _interaction(body: object, headers: list[tuple[str, str]] | None = None) -> ParsedInteraction:
    data = json.dumps(body).encode()
    return ParsedInteraction(
        index=0,
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        response_body=Body(data=data, text=data.decode(), json=body),
        response_headers=headers or [],
    )


@pytest.mark.parametrize(
    "value",
    [
        "chatcmpl-123",  # the documentation's placeholder
        "chatcmpl-abcdefghijklmnop",  # no digit: typed, not issued
        "chatcmpl-1111111111111111",  # too few distinct characters
        "msg_013Zva2CMHLNnXjNJJKqJ2EF",  # Anthropic's documented example
        "chatcmpl-" + "a1b2c3d4e5" * 30,  # longer than any id
        "chatcmpl-C4HqHBe4 xca0k0EzsCnf1t6V3",  # a space: prose, not an id
        "cmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp",  # not a prefix on the list
    ],
)
def test_values_that_do_not_look_issued_are_not_fingerprints(value: str) -> None:
    assert list(response_ids([_interaction({"id": value})])) == []


def test_only_the_listed_headers_count_and_never_a_credential() -> None:
    token = "req_b5d28a41a22c127bf77ef18ffae70449"
    headers = [
        ("Authorization", f"Bearer {token}"),
        ("x-api-key", token),
        ("openai-organization", "org-4b5d28a41a22c127bf77ef18"),
        ("X-Request-Id", token),
    ]
    found = list(response_ids([_interaction({}, headers)]))
    assert [(f.kind, f.value) for f in found] == [("header:x-request-id", token)]


def test_a_hostile_body_yields_few_ids_each_once() -> None:
    # Ids in every field and 20,000 elements: only top-level ids of the first elements count.
    element = {f"f{i}": f"chatcmpl-{i:020d}x" for i in range(100)}
    body = [{**element, "id": f"chatcmpl-A1b2C3d4E5f6G7h8{i:05d}"} for i in range(20_000)]
    found = list(response_ids([_interaction(body)] * 3))
    assert 0 < len(found) <= 50
    assert len({f.value for f in found}) == len(found)
    assert all(len(f.value) <= MAX_VALUE for f in found)
