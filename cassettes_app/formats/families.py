"""The recording families this tool reads: one entry each, for the formats page and the
README table (tests keep the two and the readers in step, and hold a real file of each
family under tests/fixtures/wild/<folder>)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    """One family of recordings: where it comes from, its files, what is read, an example."""

    name: str
    reader: str  # the NAME of the formats module that reads it
    files: str
    reads: str
    example: str
    folders: tuple[str, ...]  # tests/fixtures/wild/<folder> with real files of it


HTTP = "one interaction per HTTP exchange: method, URL, status, headers, bodies"
CALLS = "one interaction per model call, rebuilt in chat shape: messages, tool calls, model, usage"

FAMILIES: tuple[Family, ...] = (
    Family(
        "Cassette task files", "cassette_json", "cassettes/<key>.json",
        "the stored key, model and time; the request and response payloads",
        '{"key": "…", "request": {"model": …, "messages": […]}, "response": {…},\n'
        ' "recorded_at": "…", "model": "…"}',
        (),
    ),
    Family(
        "VCR.py (Python)", "vcr", ".yaml / .yml, or .json (JSON serializer)",
        HTTP + "; requests, httpx, aiohttp (multidict keys), urllib3 and botocore recordings; "
        "gzip and !!binary bodies",
        "interactions:\n- request: {method: POST, uri: https://…, body: '…'}\n"
        "  response: {status: {code: 200}, body: {string: '…'}}",
        ("vcrpy-aiohttp", "vcrpy-httpx", "vcrpy-json", "vcrpy-requests"),
    ),
    Family(
        "Ruby VCR", "vcr", ".yml (http_interactions, recorded_with: VCR 6)",
        HTTP + "; Psych's !binary (base64) bodies",
        "http_interactions:\n- request: {method: post, uri: …, body: {encoding: UTF-8, "
        "string: …}}\n  response: {status: {code: 200}, body: {string: !binary |-\n    ZGF0…}}",
        ("ruby-vcr",),
    ),
    Family(
        "go-vcr (Go)", "vcr", ".yaml, version 1 (go-vcr v1, v2) or version 2 (v3, v4)",
        HTTP + "; proto, content_length and duration kept",
        "---\nversion: 2\ninteractions:\n- request: {method: POST, url: …, body: …}\n"
        "  response: {code: 200, status: 200 OK, body: …}",
        ("go-vcr",),
    ),
    Family(
        "nock (Node)", "nock", ".json: an array of scope objects",
        HTTP + "; rawHeaders pairs, hex-encoded binary responses",
        '[{"scope": "https://api.example.com:443", "method": "POST", "path": "/v1/…",\n'
        '  "body": {…}, "status": 200, "response": {…}, "rawHeaders": […]}]',
        ("nock",),
    ),
    Family(
        "HAR (Chrome, Firefox, Playwright)", "har", ".har: {log: {creator, entries}}",
        HTTP + "; postData, base64 content, status 0 as no response",
        '{"log": {"creator": {"name": "WebInspector"}, "entries": [{"request": {…},\n'
        '  "response": {"status": 200, "content": {"text": "…"}}}]}}',
        ("har-chrome", "har-firefox", "har-playwright"),
    ),
    Family(
        "Polly.JS", "har", "recording.har (HAR with _recordingName, _id, _order)",
        HTTP + "; the recording's name",
        '{"log": {"_recordingName": "…", "creator": {"name": "Polly.JS"}, "entries": […]}}',
        ("polly",),
    ),
    Family(
        "HTTP captures", "http_exchange", ".json: {request: {method, url, …}, response: {…}}",
        HTTP,
        '{"request": {"method": "POST", "url": "…", "body": {…}},\n'
        ' "response": {"status_code": 200, "body": {…}}}',
        (),
    ),
    Family(
        "OpenTelemetry GenAI spans", "otel_spans",
        "OTLP JSON (resourceSpans, Tempo batches), span JSON, JSON Lines",
        CALLS + "; gen_ai.input/output.messages, gen_ai.prompt.N.*, span events, Vercel AI "
        "SDK attributes; other spans counted",
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "chat gpt-4o",\n'
        '  "attributes": [{"key": "gen_ai.request.model", "value": {"stringValue": …}}]}]}]}]}',
        ("otel-genai",),
    ),
    Family(
        "OpenInference (Phoenix)", "otel_spans", "span JSON with llm.* attributes",
        CALLS + "; llm.input_messages.N.message.*, llm.token_count.*",
        '{"openinference.span.kind": "LLM", "llm.model_name": "…",\n'
        ' "llm.input_messages.0.message.role": "user", …}',
        ("openinference",),
    ),
    Family(
        "LangSmith runs", "langsmith", "run exports, {post, patch} batches, child_runs trees",
        CALLS + "; runs merged by id, llm runs only",
        '{"post": [{"id": "…", "run_type": "llm", "inputs": {"messages": […]}}],\n'
        ' "patch": [{"id": "…", "outputs": {"choices": […]}}]}',
        ("langsmith",),
    ),
    Family(
        "Langfuse traces", "langfuse", "{trace, observations} exports",
        CALLS + "; GENERATION observations, inputs stored as JSON text",
        '{"trace": {…}, "observations": [{"type": "GENERATION", "model": "…",\n'
        '  "input": …, "output": …, "usageDetails": {…}}]}',
        ("langfuse",),
    ),
    Family(
        "OpenAI Agents SDK traces", "openai_agents", "trace with spans, or trace.span records",
        CALLS + "; generation and response spans, tools and handoffs counted",
        '{"object": "trace", "spans": [{"object": "trace.span", "span_data":\n'
        '  {"type": "generation", "model": "…", "input": […], "output": […]}}]}',
        ("openai-agents",),
    ),
    Family(
        "inspect_ai eval logs", "inspect_log", ".json logs and zipped .eval logs",
        CALLS + "; each sample's model events, else its messages",
        '{"version": 2, "eval": {"model": "…"}, "samples": [{"messages": […],\n'
        '  "events": [{"event": "model", "input": […], "output": {…}}]}]}',
        ("inspect-ai",),
    ),
    Family(
        "Claude Code transcripts", "agent_log", "~/.claude/projects/…/<session>.jsonl",
        CALLS + "; each run of assistant lines one call; bookkeeping lines noted once",
        '{"type": "assistant", "parentUuid": "…", "sessionId": "…",\n'
        ' "message": {"model": "…", "content": [{"type": "tool_use", …}]}}',
        ("claude-code",),
    ),
    Family(
        "Agent SDK message streams", "agent_log",
        "claude -p --output-format stream-json output: JSON Lines or one array",
        CALLS + "; init and result lines noted",
        '{"type": "system", "subtype": "init", "session_id": "…"}\n'
        '{"type": "assistant", "message": {…}, "session_id": "…"}',
        ("sdk-stdio",),
    ),
    Family(
        "Codex CLI rollouts", "agent_log", "~/.codex/sessions/…/rollout-*.jsonl",
        CALLS + "; function and custom tool calls with their outputs; model from turn_context",
        '{"type": "response_item", "payload": {"type": "function_call", "name": "shell",\n'
        '  "arguments": "…", "call_id": "…"}}',
        ("codex-rollout",),
    ),
    Family(
        "Chat-message logs", "agent_log",
        "JSON Lines of chat messages or {request, response} pairs",
        CALLS + "; OpenAI, Anthropic and Gemini message shapes",
        '{"role": "user", "content": "…"}\n{"role": "assistant", "tool_calls": […]}',
        (),
    ),
    Family(
        "Explorer-style traces", "explorer_trace",
        "JSON Lines, one conversation a line (an array, or under messages)",
        CALLS + "; each conversation on its own",
        '{"metadata": {…}}\n[{"role": "user", "content": "…"}, {"role": "assistant", …}]',
        ("explorer-traces",),
    ),
    Family(
        "Ledgers", "ledger", "JSON Lines of model calls, cache hits and fallbacks",
        "each entry's event and input key, for ledger.consistent",
        '{"event": "model_call", "line_sha": "…", "attempt": 1}\n'
        '{"event": "fallback", "reason": "timeout"}',
        (),
    ),
    Family(
        "Shop-stub traces", "trace", "JSON Lines, one HTTP hop a line",
        "url, method, status, trace and idempotency ids, request and response",
        '{"url": "http://shop/orders", "method": "POST", "status": 201, "trace_id": "…"}',
        (),
    ),
    Family(
        "Run-twice fixtures", "fixture_json", ".json objects (or lists) with text",
        "one interaction per fixture: text, response, model",
        '{"text": "…", "response": {…}, "model": "…"}',
        (),
    ),
)  # fmt: skip

STREAMS = (
    ("SSE", "OpenAI chat and Responses, Anthropic, Gemini (alt=sse), Mistral, Cohere v2"),
    ("NDJSON", "Ollama, Cohere v1"),
    ("JSON array", "Gemini streamGenerateContent"),
    ("AWS event stream", "Bedrock converse-stream and invoke-with-response-stream"),
)


def markdown_table() -> str:
    """The README's table of families (a test keeps README.md equal to it)."""
    rows = ["| Family | Files | What is read |", "| --- | --- | --- |"]
    for family in FAMILIES:
        cells = (f"{family.name} (`{family.reader}`)", family.files, family.reads)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rows += ["", "| Stream | Providers |", "| --- | --- |"]
    rows += [f"| {kind} | {providers} |" for kind, providers in STREAMS]
    return "\n".join(rows) + "\n"
