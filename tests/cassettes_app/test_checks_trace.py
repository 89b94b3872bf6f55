"""trace.* static checks: built hop lists, the demo traces, and hostile input."""

from __future__ import annotations

import gc
import json
import time
from typing import Any

import pytest

from cassettes_app.checks.trace import (
    is_model_hop,
    trace_idempotency_keys_logged,
    trace_no_invented_ids,
    trace_stub_hops_present,
    trace_tool_calls_reach_stub,
)
from cassettes_app.formats import parse_path
from cassettes_app.parsed import TraceHop
from tests.paths import DEMO_REPOS

DEMO = DEMO_REPOS
OPENAI = "https://api.openai.com/v1/chat/completions"
STUB = "http://127.0.0.1:8080/orders"
PATH = "replay.jsonl"


def hop(
    line: int,
    url: str | None,
    method: str | None = "POST",
    status: int | None = 200,
    req: Any = None,
    resp: Any = None,
    *,
    key: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> TraceHop:
    return TraceHop(line, url, method, status, None, key, headers or [], req, resp)


def chat_request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}, *messages]}


def tool_calls(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """An OpenAI chat completion asking for (id, name, arguments-json) calls."""
    return {
        "object": "chat.completion",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in calls
                    ],
                }
            }
        ],
    }


def reply(text: str) -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "choices": [{"message": {"role": "assistant", "content": text}}],
    }


def tool_result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(content)}


def good_trace() -> list[TraceHop]:
    """One order, confirmed with the id the stub issued."""
    return [
        hop(
            1,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", '{"sku":"A-1","qty":2}')),
        ),
        hop(2, STUB, status=201, req={"qty": 2, "sku": "A-1"}, resp={"id": "ord_a1b2"}, key="k1"),
        hop(
            3,
            OPENAI,
            req=chat_request(tool_result("c1", {"ok": True, "order": {"id": "ord_a1b2"}})),
            resp=reply("Order ord_a1b2 is placed."),
        ),
    ]


def messages(outcome: Any) -> str:
    return "\n".join(item["message"] for item in outcome.evidence)


# --------------------------------------------------------------------------- stub_hops_present


def test_stub_hops_present_passes_with_stub_hops() -> None:
    outcome = trace_stub_hops_present(good_trace(), PATH)
    assert outcome.status == "pass"
    assert outcome.id == "trace.stub_hops_present"
    assert "POST /orders ×1" in messages(outcome)
    hops = [
        *good_trace(),
        hop(4, STUB + "/ord_a1b2", method="GET"),
        hop(5, STUB + "/ord_c3?x=1", method="GET"),
    ]
    assert "GET /orders/{id} ×2 (first at line 4)" in messages(trace_stub_hops_present(hops, PATH))


def test_stub_hops_present_fails_with_only_model_chat() -> None:
    hops = [
        hop(1, OPENAI, req=chat_request(), resp=reply("hi")),
        # A proxy URL, told apart by its chat body.
        hop(2, "http://proxy.local/llm", req=chat_request(), resp=reply("hi")),
        hop(3, "https://api.anthropic.com/v1/messages", req={}, resp={}),
    ]
    outcome = trace_stub_hops_present(hops, PATH)
    assert outcome.status == "fail"
    assert "3 recorded hops are model chat" in outcome.summary


def test_stub_hops_present_skips_without_trace() -> None:
    assert trace_stub_hops_present([], PATH).status == "skip"


@pytest.mark.parametrize(
    "url",
    [
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
        "https://api.anthropic.com/v1/messages",
        "https://api.openai.com/v1/responses",
        "https://myres.openai.azure.com/openai/deployments/x/chat/completions?api-version=1",
        "https://api.mistral.ai/v1/anything",
    ],
)
def test_model_hops_recognised_by_url(url: str) -> None:
    assert is_model_hop(hop(1, url))


def test_stub_hop_not_taken_for_model() -> None:
    assert not is_model_hop(hop(1, STUB, req={"sku": "A-1", "qty": 1}, resp={"id": "ord_1"}))


# --------------------------------------------------------------------------- tool_calls_reach_stub


def test_tool_calls_reach_stub_passes() -> None:
    outcome = trace_tool_calls_reach_stub(good_trace(), PATH)
    assert outcome.status == "pass", outcome.evidence
    assert "stub line 2, status 201" in messages(outcome)


def test_tool_call_never_reaching_stub_fails_with_name_arguments_and_line() -> None:
    hops = good_trace()
    hops[0] = hop(
        1,
        OPENAI,
        req=chat_request(),
        resp=tool_calls(
            ("c1", "create_order", '{"sku":"A-1","qty":2}'),
            ("c2", "create_order", '{"sku":"B-2","qty":3}'),
        ),
    )
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail"
    assert "1 of 2 model tool calls" in outcome.summary
    [item] = outcome.evidence
    assert 'create_order({"sku":"B-2","qty":3})' in item["message"]
    assert item["line"] == 1 and item["path"] == PATH


def test_near_miss_string_vs_int_is_named_but_not_matched() -> None:
    hops = [
        hop(
            1,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", '{"sku":"B-2","qty":3}')),
        ),
        hop(2, STUB, status=201, req={"sku": "B-2", "qty": "3"}, resp={"id": "ord_1"}, key="k"),
    ]
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail"
    text = messages(outcome)
    assert "near misses: line 2" in text
    assert 'qty: stub got "3", model asked 3' in text


def test_a_float_argument_reaches_the_stub_as_its_integer_but_a_boolean_does_not() -> None:
    """One JSON rule (cassettes_app/jsonvalues.py): 2.0 is 2, true is not 1."""
    hops = good_trace()
    hops[1].req = {"qty": 2.0, "sku": "A-1"}
    assert trace_tool_calls_reach_stub(hops, PATH).status == "pass"
    hops[0].resp = tool_calls(("c1", "create_order", '{"sku":"A-1","qty":true}'))
    hops[1].req = {"qty": 1, "sku": "A-1"}
    assert trace_tool_calls_reach_stub(hops, PATH).status == "fail"


def test_stub_hop_without_real_status_does_not_count() -> None:
    hops = good_trace()
    hops[1].status = None
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail"
    assert "no real status" in messages(outcome)


def test_stub_request_before_the_call_does_not_count() -> None:
    hops = [
        hop(1, STUB, status=201, req={"sku": "A-1", "qty": 2}, resp={"id": "ord_1"}, key="k"),
        hop(
            2,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", '{"qty":2,"sku":"A-1"}')),
        ),
    ]
    assert trace_tool_calls_reach_stub(hops, PATH).status == "fail"


def test_each_stub_hop_answers_one_call_only() -> None:
    args = '{"sku":"A-1","qty":1}'
    hops = [
        hop(
            1,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", args), ("c2", "create_order", args)),
        ),
        hop(2, STUB, status=201, req={"sku": "A-1", "qty": 1}, resp={"id": "ord_1"}, key="k"),
    ]
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail"
    assert "1 of 2" in outcome.summary


def test_warns_when_model_is_told_ok_for_a_stub_error() -> None:
    hops = [
        hop(
            1,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", '{"sku":"C-3","qty":0}')),
        ),
        hop(2, STUB, status=400, req={"sku": "C-3", "qty": 0}, resp={"error": "bad qty"}, key="k"),
        hop(3, OPENAI, req=chat_request(tool_result("c1", {"ok": True})), resp=reply("done")),
    ]
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "warn"
    assert "status 400" in messages(outcome) and "reports ok" in messages(outcome)
    # Told the truth: no warning.
    hops[2] = hop(
        3,
        OPENAI,
        req=chat_request(tool_result("c1", {"ok": False, "status": 400})),
        resp=reply("no"),
    )
    assert trace_tool_calls_reach_stub(hops, PATH).status == "pass"


def test_anthropic_and_responses_tool_calls_are_read() -> None:
    anthropic = {
        "type": "message",
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {
                "type": "tool_use",
                "id": "tu1",
                "name": "create_order",
                "input": {"sku": "A-1", "qty": 1},
            }
        ],
    }
    responses = {
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "call_id": "fc1",
                "name": "create_order",
                "arguments": '{"sku":"B-2","qty":2}',
            }
        ],
    }
    hops = [
        hop(
            1,
            "https://api.anthropic.com/v1/messages",
            req={"model": "claude", "messages": []},
            resp=anthropic,
        ),
        hop(2, STUB, status=201, req={"sku": "A-1", "qty": 1}, resp={"id": "ord_1"}, key="a"),
        hop(
            3,
            "https://api.openai.com/v1/responses",
            req={"model": "gpt", "input": "x"},
            resp=responses,
        ),
        hop(
            4,
            STUB,
            status=201,
            req=json.dumps({"sku": "B-2", "qty": 2}),
            resp={"id": "ord_2"},
            key="b",
        ),
    ]
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "pass", outcome.evidence
    assert "2 model tool calls" in outcome.summary
    hops.pop(3)
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail" and '"B-2"' in messages(outcome)


def test_tool_calls_skip_without_calls() -> None:
    hops = [hop(1, OPENAI, req=chat_request(), resp=reply("hello")), hop(2, STUB, req={"a": 1})]
    assert trace_tool_calls_reach_stub(hops, PATH).status == "skip"
    assert trace_tool_calls_reach_stub([], PATH).status == "skip"


def test_invalid_json_arguments_fail_without_exception() -> None:
    hops = [
        hop(
            1,
            OPENAI,
            req=chat_request(),
            resp=tool_calls(("c1", "create_order", '{"sku": "A-1", qty')),
        ),
        hop(2, STUB, status=201, req={"sku": "A-1"}, resp={"id": "ord_1"}, key="k"),
    ]
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert outcome.status == "fail"
    assert "not valid JSON" in messages(outcome)


# --------------------------------------------------------------------------- no_invented_ids


def test_no_invented_ids_passes() -> None:
    outcome = trace_no_invented_ids(good_trace(), PATH)
    assert outcome.status == "pass"
    assert "ord_a1b2 issued at line 2" in messages(outcome)


def test_invented_id_in_assistant_text_fails() -> None:
    hops = good_trace()
    hops[2].resp = reply("Orders ord_a1b2 and\nord_deadbeef are placed.")
    outcome = trace_no_invented_ids(hops, PATH)
    assert outcome.status == "fail"
    [item] = outcome.evidence
    assert item["message"].startswith("ord_deadbeef appears in model output (assistant text)")
    assert item["line"] == 3


def test_id_used_before_issue_and_error_echo_are_findings() -> None:
    hops = [
        hop(1, STUB + "/ord_beef", method="GET", status=404, resp={"error": "no order ord_beef"}),
        hop(2, STUB, status=201, req={"sku": "A-1", "qty": 1}, resp={"id": "ord_beef"}, key="k"),
        hop(3, STUB + "/ord_cafe", method="GET", status=404, resp={"error": "no order ord_cafe"}),
    ]
    outcome = trace_no_invented_ids(hops, PATH)
    assert outcome.status == "fail"
    text = messages(outcome)
    assert (
        "ord_beef used in stub request URL (GET http://127.0.0.1:8080/orders/ord_beef) at line 1 before the stub issued it at line 2"
        in text
    )
    assert "ord_cafe appears in stub request URL" in text and "no stub response issued it" in text


def test_ids_in_tool_call_arguments_and_extra_texts() -> None:
    hops = good_trace()
    hops.append(
        hop(
            4, OPENAI, req=chat_request(), resp=tool_calls(("c9", "get_order", '{"id":"ord_f00d"}'))
        )
    )
    outcome = trace_no_invented_ids(hops, PATH, extra_texts=[("final answer", "see ord_0bad")])
    assert outcome.status == "fail"
    text = messages(outcome)
    assert "ord_f00d appears in model tool call get_order arguments at line 4" in text
    assert "ord_0bad appears in final answer" in text


def test_id_pattern_is_whole_token_and_configurable() -> None:
    hops = good_trace()
    hops[2].resp = reply("word_abc and ord_a1b2z are not ids; ORD-77 is")
    assert trace_no_invented_ids(hops, PATH).status == "pass"
    outcome = trace_no_invented_ids(hops, PATH, r"ORD-\d+")
    assert outcome.status == "fail" and "ORD-77" in messages(outcome)


def test_bad_id_pattern_is_an_error_not_an_exception() -> None:
    assert trace_no_invented_ids(good_trace(), PATH, "ord_[").status == "error"


# --------------------------------------------------------------------------- idempotency_keys_logged


def test_idempotency_keys_logged_passes_case_insensitively() -> None:
    hops = good_trace()
    hops.append(
        hop(4, STUB, status=201, req={"sku": "B", "qty": 1}, headers=[("idempotency-KEY", "k2")])
    )
    hops.append(hop(5, STUB + "/ord_a1b2", method="GET", status=200, resp={"id": "ord_a1b2"}))
    outcome = trace_idempotency_keys_logged(hops, PATH)
    assert outcome.status == "pass"
    assert "all 2 stub writes" in outcome.summary


def test_idempotency_key_missing_fails_naming_lines() -> None:
    hops = good_trace()
    hops[1].idempotency_key = None
    hops.append(
        hop(4, STUB, method="PATCH", status=200, req={"qty": 2}, headers=[("Idempotency-Key", " ")])
    )
    outcome = trace_idempotency_keys_logged(hops, PATH)
    assert outcome.status == "fail"
    assert "(lines 2, 4)" in outcome.summary
    assert [item["line"] for item in outcome.evidence] == [2, 4]
    hops.pop()
    assert "carry no Idempotency-Key (line 2)" in trace_idempotency_keys_logged(hops, PATH).summary


def test_idempotency_skips_without_writes() -> None:
    hops = [hop(1, OPENAI, req=chat_request(), resp=reply("x")), hop(2, STUB, method="GET")]
    assert trace_idempotency_keys_logged(hops, PATH).status == "skip"
    assert trace_idempotency_keys_logged([], PATH).status == "skip"


# --------------------------------------------------------------------------- demo cohort


def demo_hops(repo: str) -> list[TraceHop]:
    result = parse_path(str(DEMO / repo / "replay.jsonl"), "replay.jsonl")
    assert result.format == "trace" and result.hops
    return result.hops


def test_demo_good_trace_passes_all_four() -> None:
    hops = demo_hops("shop-trace-good")
    for check in (
        trace_stub_hops_present,
        trace_tool_calls_reach_stub,
        trace_no_invented_ids,
        trace_idempotency_keys_logged,
    ):
        outcome = check(hops, PATH)
        assert outcome.status == "pass", (check.__name__, outcome.summary, outcome.evidence)


def test_demo_flawed_trace_fails_the_planted_flaws() -> None:
    hops = demo_hops("shop-trace-flawed")
    assert trace_stub_hops_present(hops, PATH).status == "pass"

    reach = trace_tool_calls_reach_stub(hops, PATH)
    assert reach.status == "fail"
    [item] = reach.evidence
    assert 'create_order({"sku":"B-2","qty":3})' in item["message"] and item["line"] == 4

    ids = trace_no_invented_ids(hops, PATH)
    assert ids.status == "fail"
    [item] = ids.evidence
    assert item["message"].startswith("ord_deadbeef") and item["line"] == 6

    keys = trace_idempotency_keys_logged(hops, PATH)
    assert keys.status == "fail"
    assert [item["line"] for item in keys.evidence] == [2]


# --------------------------------------------------------------------------- hostile


def big_trace(count: int) -> list[TraceHop]:
    """Scenario blocks (tool call, POST, confirmation, GET) repeated up to `count` hops."""
    hops: list[TraceHop] = []
    first_request = chat_request()  # shared: only what varies is built per block
    block = 0
    while len(hops) < count:
        n = len(hops)
        oid = f"ord_{block:x}"
        qty = block % 9 + 1
        call = f"call_{block}"
        result = {
            "role": "tool",
            "tool_call_id": call,
            "content": f'{{"ok": true, "order": {{"id": "{oid}"}}}}',
        }
        hops += [
            hop(
                n + 1,
                OPENAI,
                req=first_request,
                resp=tool_calls((call, "create_order", f'{{"sku":"S-{block}","qty":{qty}}}')),
            ),
            hop(
                n + 2,
                STUB,
                status=201,
                req={"sku": f"S-{block}", "qty": qty},
                resp={"id": oid},
                key=call,
            ),
            hop(
                n + 3,
                OPENAI,
                req={"model": "m", "messages": [result]},
                resp=reply(f"Order {oid} is placed."),
            ),
            hop(n + 4, f"{STUB}/{oid}", method="GET", status=200, resp={"id": oid}),
        ]
        block += 1
    return hops[:count]


@pytest.mark.scale
def test_hundred_thousand_hops_each_check_runs_in_linear_time() -> None:
    hops = big_trace(100_000)
    gc.collect()  # the garbage building the trace left is not the checks' to pay for
    for check in (
        trace_stub_hops_present,
        trace_tool_calls_reach_stub,
        trace_no_invented_ids,
        trace_idempotency_keys_logged,
    ):
        # CPU time of this process: other jobs on a shared runner do not count against it.
        start = time.process_time()
        outcome = check(hops, PATH)
        elapsed = time.process_time() - start
        assert outcome.status == "pass", (check.__name__, outcome.summary)
        # Linear work takes 0.1-0.65 s here; a quadratic check would take minutes. The
        # headroom keeps a loaded CI machine from failing a check that is fine.
        assert elapsed < 3.0, (check.__name__, elapsed)


@pytest.mark.scale
def test_many_unmatched_calls_stay_fast() -> None:
    # Every call misses: near-miss scanning is windowed and capped, not quadratic.
    hops = []
    for i in range(10_000):
        hops.append(
            hop(
                2 * i + 1,
                OPENAI,
                req=chat_request(),
                resp=tool_calls((f"c{i}", "create_order", '{"sku":"X","qty":1}')),
            )
        )
        hops.append(
            hop(2 * i + 2, STUB, status=201, req={"sku": "X", "qty": "1"}, resp={}, key="k")
        )
    start = time.process_time()
    outcome = trace_tool_calls_reach_stub(hops, PATH)
    assert time.process_time() - start < 1.0
    assert outcome.status == "fail" and len(outcome.evidence) == 201  # capped + "… more"


def hostile_hops() -> list[TraceHop]:
    return [
        TraceHop(1, None, None, None, None, None, [], None, None),
        hop(2, None, None, None, req="not json {", resp=b"\x00\xff binary"),
        hop(3, OPENAI, req="{broken", resp="also { broken"),
        hop(4, OPENAI, req=chat_request(), resp=tool_calls(("c1", "create_order", "{not json"))),
        hop(5, OPENAI, req=chat_request(), resp=tool_calls((None, None, None))),  # type: ignore[arg-type]
        hop(6, OPENAI, req=[1, 2], resp={"choices": "nope", "object": "chat.completion"}),
        hop(7, STUB, method="POST", status=0, req="qty=3", resp="<html>ord_1</html>"),
        hop(8, STUB, method="POST", status=999, req=[], resp=[None, {"id": None}]),
        hop(9, "::not a url::", method="PUT", req={"a": {"b": {"c": [1, 2, {"d": "ord_f"}]}}}),
        hop(10, "http://[::1", method="PATCH", req=12, resp=True),
        TraceHop(
            11,
            OPENAI,
            "POST",
            200,
            None,
            None,
            [("Idempotency-Key", None)],
            {"messages": [None, 3]},
            {"choices": [None]},
        ),  # type: ignore[list-item]
        # Not what the parser makes, but a check must not trip on it either.
        TraceHop(12, ["x"], 5, "200", None, None, [], {}, {}),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(
    "check",
    [
        trace_stub_hops_present,
        trace_tool_calls_reach_stub,
        trace_no_invented_ids,
        trace_idempotency_keys_logged,
    ],
)
def test_hostile_hops_never_raise(check: Any) -> None:
    outcome = check(hostile_hops(), PATH)
    assert outcome.status in ("pass", "fail", "warn", "skip")
    json.dumps(outcome.as_dict())


def test_deeply_nested_bodies_do_not_raise() -> None:
    deep: Any = "ord_1"
    for _ in range(5000):
        deep = [deep]
    hops = [
        hop(1, STUB, req=deep, resp=deep),
        hop(2, OPENAI, req={"messages": [{"content": deep}]}, resp=reply("x")),
    ]
    for check in (
        trace_stub_hops_present,
        trace_tool_calls_reach_stub,
        trace_no_invented_ids,
        trace_idempotency_keys_logged,
    ):
        check(hops, PATH)
