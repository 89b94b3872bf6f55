"""Tests for cassettes_app.providers: provider detection and normalisation."""

from __future__ import annotations

import json

import pytest

from cassettes_app.providers import Exchange, detect_provider, normalise

# --------------------------------------------------------------------------- OpenAI chat

CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Create an order in the shop.",
            "parameters": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
        },
    }
]

CHAT_REQUEST = {
    "model": "gpt-4o-mini",
    "temperature": 0,
    "tools": CHAT_TOOLS,
    "messages": [
        {"role": "system", "content": "You are a shop assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Order two mugs,"},
                {"type": "text", "text": "and a teapot."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "create_order", "arguments": '{"sku": "MUG-1", "qty": 2}'},
                },
                {
                    "id": "call_def",
                    "type": "function",
                    "function": {"name": "create_order", "arguments": {"sku": "TEA-9", "qty": 1}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"id": "ord_1a", "status": 201}'},
        {
            "role": "tool",
            "tool_call_id": "call_def",
            "content": [{"type": "text", "text": '{"id": "ord_2b", "status": 201}'}],
        },
    ],
}

CHAT_RESPONSE = {
    "id": "chatcmpl-9xyz",
    "object": "chat.completion",
    "created": 1718000000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Both orders are placed: ord_1a and ord_2b.",
                "refusal": None,
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 210, "completion_tokens": 14, "total_tokens": 224},
    "system_fingerprint": "fp_123",
}


def test_openai_chat_full_exchange() -> None:
    ex = normalise(CHAT_REQUEST, CHAT_RESPONSE, "https://api.openai.com/v1/chat/completions")
    assert ex.provider == "openai-chat"
    assert ex.model == "gpt-4o-mini-2024-07-18"
    assert [m.role for m in ex.request_messages] == ["system", "user", "assistant", "tool", "tool"]
    assert ex.request_messages[0].text == "You are a shop assistant."
    assert ex.request_messages[1].text == "Order two mugs,\nand a teapot.\n[image_url]"
    calls = ex.request_messages[2].tool_calls
    assert [(c.id, c.name, c.arguments, c.arguments_valid) for c in calls] == [
        ("call_abc", "create_order", {"sku": "MUG-1", "qty": 2}, True),
        ("call_def", "create_order", {"sku": "TEA-9", "qty": 1}, True),
    ]
    assert calls[0].arguments_raw == '{"sku": "MUG-1", "qty": 2}'
    assert calls[1].arguments_raw is None
    result = ex.request_messages[4].tool_results[0]
    assert (result.tool_call_id, result.content) == ("call_def", '{"id": "ord_2b", "status": 201}')
    assert ex.response is not None
    assert ex.response.role == "assistant"
    assert ex.response.text == "Both orders are placed: ord_1a and ord_2b."
    assert ex.stop_reason == "stop"
    assert ex.usage == {"input_tokens": 210, "output_tokens": 14, "total_tokens": 224}
    assert ex.raw_request is CHAT_REQUEST
    assert ex.raw_response is CHAT_RESPONSE
    assert ex.problems == []


def test_openai_chat_response_tool_call_with_invalid_json_arguments() -> None:
    response = {
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "create_order",
                                "arguments": '{"sku": "MUG-1", "qty": ',
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9},
    }
    ex = normalise(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}, response
    )
    call = ex.response.tool_calls[0]
    assert call.arguments_valid is False
    assert call.arguments == '{"sku": "MUG-1", "qty": '
    assert call.arguments_raw == '{"sku": "MUG-1", "qty": '
    assert ex.stop_reason == "tool_calls"
    assert ex.usage == {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59}


def test_openai_chat_legacy_function_call_and_function_role() -> None:
    request = {
        "model": "gpt-3.5-turbo-0613",
        "functions": [{"name": "get_weather", "parameters": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {"role": "function", "name": "get_weather", "content": '{"temp_c": 4}'},
        ],
    }
    response = {
        "object": "chat.completion",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
                },
                "finish_reason": "function_call",
            }
        ],
    }
    ex = normalise(request, response)
    assert ex.provider == "openai-chat"
    assert ex.model == "gpt-3.5-turbo-0613"
    legacy = ex.request_messages[1].tool_calls[0]
    assert (legacy.id, legacy.name, legacy.arguments) == (None, "get_weather", {"city": "Oslo"})
    fn_result = ex.request_messages[2]
    assert fn_result.role == "tool"
    assert fn_result.tool_results[0].name == "get_weather"
    assert fn_result.tool_results[0].content == '{"temp_c": 4}'
    assert ex.response.tool_calls[0].arguments == {"city": "Bergen"}


def test_openai_chat_streamed_chunks_as_sse_text() -> None:
    chunks = [
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": "Hel"}}],
        },
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": "lo"}}],
        },
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_9",
                                "function": {"name": "lookup", "arguments": '{"q":'},
                            }
                        ]
                    },
                }
            ],
        },
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ' "tea"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
        {
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        },
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    ex = normalise(
        json.dumps(
            {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        ),
        body.encode(),
    )
    assert ex.provider == "openai-chat"
    assert ex.response.text == "Hello"
    assert ex.response.tool_calls[0].arguments == {"q": "tea"}
    assert ex.response.tool_calls[0].id == "call_9"
    assert ex.stop_reason == "tool_calls"
    assert ex.usage["total_tokens"] == 12


def test_openai_chat_error_response_keeps_request() -> None:
    error = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    ex = normalise(CHAT_REQUEST, error)
    assert ex.provider == "openai-chat"
    assert ex.response is None
    assert len(ex.request_messages) == 5
    assert ex.problems == ["provider error: Rate limit reached"]


def test_request_only_exchange() -> None:
    ex = normalise(CHAT_REQUEST, None)
    assert ex.provider == "openai-chat"
    assert ex.response is None
    assert ex.model == "gpt-4o-mini"
    assert ex.usage == {}


# --------------------------------------------------------------------------- OpenAI Responses

RESPONSES_REQUEST = {
    "model": "gpt-4.1-mini",
    "instructions": "Triage the ticket. Use tools when needed.",
    "tools": [{"type": "function", "name": "lookup_customer", "parameters": {"type": "object"}}],
    "input": [
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "Ticket #42: printer on fire"}],
        },
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_A",
            "name": "lookup_customer",
            "arguments": '{"ticket": 42}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_A", "output": '{"tier": "gold"}'},
    ],
}

RESPONSES_RESPONSE = {
    "id": "resp_123",
    "object": "response",
    "status": "completed",
    "model": "gpt-4.1-mini-2025-04-14",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Escalating to the gold queue.", "annotations": []}
            ],
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_B",
            "name": "escalate",
            "arguments": '{"queue": "gold", "priority": 1}',
            "status": "completed",
        },
    ],
    "usage": {"input_tokens": 320, "output_tokens": 41, "total_tokens": 361},
}


def test_openai_responses_full_exchange() -> None:
    ex = normalise(RESPONSES_REQUEST, RESPONSES_RESPONSE, "https://api.openai.com/v1/responses")
    assert ex.provider == "openai-responses"
    assert ex.model == "gpt-4.1-mini-2025-04-14"
    assert [m.role for m in ex.request_messages] == ["system", "user", "assistant", "tool"]
    assert ex.request_messages[0].text == "Triage the ticket. Use tools when needed."
    assert ex.request_messages[1].text == "Ticket #42: printer on fire"
    call = ex.request_messages[2].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_A", "lookup_customer", {"ticket": 42})
    result = ex.request_messages[3].tool_results[0]
    assert (result.tool_call_id, result.content) == ("call_A", '{"tier": "gold"}')
    assert ex.response.text == "Escalating to the gold queue."
    assert ex.response.tool_calls[0].name == "escalate"
    assert ex.response.tool_calls[0].arguments == {"queue": "gold", "priority": 1}
    assert ex.usage == {"input_tokens": 320, "output_tokens": 41, "total_tokens": 361}
    assert ex.stop_reason == "completed"


def test_openai_responses_string_input_and_url_detection() -> None:
    request = {"model": "gpt-4.1", "input": "Say hi"}
    assert (
        detect_provider(request, None, "https://api.openai.com/v1/responses") == "openai-responses"
    )
    ex = normalise(request, None)
    assert ex.provider == "openai-responses"
    assert [(m.role, m.text) for m in ex.request_messages] == [("user", "Say hi")]


def test_openai_responses_streaming_events() -> None:
    events = [
        {
            "type": "response.created",
            "response": {"id": "resp_1", "status": "in_progress", "output": []},
        },
        {"type": "response.output_text.delta", "delta": "Hi"},
        {"type": "response.completed", "response": {**RESPONSES_RESPONSE, "id": "resp_1"}},
    ]
    ex = normalise(RESPONSES_REQUEST, events)
    assert ex.provider == "openai-responses"
    assert ex.response.text == "Escalating to the gold queue."


def test_embeddings_request_is_unknown() -> None:
    request = {"model": "text-embedding-3-small", "input": "hello"}
    response = {"object": "list", "data": [{"object": "embedding", "embedding": [0.1]}]}
    ex = normalise(request, response)
    assert ex.provider == "unknown"
    assert ex.raw_request is request
    assert ex.model == "text-embedding-3-small"


# --------------------------------------------------------------------------- Anthropic

ANTHROPIC_REQUEST = {
    "model": "claude-3-5-sonnet-20241022",
    "max_tokens": 1024,
    "system": [
        {"type": "text", "text": "You triage tickets.", "cache_control": {"type": "ephemeral"}}
    ],
    "tools": [{"name": "create_order", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Order 3 mugs please."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants mugs.", "signature": "sig"},
                {"type": "text", "text": "Placing the order."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "create_order",
                    "input": {"sku": "MUG-1", "qty": 3},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": [{"type": "text", "text": '{"error": "out of stock"}'}],
                    "is_error": True,
                }
            ],
        },
    ],
}

ANTHROPIC_RESPONSE = {
    "id": "msg_01XYZ",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-sonnet-20241022",
    "content": [
        {"type": "text", "text": "Mugs are out of stock; trying the large size."},
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "create_order",
            "input": {"sku": "MUG-L", "qty": 3},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 480, "output_tokens": 62, "cache_read_input_tokens": 0},
}


def test_anthropic_full_exchange() -> None:
    ex = normalise(ANTHROPIC_REQUEST, ANTHROPIC_RESPONSE, "https://api.anthropic.com/v1/messages")
    assert ex.provider == "anthropic"
    assert ex.model == "claude-3-5-sonnet-20241022"
    assert [m.role for m in ex.request_messages] == ["system", "user", "assistant", "tool"]
    assert ex.request_messages[0].text == "You triage tickets."
    assistant = ex.request_messages[2]
    assert assistant.text == "Placing the order."  # thinking is not conversation text
    assert assistant.tool_calls[0].arguments == {"sku": "MUG-1", "qty": 3}
    assert assistant.tool_calls[0].id == "toolu_01"
    result = ex.request_messages[3].tool_results[0]
    assert (result.tool_call_id, result.content, result.is_error) == (
        "toolu_01",
        '{"error": "out of stock"}',
        True,
    )
    assert ex.response.text == "Mugs are out of stock; trying the large size."
    assert ex.response.tool_calls[0].name == "create_order"
    assert ex.stop_reason == "tool_use"
    assert ex.usage == {"input_tokens": 480, "output_tokens": 62, "total_tokens": 542}


def test_anthropic_user_text_with_tool_result_stays_user() -> None:
    request = {
        "model": "claude-3-haiku-20240307",
        "max_tokens": 100,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_9", "content": "42"},
                    {"type": "text", "text": "Now summarise."},
                ],
            }
        ],
    }
    ex = normalise(request, None)
    assert ex.provider == "anthropic"
    msg = ex.request_messages[0]
    assert (msg.role, msg.text, msg.tool_results[0].content) == ("user", "Now summarise.", "42")


def test_anthropic_streaming_events() -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-3-5-haiku-20241022",
                "content": [],
                "usage": {"input_tokens": 25, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Let me "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "check."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_5",
                "name": "get_order",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"id": "or'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'd_7"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    ex = normalise(
        {
            "model": "claude-3-5-haiku-20241022",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "where is ord_7"}],
        },
        sse,
    )
    assert ex.provider == "anthropic"
    assert ex.response.text == "Let me check."
    assert ex.response.tool_calls[0].arguments == {"id": "ord_7"}
    assert ex.stop_reason == "tool_use"
    assert ex.usage == {"input_tokens": 25, "output_tokens": 30, "total_tokens": 55}


def test_anthropic_error_body() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ex = normalise(ANTHROPIC_REQUEST, error)
    assert ex.provider == "anthropic"
    assert ex.response is None
    assert ex.problems == ["provider error: Overloaded"]


# --------------------------------------------------------------------------- Gemini

GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-flash:generateContent?key=REDACTED"

GEMINI_REQUEST = {
    "systemInstruction": {"parts": [{"text": "You are a shop agent."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Buy one teapot."}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "create_order", "args": {"sku": "TEA-9", "qty": 1}}}
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "create_order",
                        "response": {"id": "ord_3c", "status": 201},
                    }
                }
            ],
        },
    ],
    "tools": [{"functionDeclarations": [{"name": "create_order"}]}],
    "generationConfig": {"temperature": 0},
}

GEMINI_RESPONSE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Thinking about it", "thought": True},
                    {"text": "Your order ord_3c is placed."},
                    {"functionCall": {"name": "get_order", "args": {"id": "ord_3c"}}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 90, "candidatesTokenCount": 12, "totalTokenCount": 102},
}


def test_gemini_full_exchange_model_from_url() -> None:
    ex = normalise(GEMINI_REQUEST, GEMINI_RESPONSE, GEMINI_URL)
    assert ex.provider == "gemini"
    assert ex.model == "gemini-1.5-flash"
    assert [m.role for m in ex.request_messages] == ["system", "user", "assistant", "tool"]
    assert ex.request_messages[0].text == "You are a shop agent."
    call = ex.request_messages[2].tool_calls[0]
    assert (call.id, call.name, call.arguments, call.arguments_raw) == (
        None,
        "create_order",
        {"sku": "TEA-9", "qty": 1},
        None,
    )
    result = ex.request_messages[3].tool_results[0]
    assert result.name == "create_order"
    assert json.loads(result.content) == {"id": "ord_3c", "status": 201}
    assert ex.response.text == "Your order ord_3c is placed."
    assert ex.response.tool_calls[0].arguments == {"id": "ord_3c"}
    assert ex.stop_reason == "STOP"
    assert ex.usage == {"input_tokens": 90, "output_tokens": 12, "total_tokens": 102}


def test_gemini_model_version_in_body_wins_and_vertex_url() -> None:
    url = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse"
    assert normalise(GEMINI_REQUEST, None, url).model == "gemini-2.0-flash-001"
    assert (
        normalise(
            GEMINI_REQUEST, {**GEMINI_RESPONSE, "modelVersion": "gemini-2.0-flash-001"}, url
        ).model
        == "gemini-2.0-flash-001"
    )
    assert normalise(GEMINI_REQUEST, None).model is None


def test_gemini_snake_case_and_stream_chunks() -> None:
    request = {
        "system_instruction": {"parts": [{"text": "sys"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    }
    chunks = [
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
            "modelVersion": "gemini-2.5-flash",
        },
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        },
    ]
    ex = normalise(request, chunks)
    assert ex.provider == "gemini"
    assert ex.request_messages[0].role == "system"
    assert ex.response.text == "Hello"
    assert ex.model == "gemini-2.5-flash"
    assert ex.usage == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def test_gemini_blocked_prompt_has_no_response() -> None:
    response = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 8},
    }
    ex = normalise(GEMINI_REQUEST, response, GEMINI_URL)
    assert ex.provider == "gemini"
    assert ex.response is None
    assert ex.stop_reason == "SAFETY"


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("request_body", "response_body", "url", "expected"),
    [
        (CHAT_REQUEST, None, None, "openai-chat"),
        (None, CHAT_RESPONSE, None, "openai-chat"),
        (RESPONSES_REQUEST, None, None, "openai-responses"),
        (None, RESPONSES_RESPONSE, None, "openai-responses"),
        (ANTHROPIC_REQUEST, None, None, "anthropic"),
        (None, ANTHROPIC_RESPONSE, None, "anthropic"),
        (GEMINI_REQUEST, None, None, "gemini"),
        (None, GEMINI_RESPONSE, None, "gemini"),
        (
            {"model": "x", "messages": [{"role": "user", "content": "hi"}]},
            None,
            None,
            "openai-chat",
        ),
        (
            {"model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
            None,
            "https://api.anthropic.com/v1/messages",
            "anthropic",
        ),
        # Gemini's OpenAI-compatible endpoint speaks the OpenAI shape: body wins over host.
        (
            {"model": "gemini-2.0-flash", "messages": [{"role": "user", "content": "hi"}]},
            CHAT_RESPONSE,
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
            "openai-chat",
        ),
        (
            None,
            None,
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-pro:generateContent",
            "gemini",
        ),
        ({"query": "weather"}, {"results": []}, "https://example.com/search", "unknown"),
        (None, None, None, "unknown"),
        (json.dumps(CHAT_REQUEST).encode(), None, None, "openai-chat"),
    ],
)
def test_detect_provider(request_body, response_body, url, expected) -> None:
    assert detect_provider(request_body, response_body, url) == expected


# --------------------------------------------------------------------------- unknown / malformed


def test_unknown_provider_kept_raw() -> None:
    request = {"prompt": "hello", "engine": "mystery-1"}
    response = {"answer": "hi"}
    ex = normalise(request, response, "https://llm.internal/generate")
    assert ex.provider == "unknown"
    assert ex.request_messages == []
    assert ex.response is None
    assert ex.raw_request is request
    assert ex.raw_response is response


MALFORMED = [
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": 42}]}, None),
    ({"model": "gpt-4o", "messages": {"role": "user", "content": "hi"}}, None),
    ({"model": "gpt-4o", "messages": [None, 3, "x"]}, None),
    ({"model": "gpt-4o", "messages": [{"role": "assistant", "tool_calls": "nope"}]}, None),
    (
        {"model": "gpt-4o", "messages": [{"role": "assistant", "tool_calls": [{"function": 7}]}]},
        None,
    ),
    (None, {"object": "chat.completion", "choices": [None]}),
    (None, {"object": "chat.completion", "choices": "x", "usage": 5}),
    (None, {"object": "chat.completion", "choices": [{"message": "hello"}]}),
    ({"input": 12}, None),
    ({"input": [1, 2]}, {"object": "response", "output": "x"}),
    (
        {"system": 5, "messages": [{"role": None, "content": None}]},
        {"type": "message", "content": 7},
    ),
    ({"system": "s", "messages": "hi"}, None),
    ({"contents": "hi"}, None),
    ({"contents": [{"parts": "hi"}]}, {"candidates": [{"content": 3}]}),
    ({"contents": [None]}, {"candidates": {}}),
    (
        None,
        {
            "candidates": [{"content": {"parts": [None, {"functionCall": None}]}}],
            "usageMetadata": [],
        },
    ),
    ("not json {", "<html>502 Bad Gateway</html>"),
    (b"\xff\xfe\x00", b"data: {broken\n\n"),
    ([], []),
    (3.5, True),
    ({"messages": [{"role": "user", "content": {"type": "text", "text": "dict content"}}]}, None),
]


@pytest.mark.parametrize(("request_body", "response_body"), MALFORMED)
def test_malformed_shapes_never_raise(request_body, response_body) -> None:
    ex = normalise(request_body, response_body, "https://api.example.com/v1/chat/completions")
    assert isinstance(ex, Exchange)
    assert ex.raw_request is request_body
    assert ex.raw_response is response_body
    assert isinstance(ex.request_messages, list)
    assert isinstance(ex.usage, dict)
    if ex.provider == "unknown":
        assert ex.request_messages == []
        assert ex.response is None
    detect_provider(request_body, response_body, "https://api.example.com/v1/chat/completions")


def test_malformed_container_degrades_to_unknown_with_problem() -> None:
    request = {"model": "gpt-4o", "messages": {"role": "user", "content": "hi"}}
    ex = normalise(request, CHAT_RESPONSE)
    assert ex.provider == "unknown"
    assert ex.raw_request is request
    assert ex.model == "gpt-4o-mini-2024-07-18"
    assert ex.problems and "messages is dict" in ex.problems[0]


def test_number_content_is_text() -> None:
    ex = normalise({"model": "gpt-4o", "messages": [{"role": "user", "content": 42}]}, None)
    assert ex.provider == "openai-chat"
    assert ex.request_messages[0].text == "42"


def test_non_json_response_keeps_request() -> None:
    ex = normalise(CHAT_REQUEST, "<html>502 Bad Gateway</html>")
    assert ex.provider == "openai-chat"
    assert ex.response is None
    assert len(ex.request_messages) == 5
    assert ex.problems == ["response body is not JSON (str)"]


def test_all_none() -> None:
    ex = normalise(None, None, None)
    assert (ex.provider, ex.request_messages, ex.response, ex.usage) == ("unknown", [], None, {})


def test_bedrock_anthropic_model_from_url() -> None:
    request = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "hi"}],
    }
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke"
    ex = normalise(request, ANTHROPIC_RESPONSE | {"model": None}, url)
    assert ex.provider == "anthropic"
    assert ex.model == "anthropic.claude-3-haiku-20240307-v1:0"


def test_plain_claude_request_without_url() -> None:
    request = {
        "model": "claude-3-5-haiku-latest",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert detect_provider(request, None) == "anthropic"
