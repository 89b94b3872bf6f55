"""Tests for cassettes_app.threads: conversation rebuilding and per-turn evidence."""

from __future__ import annotations

import copy
import json
import random
import time

import pytest

from cassettes_app.providers import Exchange, Message, ToolCall, ToolResult, normalise
from cassettes_app.threads import build_threads, message_key, multi_turn_blobs

SYSTEM = {"role": "system", "content": "You are a shop agent. Use create_order for purchases."}


def _chat_response(message: dict, finish: str) -> dict:
    return {
        "id": f"chatcmpl-{random.randint(0, 10**9)}",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def _tool_call_msg(call_id: str, name: str, args: dict) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def shop_conversation(ticket: str, sku: str) -> list[tuple[dict, dict]]:
    """A 3-call OpenAI chat tool loop, as a candidate's agent would record it (one pair per call)."""
    user = {"role": "user", "content": f"Ticket {ticket}: please order {sku}."}
    call1 = _tool_call_msg("call_1", "create_order", {"sku": sku, "qty": 1})
    result1 = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps({"id": f"ord_{ticket}"}),
    }
    call2 = _tool_call_msg("call_2", "get_order", {"id": f"ord_{ticket}"})
    result2 = {"role": "tool", "tool_call_id": "call_2", "content": json.dumps({"status": "paid"})}
    final = {"role": "assistant", "content": f"Order ord_{ticket} for {sku} is paid."}
    history = [SYSTEM, user]
    pairs = []
    for reply, results, finish in (
        (call1, [result1], "tool_calls"),
        (call2, [result2], "tool_calls"),
        (final, [], "stop"),
    ):
        request = {"model": "gpt-4o-mini", "messages": copy.deepcopy(history)}
        pairs.append((request, _chat_response(reply, finish)))
        # Agents echo the reply back as returned, plus provider noise such as refusal: null.
        history = [*history, {**reply, "refusal": None}, *results]
    return pairs


def _exchanges(pairs: list[tuple[dict, dict]], prefix: str) -> list[tuple[str, Exchange]]:
    return [(f"{prefix}/{i}", normalise(req, resp)) for i, (req, resp) in enumerate(pairs)]


def test_shuffled_three_turn_tool_conversation_is_one_thread() -> None:
    exchanges = _exchanges(shop_conversation("42", "MUG-1"), "cassettes/t42")
    shuffled = [exchanges[2], exchanges[0], exchanges[1]]
    threads = build_threads(shuffled)
    assert len(threads) == 1
    thread = threads[0]
    assert thread.root_ref == "cassettes/t42/0"
    assert thread.forked_from is None
    assert [t.exchange_ref for t in thread.turns] == [
        "cassettes/t42/0",
        "cassettes/t42/1",
        "cassettes/t42/2",
    ]
    assert [t.index for t in thread.turns] == [0, 1, 2]
    first, second, third = thread.turns
    assert [m.role for m in first.new_messages] == ["system", "user"]
    assert [m.role for m in second.new_messages] == ["tool"]
    assert second.new_messages[0].tool_results[0].content == '{"id": "ord_42"}'
    assert [m.role for m in third.new_messages] == ["tool"]
    assert third.new_messages[0].tool_results[0].content == '{"status": "paid"}'
    assert first.response.tool_calls[0].name == "create_order"
    assert third.response.text == "Order ord_42 for MUG-1 is paid."
    assert third.model == "gpt-4o-mini-2024-07-18"
    assert third.usage == {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}


def test_chaining_ignores_ids_and_argument_formatting() -> None:
    pairs = shop_conversation("7", "TEA-9")
    # The agent regenerates tool-call ids and re-serialises arguments compactly with other key order.
    request = pairs[1][0]
    echoed = request["messages"][2]
    echoed["tool_calls"][0]["id"] = "call_regenerated"
    echoed["tool_calls"][0]["function"]["arguments"] = '{"qty":1,"sku":"TEA-9"}'
    request["messages"][3]["tool_call_id"] = "call_regenerated"
    threads = build_threads(_exchanges(pairs, "r"))
    assert len(threads) == 1
    assert len(threads[0].turns) == 3


def test_two_independent_conversations_are_two_threads() -> None:
    exchanges = _exchanges(shop_conversation("1", "MUG-1"), "a") + _exchanges(
        shop_conversation("2", "TEA-9"), "b"
    )
    random.Random(3).shuffle(exchanges)
    threads = build_threads(exchanges)
    assert len(threads) == 2
    assert sorted(t.root_ref for t in threads) == ["a/0", "b/0"]
    for thread in threads:
        prefix = thread.root_ref.split("/")[0]
        assert [t.exchange_ref for t in thread.turns] == [
            f"{prefix}/0",
            f"{prefix}/1",
            f"{prefix}/2",
        ]


def test_fork_starts_a_branch_thread() -> None:
    pairs = shop_conversation("9", "MUG-1")
    # A retry of turn 2 that saw a different tool result: both continue turn 1.
    retry_request = copy.deepcopy(pairs[1][0])
    retry_request["messages"][-1]["content"] = json.dumps({"error": "timeout"})
    retry_response = _chat_response({"role": "assistant", "content": "The shop timed out."}, "stop")
    exchanges = [*_exchanges(pairs, "main"), ("retry", normalise(retry_request, retry_response))]
    random.Random(11).shuffle(exchanges)
    threads = build_threads(exchanges)
    assert len(threads) == 2
    main, fork = threads
    assert [t.exchange_ref for t in main.turns] == ["main/0", "main/1", "main/2"]
    assert fork.forked_from == (0, 0)
    assert fork.fork_ref == "main/0"
    assert fork.root_ref == "retry"
    assert [t.index for t in fork.turns] == [1]
    assert fork.turns[0].new_messages[0].tool_results[0].content == '{"error": "timeout"}'


def test_anthropic_conversation_chains() -> None:
    tool_use = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "create_order",
        "input": {"sku": "MUG-1", "qty": 2},
    }
    first_req = {
        "model": "claude-3-5-sonnet-20241022",
        "max_tokens": 512,
        "system": "You are a shop agent.",
        "messages": [{"role": "user", "content": "Two mugs please."}],
    }
    first_resp = {
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-sonnet-20241022",
        "content": [{"type": "text", "text": "Ordering."}, tool_use],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }
    second_req = {
        **first_req,
        "messages": [
            *first_req["messages"],
            {"role": "assistant", "content": first_resp["content"]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ord_5"}],
            },
        ],
    }
    second_resp = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Done: ord_5."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 80, "output_tokens": 8},
    }
    threads = build_threads(
        [("2", normalise(second_req, second_resp)), ("1", normalise(first_req, first_resp))]
    )
    assert len(threads) == 1
    assert [t.exchange_ref for t in threads[0].turns] == ["1", "2"]
    assert [m.role for m in threads[0].turns[1].new_messages] == ["tool"]


def test_request_only_recordings_still_chain() -> None:
    pairs = shop_conversation("5", "MUG-1")
    exchanges = [(f"req/{i}", normalise(req, None)) for i, (req, _) in enumerate(pairs)]
    threads = build_threads(list(reversed(exchanges)))
    assert len(threads) == 1
    assert [t.exchange_ref for t in threads[0].turns] == ["req/0", "req/1", "req/2"]
    assert [m.role for m in threads[0].turns[2].new_messages] == ["tool"]
    assert multi_turn_blobs(exchanges) == []


def test_unknown_and_empty_exchanges_are_kept_as_single_turns() -> None:
    unknown = normalise({"prompt": "x"}, {"answer": "y"})
    threads = build_threads([("u1", unknown), ("u2", unknown), ("none", None)])
    assert [t.root_ref for t in threads] == ["u1", "u2", "none"]
    assert all(len(t.turns) == 1 and t.turns[0].new_messages == [] for t in threads)


def test_whole_conversation_in_one_recording_is_flagged() -> None:
    pairs = shop_conversation("77", "MUG-1")
    blob = ("cassettes/blob.json", normalise(*pairs[-1]))
    assert multi_turn_blobs([blob]) == ["cassettes/blob.json"]
    # The same last call is fine when the earlier turns have their own recordings.
    assert multi_turn_blobs(_exchanges(pairs, "per-turn")) == []
    # One missing earlier recording is tolerated; two uncovered turns are a blob.
    assert multi_turn_blobs([("t0", normalise(*pairs[0])), ("t2", normalise(*pairs[2]))]) == []
    assert multi_turn_blobs([("t0", normalise(*pairs[0])), blob], min_turns=1) == [
        "cassettes/blob.json"
    ]


def test_few_shot_examples_are_not_blobs() -> None:
    shots = [
        {"role": "user", "content": "Example ticket: lamp broken"},
        {"role": "assistant", "content": '{"category": "hardware"}'},
        {"role": "user", "content": "Example ticket: cannot log in"},
        {"role": "assistant", "content": '{"category": "account"}'},
    ]
    exchanges = []
    for n, text in enumerate(["printer jammed", "refund please", "vpn down"]):
        request = {
            "model": "gpt-4o-mini",
            "messages": [SYSTEM, *shots, {"role": "user", "content": text}],
        }
        response = _chat_response({"role": "assistant", "content": '{"category": "other"}'}, "stop")
        exchanges.append((f"ticket/{n}", normalise(request, response)))
    assert multi_turn_blobs(exchanges) == []
    # Behind a system prompt that differs per conversation (today's date in it), too.
    dated = copy.deepcopy(exchanges)
    for n, (ref, _) in enumerate(exchanges):
        request = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "system", "content": f"Classify. Today is 2026-11-2{n}."},
                         *shots, {"role": "user", "content": f"ticket {n}"}],
        }  # fmt: skip
        response = _chat_response({"role": "assistant", "content": '{"category": "other"}'}, "stop")
        dated[n] = (ref, normalise(request, response))
    assert multi_turn_blobs(dated) == []
    # A real blob next to them is still found.
    pairs = shop_conversation("8", "MUG-1")
    blob_request = copy.deepcopy(pairs[-1][0])
    blob_request["messages"][1:1] = shots
    exchanges.append(("blob", normalise(blob_request, pairs[-1][1])))
    assert multi_turn_blobs(exchanges) == ["blob"]


def _windowed(calls: int, window: int) -> list[tuple[str, Exchange]]:
    """An agent that sends its system prompt and only its last `window` messages: every
    call recorded, one per file, and no request a prefix of a later one."""
    history: list[dict] = []
    out = []
    for n in range(calls):
        history.append({"role": "user", "content": f"ticket {n}: refund ord_{n}"})
        request = {"model": "gpt-4o-mini", "messages": [SYSTEM, *history[-window:]]}
        reply = {"role": "assistant", "content": f"Refunded ord_{n}."}
        out.append((f"call/{n}", normalise(request, _chat_response(reply, "stop"))))
        history.append(reply)
    return out


def test_a_sliding_window_of_recorded_turns_is_not_a_blob() -> None:
    exchanges = _windowed(10, 5)
    assert multi_turn_blobs(exchanges) == []
    # The same requests with the calls before the last one left unrecorded: a blob.
    assert multi_turn_blobs([exchanges[0], exchanges[-1]]) == ["call/9"]


def test_elided_tool_outputs_of_recorded_turns_are_not_a_blob() -> None:
    """An agent that replaces its older tool outputs with a placeholder (as SWE-agent
    does) keeps every assistant turn as it was recorded: no blob."""
    history: list[dict] = [SYSTEM, {"role": "user", "content": "Why did checkout fail?"}]
    exchanges = []
    outputs: list[str] = []
    for n in range(4):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "read_log", "arguments": json.dumps({"n": n})}}  # fmt: skip
        reply = {"role": "assistant", "content": None, "tool_calls": [call]}
        request = {"model": "gpt-4o-mini", "messages": [*history]}
        exchanges.append((f"step/{n}", normalise(request, _chat_response(reply, "tool_calls"))))
        outputs.append(f"log chunk {n}: " + "gateway timeout; " * 20)
        history.append(reply)
        history.append({"role": "tool", "tool_call_id": call["id"], "content": outputs[-1]})
        for earlier in history[2:-1]:
            if earlier["role"] == "tool":
                earlier["content"] = "[output elided]"
    assert multi_turn_blobs(exchanges) == []
    # Without the earlier steps' recordings, the last request carries unrecorded turns.
    assert multi_turn_blobs(exchanges[-1:]) == ["step/3"]


def test_an_anthropic_prefill_and_its_continued_replies_are_not_a_blob() -> None:
    """Each request ends with an assistant "{" the model continues (a prefill, as Anthropic
    documents); the history then holds the prefill and the reply as one turn."""
    history: list[dict] = []
    exchanges = []
    for n, question in enumerate(["checkout 500s", "only EU users", "fixed now"]):
        messages = [*history, {"role": "user", "content": question},
                    {"role": "assistant", "content": "{"}]  # fmt: skip
        rest = f'"priority": "P{n + 1}"}}'
        request = {"model": "claude-3-5-haiku-20241022", "max_tokens": 64,
                   "system": "Reply with JSON.", "messages": messages}  # fmt: skip
        response = {"id": f"msg_{n}", "type": "message", "role": "assistant",
                    "model": "claude-3-5-haiku-20241022",
                    "content": [{"type": "text", "text": rest}], "stop_reason": "end_turn",
                    "usage": {"input_tokens": 9, "output_tokens": 9}}  # fmt: skip
        exchanges.append((f"call/{n}", normalise(request, response)))
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "{" + rest},
        ]
    assert multi_turn_blobs(exchanges) == []
    assert multi_turn_blobs(exchanges[-1:]) == ["call/2"]


def _synthetic(n_threads: int, turns: int) -> list[tuple[tuple[int, int], Exchange]]:
    """Build n_threads tool loops of `turns` calls each, with fresh Message objects per call."""
    out = []
    for t in range(n_threads):
        history: list[Message] = [
            Message("system", "You are a shop agent."),
            Message("user", f"Ticket {t}: order things"),
        ]
        for k in range(turns):
            call = ToolCall(
                f"call_{t}_{k}", "create_order", {"sku": f"SKU-{t}-{k}", "qty": k}, None, True
            )
            reply = Message("assistant", "", [call])
            request = [
                Message(m.role, m.text, list(m.tool_calls), list(m.tool_results)) for m in history
            ]
            out.append(
                (
                    (t, k),
                    Exchange(
                        "openai-chat",
                        "gpt-4o-mini",
                        request,
                        reply,
                        {"input_tokens": k},
                        None,
                        None,
                    ),
                )
            )
            result = Message("tool", "", [], [ToolResult(call.id, f'{{"id": "ord_{t}_{k}"}}')])
            history = [*history, reply, result]
    return out


@pytest.mark.scale
def test_ten_thousand_exchanges_build_fast() -> None:
    exchanges = _synthetic(500, 20)
    assert len(exchanges) == 10_000
    random.Random(1).shuffle(exchanges)
    # CPU time with headroom: linear chaining takes ~0.6 s here, the quadratic pairwise
    # comparison it replaces takes minutes; a loaded CI machine must not fail it.
    start = time.process_time()
    threads = build_threads(exchanges)
    elapsed = time.process_time() - start
    assert elapsed < 4.0, f"build_threads took {elapsed:.2f}s"
    assert len(threads) == 500
    for thread in threads:
        assert [t.exchange_ref[1] for t in thread.turns] == list(range(20))
        assert len({t.exchange_ref[0] for t in thread.turns}) == 1
        assert all(len(t.new_messages) == 1 for t in thread.turns[1:])
    start = time.process_time()
    assert multi_turn_blobs(exchanges) == []
    elapsed = time.process_time() - start
    assert elapsed < 4.0, f"multi_turn_blobs took {elapsed:.2f}s"


@pytest.mark.scale
def test_long_single_chain_has_no_recursion_limit() -> None:
    exchanges = _synthetic(1, 400)
    threads = build_threads(list(reversed(exchanges)))
    assert len(threads) == 1
    assert len(threads[0].turns) == 400


def test_message_key_ignores_ids_and_whitespace() -> None:
    a = Message(
        "assistant", " hi \n", [ToolCall("id1", "f", {"b": 1, "a": 2}, '{"b": 1, "a": 2}', True)]
    )
    b = Message("assistant", "hi", [ToolCall("id2", "f", {"a": 2, "b": 1}, '{"a":2,"b":1}', True)])
    assert message_key(a) == message_key(b)
    c = Message("assistant", "hi", [ToolCall("id2", "f", '{"a":', '{"a":', False)])
    assert message_key(a) != message_key(c)
