"""Real recordings committed to public projects (tests/fixtures/wild/SOURCES.md), read right.

Each file is byte for byte what its project committed; the expectations are what a reader
of the file sees in it (interactions, statuses, the model), or, for a family this tool does
not read yet, an `unknown_format` that names the family instead of a silent misreading.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from cassettes_app.analysis.turns import body_payload
from cassettes_app.checks.ledger import ledger_consistent
from cassettes_app.formats import parse_file
from cassettes_app.providers import normalise
from tests.paths import ROOT

WILD = ROOT / "tests" / "fixtures" / "wild"

READ = [
    # (file, format, [(method, status, url prefix)], model)
    ("ruby-vcr/ruby-openai-deepseek-streamed-chat.yml", "vcr",
     [("POST", 200, "https://api.deepseek.com/v1/chat/completions")], "deepseek-chat"),
    ("ruby-vcr/ruby_llm-mistral-system-prompt.yml", "vcr",
     [("POST", 200, "https://api.mistral.ai/v1/chat/completions")], "mistral-small-latest"),
    ("vcrpy-aiohttp/dd-apm-test-agent-openai-chat-completion.yaml", "vcr",
     [("POST", 200, "https://api.openai.com/v1/chat/completions")], "gpt-3.5-turbo-0125"),
    ("vcrpy-aiohttp/dd-trace-py-anthropic-messages-401.yaml", "vcr",
     [("POST", 401, "https://api.anthropic.com/v1/messages")], "claude-3-7-sonnet-20250219"),
    ("go-vcr/fantasy-anthropic-simple-streaming.yaml", "vcr",
     [("POST", 200, "https://api.anthropic.com/v1/messages")], "claude-sonnet-4-20250514"),
    ("go-vcr/ai-gateway-openai-chat-streaming.yaml", "vcr",
     [("POST", 200, "https://api.openai.com/v1/chat/completions")], "gpt-5-nano-2025-08-07"),
    ("ollama-ndjson/openllmetry-streaming-chat.yaml", "vcr",
     [("POST", 200, "http://127.0.0.1:11434/api/chat")], "llama3"),
    ("ollama-ndjson/openllmetry-streaming-generate.yaml", "vcr",
     [("POST", 200, "http://127.0.0.1:11434/api/generate")], "llama3"),
    ("nock/mtx-tool-cf-apps-list.json", "nock",
     [("GET", 200, "https://api.cf.sap.hana.ondemand.com:443/v3/apps?space_guids=")], None),
    ("nock/mux-node-sdk-assets-get-playback-id.json", "nock",
     [("POST", 201, "https://api.mux.com:443/video/v1/assets"),
      ("POST", 201, "https://api.mux.com:443/video/v1/assets/"),
      ("GET", 200, "https://api.mux.com:443/video/v1/assets/"),
      ("DELETE", 204, "https://api.mux.com:443/video/v1/assets/")], None),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "fmt", "exchanges", "model"), READ, ids=[r[0] for r in READ])
def test_a_real_recording_is_read_exchange_by_exchange(rel, fmt, exchanges, model) -> None:
    result = parse_file(rel, (WILD / rel).read_bytes())
    assert result.format == fmt
    assert [f for f in result.findings if f.severity == "error"] == []
    (recording,) = result.recordings
    got = [(i.method, i.status, i.url or "") for i in recording.interactions]
    assert len(got) == len(exchanges)
    for (method, status, url), (want_method, want_status, prefix) in zip(
        got, exchanges, strict=True
    ):
        assert (method, status) == (want_method, want_status) and url.startswith(prefix)
    assert recording.model == model
    # JSON responses are parsed, not left as opaque text (the Psych !binary ones too).
    assert any(i.response_body.json is not None for i in recording.interactions)


def test_the_ruby_binary_stream_is_the_recorded_sse_text() -> None:
    rel = "ruby-vcr/ruby-openai-deepseek-streamed-chat.yml"
    (interaction,) = parse_file(rel, (WILD / rel).read_bytes()).recordings[0].interactions
    assert interaction.response_body.text.startswith("data: {")


def test_an_ollama_ndjson_stream_is_folded_into_the_whole_answer() -> None:
    chat = "ollama-ndjson/openllmetry-streaming-chat.yaml"
    (i,) = parse_file(chat, (WILD / chat).read_bytes()).recordings[0].interactions
    answer = i.response_body.json
    assert answer["done"] is True and answer["done_reason"] == "stop"
    assert answer["message"]["content"].startswith("Why did the OpenTelemetry agent go to therapy?")
    assert answer["message"]["content"].endswith("smile to your face!)")
    generate = "ollama-ndjson/openllmetry-streaming-generate.yaml"
    (i,) = parse_file(generate, (WILD / generate).read_bytes()).recordings[0].interactions
    assert i.response_body.json["response"].startswith("A joke about OpenTelemetry!")


def test_an_ndjson_stream_cut_before_its_end_says_so() -> None:
    from cassettes_app.bodies import decode_body

    rel = "ollama-ndjson/openllmetry-streaming-chat.yaml"
    (i,) = parse_file(rel, (WILD / rel).read_bytes()).recordings[0].interactions
    lines = i.response_body.text.splitlines()
    cut = "\n".join(lines[: len(lines) // 2]) + "\n"
    body = decode_body(cut, [("content-type", "application/x-ndjson")])
    assert body.json["done"] is False and body.json["message"]["content"]
    assert any("done: true" in p for p in body.problems)


TRANSCRIPTS = [
    # (file, messages, assistant messages, tool calls, model calls, provider, model)
    ("claude-code/claude-code-viewer-init-session.jsonl", 29, 15, 12, 7, "anthropic",
     "claude-sonnet-4-20250514"),
    ("claude-code/hunch-claude-session.jsonl", 8, 4, 2, 2, "anthropic", "claude-opus-4-6"),
    ("codex-rollout/scout-codex-session.jsonl", 34, 19, 12, 8, "openai-chat", "gpt-5.5"),
    ("codex-rollout/codex-session-view-rollout-2025-11-17.jsonl", 80, 39, 39, 39,
     "openai-chat", "gpt-5.1-codex"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rel", "messages", "assistant", "calls", "model_calls", "provider", "model"), TRANSCRIPTS
)
def test_an_agent_transcript_is_read_message_by_message(
    rel, messages, assistant, calls, model_calls, provider, model
) -> None:
    data = (WILD / rel).read_bytes()
    result = parse_file(rel, data)
    assert result.format == "agent_log" and result.ledger == []
    assert len(result.messages) == messages
    assert sum(m.role == "assistant" for m in result.messages) == assistant
    assert sum(len(m.tool_calls) for m in result.messages) == calls
    # Turns: one per model call (a run of assistant lines), in the provider's own shape.
    (recording,) = result.recordings
    assert len(recording.interactions) == model_calls and recording.model == model
    exchanges = [
        normalise(body_payload(i.request_body), body_payload(i.response_body), i.url)
        for i in recording.interactions
    ]
    assert {e.provider for e in exchanges} == {provider}
    assert sum(len(e.response.tool_calls) for e in exchanges) == calls
    assert all(i.recorded_at for i in recording.interactions)
    # Its bookkeeping lines are noted once, never a warning per line.
    assert [f for f in result.findings if f.severity != "info"] == []
    forced = parse_file(rel, data, format_hint="ledger")
    assert ledger_consistent(forced.ledger, rel).status != "pass"


def test_codex_tool_calls_keep_their_arguments_and_outputs_their_call() -> None:
    rel = "codex-rollout/codex-session-view-rollout-2025-11-17.jsonl"
    result = parse_file(rel, (WILD / rel).read_bytes())
    calls = [c for m in result.messages for c in m.tool_calls]
    assert calls[0].name == "shell" and calls[0].arguments["command"] == ["bash", "-lc", "ls"]
    outputs = {m.tool_call_id for m in result.messages if m.role == "tool"}
    assert {c.id for c in calls} == outputs  # every call answered by its output


def test_every_wild_file_is_listed_with_its_provenance() -> None:
    sources = (WILD / "SOURCES.md").read_text(encoding="utf-8")
    listed = set(
        re.findall(r"^\| ([\w./-]+) \| [\w.-]+/[\w.-]+ \| \S+ \| [0-9a-f]{40} \|", sources, re.M)
    )
    files = {
        str(p.relative_to(WILD)) for p in WILD.rglob("*") if p.is_file() and p.name != "SOURCES.md"
    }
    assert files == listed


FAMILIES = [
    # (file, reader, interactions, providers, model, an answer's start, tool calls asked for)
    # Expected values were counted from the files by a separate script (json/yaml only).
    ("bedrock-eventstream/opentelemetry-python-contrib-invoke-model-stream-claude.yaml", "vcr",
     1, {"anthropic"}, "claude-2.0", "Okay, I will repeat: This is a test", []),
    ("bedrock-eventstream/pydantic-ai-bedrock-converse-stream.yaml", "vcr", 1,
     {"bedrock-converse"}, "us.amazon.nova-micro-v1:0", "The capital of France is Paris.", []),
    ("cohere-stream/langchain-cohere-v1-chat-stream.yaml", "vcr", 1, {"cohere"}, None,
     "Oh, hello there, Pickle Rick!", []),
    ("cohere-stream/langchain-cohere-v2-chat-stream.yaml", "vcr", 1, {"cohere"}, "command-r",
     "Hi there! You're Pickle Rick?", []),
    ("gemini-stream/openinference-langchain-vertex-gemini-streaming.yaml", "vcr", 1, {"gemini"},
     "gemini-2.5-flash", "I told my wife she was drawing her eyebrows too high.", []),
    ("go-vcr/cagent-mistral-exec-streaming.yaml", "vcr", 1, {"openai-chat"}, "mistral-small",
     "The sum of 2 + 2 is 4.", []),
    ("go-vcr/genai-cohere-genstream-text.yaml", "vcr", 1, {"cohere"}, "command-r7b-12-2024",
     "Hello.", []),
    # go-vcr v2.3.0 writes version 1 (request url/form, response status text and code).
    ("go-vcr/hex-anthropic-message-with-image.yaml", "vcr", 1, {"anthropic"},
     "claude-sonnet-4-5-20250929", "This appears to be an almost entirely blank", []),
    ("go-vcr/ollama-go-generate-completion.yaml", "vcr", 1, {"ollama"}, "llama3.1",
     "Hello! It's nice to meet you.", []),
    ("vcrpy-json/gspread-access-private-spreadsheet.json", "vcr", 4, {"unknown"}, None, None,
     []),
    ("vcrpy-json/pydrag-artist-get-correction.json", "vcr", 1, {"unknown"}, None, None, []),
    ("mistral-stream/openinference-mistralai-sync-streaming.yaml", "vcr", 1, {"openai-chat"},
     "mistral-small-latest", "France won World Cup", []),
    ("ruby-vcr/langchainrb-ollama-chat-streaming.yml", "vcr", 1, {"ollama"}, "llama3.2",
     "I'm just a language model, so I don't have emotions", []),
    ("vcrpy-httpx/mirascope-anthropic-call-with-params.yaml", "vcr", 1, {"anthropic"},
     "claude-sonnet-4-20250514", "4200 + 42 = ", []),
    ("vcrpy-httpx/openinference-portkey-chat-completion.yaml", "vcr", 1, {"openai-chat"},
     "gpt-4o-mini-2024-07-18", "I don't have real-time data access", []),
    ("vcrpy-requests/openinference-bedrock-claude-invoke-model.yaml", "vcr", 1, {"anthropic"},
     "claude-3-haiku-20240307", "Sure, I'd be happy to explain large language models", []),
    ("vcrpy-requests/opentelemetry-python-contrib-vertexai-generate-content.yaml", "vcr", 1,
     {"gemini"}, "gemini-2.5-pro", "This is a test.", []),
    ("har-chrome/pagexray-chrome-run-sitespeed-io.har", "har", 10, {"unknown"}, None, None, []),
    ("har-chrome/perfcascade-chrome-h2-nghttp2.har", "har", 11, {"unknown"}, None, None, []),
    ("har-firefox/mitmproxy-firefox-mitmproxy-org.har", "har", 14, {"unknown"}, None, None, []),
    ("har-firefox/perfcascade-firefox-nghttp2.har", "har", 10, {"unknown"}, None, None, []),
    ("har-playwright/playwright-har-fulfill.har", "har", 5, {"unknown"}, None, None, []),
    ("har-playwright/playwright-har-redirect.har", "har", 3, {"unknown"}, None, None, []),
    ("har-playwright/temporal-ui-with-schedules.har", "har", 5, {"unknown"}, None, None, []),
    ("polly/pollyjs-jest-node-fetch-should-return-post.har", "har", 1, {"unknown"}, None, None,
     []),
    ("polly/ragged-openai-assistants-can-chat.har", "har", 7, {"unknown"}, "gpt-3.5-turbo", None,
     []),
    ("polly/ragged-openai-chat-tool-calling.har", "har", 1, {"openai-chat"},
     "gpt-3.5-turbo-0125", None, ["todays-news"]),
    ("otel-genai/agentevals-tempo-export-with-batches.json", "otel_spans", 6, {"openai-chat"},
     "gpt-4.1-mini", "There are two Helm releases", ["helm_list_releases"]),
    ("otel-genai/any-agent-openai-trace.json", "otel_spans", 3, {"openai-chat"},
     "mistral/mistral-small-latest", '{"steps": [', ["get_current_time", "write_file"]),
    ("otel-genai/langwatch-dogfood-claude-code-otlp.json", "otel_spans", 1, {"openai-chat"},
     "claude-sonnet-4.6", None, []),
    ("otel-genai/openinference-vercel-ai-generatetext-dogenerate.json", "otel_spans", 2,
     {"openai-chat"}, "gpt-4o-mini-2024-07-18", "Lines of code align,", []),
    ("openinference/openinference-genai-client-span-tool-calls.json", "otel_spans", 1,
     {"openai-chat"}, "gpt-4-0613", "The weather in Paris is currently rainy", []),
    ("openinference/phoenix-pxi-turn-trace.json", "otel_spans", 9, {"openai-chat"},
     "claude-fable-5", None,
     ["list_datasets", "list_datasets", "ask_user", "create_dataset"]),
    ("langsmith/langsmith-sdk-js-wrap-openai-default.json", "langsmith", 1, {"openai-chat"},
     "gpt-4o-mini-2024-07-18", "Howdy! How can I assist you today?", []),
    ("langsmith/langsmith-sdk-py-wrap-openai.json", "langsmith", 1, {"openai-chat"},
     "gpt-4o-mini-2024-07-18", "Howdy! How can I assist you today?", []),
    ("langfuse/langfuse-chatml-vercel-aisdk-2025-11-17.trace.json", "langfuse", 2,
     {"openai-chat"}, "gpt-5", None, ["getWeather", "getWeather"]),
    ("langfuse/langfuse-seeder-google-adk-2025-08-28.json", "langfuse", 2, {"openai-chat"},
     "gemini-2.0-flash", "Hello Langfuse", ["say_hello"]),
    ("inspect-ai/inspect-ai-analysis-popularity.json", "inspect_log", 3, {"openai-chat"},
     "gpt-4o-mini-2024-07-18", "Yes", []),
    ("inspect-ai/inspect-ai-log-formats.json", "inspect_log", 1, {"openai-chat"}, "llama3.1",
     "No", []),
    ("inspect-ai/inspect-ai-scorer-popularity.eval", "inspect_log", 10, {"openai-chat"},
     "gpt-4o-mini-2024-07-18", "Yes", []),
    ("inspect-ai/inspect-scout-websearch-addition-problem.eval", "inspect_log", 1,
     {"openai-chat"}, "claude-sonnet-4-5-20250929", "1 + 1 = 2", []),
    ("explorer-traces/agent-trajectory-vault-trajectories.jsonl", "explorer_trace", 3,
     {"openai-chat"}, None, "I will inspect the tests first.", []),
    ("explorer-traces/invariant-explorer-webarena.jsonl", "explorer_trace", 9, {"openai-chat"},
     None, "The objective is to find", ["stop", "stop", "click", "click"]),
    ("sdk-stdio/agent-stream-fmt-claude-code-stream.jsonl", "agent_log", 2, {"anthropic"},
     "claude-opus-4-20250514", "I'll create a hello world function", ["Write"]),
    ("sdk-stdio/claude-code-action-sample-turns.json", "agent_log", 4, {"anthropic"},
     "claude-test-model", "I'll help you with this task.",
     ["Read", "Edit", "mcp__github__add_pull_request_review_comment"]),
    ("openai-agents/counterfact-minimal.json", "openai_agents", 1, {"openai-chat"},
     "gpt-5-mini", None, []),
    ("openai-agents/counterfact-with-handoff.json", "openai_agents", 1, {"openai-chat"}, "gpt-5",
     None, []),
]  # fmt: skip


def _exchanges(recording):
    return [
        normalise(body_payload(i.request_body), body_payload(i.response_body), i.url)
        for i in recording.interactions
    ]


@pytest.mark.parametrize(
    ("rel", "fmt", "count", "providers", "model", "answer", "tools"),
    FAMILIES,
    ids=[f[0] for f in FAMILIES],
)
def test_a_real_file_of_every_family_gives_its_calls_and_turns(
    rel, fmt, count, providers, model, answer, tools
) -> None:
    result = parse_file(rel, (WILD / rel).read_bytes())
    assert result.format == fmt
    assert [f.message for f in result.findings if f.severity == "error"] == []
    (recording,) = result.recordings
    assert len(recording.interactions) == count
    assert recording.model == model
    exchanges = _exchanges(recording)
    assert {e.provider for e in exchanges} == providers
    texts = [e.response.text for e in exchanges if e.response and e.response.text]
    if answer is not None:
        assert any(t.startswith(answer) for t in texts), texts[:3]
    called = [c.name for e in exchanges if e.response for c in e.response.tool_calls]
    assert called[: len(tools)] == tools
    assert all(not e.problems for e in exchanges if e.provider != "unknown")


def test_every_wild_file_has_its_expectations() -> None:
    files = {
        str(p.relative_to(WILD)) for p in WILD.rglob("*") if p.is_file() and p.name != "SOURCES.md"
    }
    expected = {r[0] for r in READ} | {t[0] for t in TRANSCRIPTS} | {f[0] for f in FAMILIES}
    assert files == expected


def test_the_corpus_is_wide() -> None:
    sources = (WILD / "SOURCES.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\w./-]+) \| ([\w.-]+/[\w.-]+) \|", sources, re.M)
    assert len(rows) >= 40
    assert len({repo for _, repo in rows}) >= 25
    assert len({rel.split("/")[0] for rel, _ in rows}) >= 20  # families


CUT = [r[0] for r in READ] + [t[0] for t in TRANSCRIPTS] + [f[0] for f in FAMILIES]


@pytest.mark.parametrize("rel", CUT)
def test_a_cut_off_real_file_is_a_finding_that_says_where_it_broke(rel: str) -> None:
    data = (WILD / rel).read_bytes()
    cut = data[: len(data) * 2 // 3]
    result = parse_file(rel, cut)
    problems = [f for f in result.findings if f.severity in ("error", "warn")]
    assert problems, hashlib.sha256(cut).hexdigest()
    # Where: a line of the file, or the interaction (and side) the break fell in.
    assert any(f.line or re.search(r"(interaction|entry|byte) \d+", f.message) for f in problems)


def test_vcrpy_json_keeps_each_exchange_in_order() -> None:
    rel = "vcrpy-json/gspread-access-private-spreadsheet.json"
    (recording,) = parse_file(rel, (WILD / rel).read_bytes()).recordings
    got = [(i.method, i.status) for i in recording.interactions]
    assert got == [("POST", 200), ("GET", 200), ("DELETE", 204), ("GET", 403)]
    assert recording.interactions[2].response_body.text in ("", None)
