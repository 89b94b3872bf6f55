"""One conversation per ticket: the model may call tools, then answers with JSON."""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable

from .cassette import Transport
from .tools import ToolBox

MODEL = "gpt-4o-mini-2024-07-18"
MAX_TURNS = 5
CATEGORIES = ("incident", "account", "billing", "feature_request", "question")
PRIORITIES = ("P1", "P2", "P3", "P4")
ANSWER_FIELDS = ("ticket_id", "category", "priority", "team", "summary")

SYSTEM_PROMPT = (
    "You triage support tickets for Lumen Cloud. Use the tools when service status or "
    "the customer's account matters. When you are done, reply with one JSON object and "
    'nothing else: {"ticket_id", "category" (incident|account|billing|feature_request|'
    'question), "priority" (P1..P4, P1 = outage), "team", "summary" (one sentence)}.'
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_service_status",
            "description": "Current status and open incident of one Lumen Cloud service.",
            "parameters": {
                "type": "object",
                "properties": {
                    "service": {
                        "type": "string",
                        "enum": ["checkout", "email", "billing", "dashboard"],
                    }
                },
                "required": ["service"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_customer",
            "description": "Plan and region of a customer account.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"],
                "additionalProperties": False,
            },
        },
    },
]


class TriageError(RuntimeError):
    pass


def user_message(ticket: dict[str, str]) -> str:
    return (
        f"Ticket {ticket['id']} from customer {ticket['customer']}\n"
        f"Subject: {ticket['subject']}\n\n{ticket['body']}"
    )


def build_payload(messages: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": list(messages),
        "tools": TOOLS,
        "tool_choice": "auto",
        "temperature": 0,
        "user": "triage-demo",
        "request_id": request_id,
    }


def parse_answer(content: str, ticket_id: str) -> dict[str, Any]:
    try:
        answer = json.loads(content)
    except json.JSONDecodeError as exc:
        raise TriageError(f"{ticket_id}: final answer is not JSON: {content[:80]!r}") from exc
    missing = [f for f in ANSWER_FIELDS if f not in answer]
    if missing:
        raise TriageError(f"{ticket_id}: answer lacks {', '.join(missing)}")
    if answer["category"] not in CATEGORIES or answer["priority"] not in PRIORITIES:
        raise TriageError(f"{ticket_id}: bad category/priority in {answer}")
    if answer["ticket_id"] != ticket_id:
        raise TriageError(f"{ticket_id}: answer is about {answer['ticket_id']}")
    return {f: answer[f] for f in ANSWER_FIELDS}


def triage_ticket(
    ticket: dict[str, str],
    transport: Transport,
    tools: ToolBox,
    new_request_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(ticket)},
    ]
    tools_used: list[str] = []
    for turn in range(1, MAX_TURNS + 1):
        response = transport.send(build_payload(messages, new_request_id()))
        message = response["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            answer = parse_answer(message.get("content") or "", ticket["id"])
            return {**answer, "tools_used": tools_used, "turns": turn}
        # Next request = everything so far + the model's tool-call message + one result per call.
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            function = call["function"]
            result = tools.call(function["name"], function["arguments"])
            tools_used.append(function["name"])
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": json.dumps(result, sort_keys=True, ensure_ascii=False),
                }
            )
    raise TriageError(f"{ticket['id']}: no final answer after {MAX_TURNS} turns")


def triage_all(
    tickets: list[dict[str, str]],
    transport: Transport,
    tools: ToolBox,
    new_request_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> list[dict[str, Any]]:
    ordered = sorted(tickets, key=lambda t: t["id"])
    return [triage_ticket(t, transport, tools, new_request_id) for t in ordered]
