import json
import uuid

MODEL = "gpt-4o-mini-2024-07-18"

PROMPT = """You are a support triage assistant for Lumen Cloud.
Call tools if you need service status or customer info.
Final reply: only JSON with ticket_id, category (incident|account|billing|feature_request|question), priority (P1-P4), team, summary."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_service_status",
            "description": "Status of a Lumen Cloud service",
            "parameters": {
                "type": "object",
                "properties": {"service": {"type": "string"}},
                "required": ["service"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_customer",
            "description": "Look up a customer",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"],
            },
        },
    },
]


def load(path):
    with open(path) as f:
        return json.load(f)


class Tools:
    def __init__(self, data_dir="data"):
        self.status = load(f"{data_dir}/status.json")
        self.customers = load(f"{data_dir}/customers.json")

    def run(self, name, arguments):
        args = json.loads(arguments)
        if name == "get_service_status":
            return {"service": args["service"], **self.status.get(args["service"], {})}
        if name == "get_customer":
            return {"customer_id": args["customer_id"], **self.customers.get(args["customer_id"], {})}
        return {"error": "unknown tool"}


def triage(ticket, llm, tools, new_id=lambda: str(uuid.uuid4())):
    messages = [
        {"role": "system", "content": PROMPT},
        {
            "role": "user",
            "content": f"Ticket {ticket['id']} (customer {ticket['customer']}): "
            f"{ticket['subject']}\n{ticket['body']}",
        },
    ]
    used = []
    for _ in range(6):
        payload = {
            "model": MODEL,
            "messages": list(messages),
            "tools": TOOLS,
            "temperature": 0,
            "user": "triage-bot",
            "request_id": new_id(),
        }
        msg = llm.complete(payload)["choices"][0]["message"]
        if not msg.get("tool_calls"):
            answer = json.loads(msg["content"])
            answer["tools_used"] = used
            return answer
        messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": msg["tool_calls"]})
        for call in msg["tool_calls"]:
            result = tools.run(call["function"]["name"], call["function"]["arguments"])
            used.append(call["function"]["name"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    raise RuntimeError("too many turns for " + ticket["id"])


def triage_all(tickets, llm, tools, new_id=lambda: str(uuid.uuid4())):
    return [triage(t, llm, tools, new_id) for t in sorted(tickets, key=lambda t: t["id"])]
