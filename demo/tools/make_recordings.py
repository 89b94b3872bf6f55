"""Regenerate the recordings of the demo candidate repositories under demo/repos/.

The recordings are made the way a candidate would make them: each repository's own
code runs in its record mode, but the "live" model is a scripted stand-in defined
here, so keys, requests and tool-call chains are exactly what the code produces.
Deliberate flaws of the *-flawed repositories are applied afterwards and listed in
demo/README.md. Nothing here touches the network; the stubs bind to 127.0.0.1.

    python demo/tools/make_recordings.py            # all repositories
    python demo/tools/make_recordings.py cassette   # one family: cassette|run-twice|shop|ticket

Each repository is driven in a subprocess (its packages share names), with
PYTHONDONTWRITEBYTECODE=1 so no __pycache__ is left behind.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1]
REPOS = DEMO / "repos"
MODEL = "gpt-4o-mini-2024-07-18"
OTHER_MODEL = "gpt-4o-2024-05-13"
FINGERPRINT = {MODEL: "fp_0ba0d124f1", OTHER_MODEL: "fp_c4e5b6fa31"}
# Obviously fake, but shaped (prefix, length, entropy) like a project key, so a
# secrets scanner has something to find in cassette-flawed.
FAKE_OPENAI_KEY = (
    "sk-proj-FAKE"
    + base64.b64encode(hashlib.sha256(b"cassette-review demo - not a real key").digest())
    .decode()
    .rstrip("=")
    .replace("+", "x")
    .replace("/", "Q")
    + "FAKEdemo"
)

VOLATILE = ("user", "request_id", "id", "created")


# ---------------------------------------------------------------- shared helpers


def canonical_key(payload: dict, volatile=VOLATILE) -> str:
    kept = {k: v for k, v in payload.items() if k not in volatile}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def b62(seed: str, n: int) -> str:
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    num = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    out = []
    while len(out) < n:
        num, rem = divmod(num, 62)
        out.append(alphabet[rem])
        if num == 0:
            num = int.from_bytes(hashlib.sha256((seed + str(len(out))).encode()).digest(), "big")
    return "".join(out)


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def fake_uuid(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def chat_completion(
    *, seed: str, when: datetime, payload: dict, content=None, tool_calls=(), model=MODEL
) -> dict:
    """An OpenAI chat.completion object, deterministic for a seed."""
    calls = [
        {
            "id": "call_" + b62(f"{seed}:call:{i}", 24),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))},
        }
        for i, (name, args) in enumerate(tool_calls)
    ]
    message = {"role": "assistant", "content": None if calls else content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    prompt_tokens = len(json.dumps(payload.get("messages", []))) // 4 + 9
    if payload.get("tools"):
        prompt_tokens += len(json.dumps(payload["tools"])) // 5
    completion_tokens = len(json.dumps(calls) if calls else (content or "")) // 4 + 3
    return {
        "id": "chatcmpl-" + b62(f"{seed}:completion", 29),
        "object": "chat.completion",
        "created": int(when.timestamp()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT[model],
    }


def run_in_repo(repo: Path, family: str, variant: str) -> None:
    """Drive one repository's own code in a subprocess (package names collide)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--in-repo", family, variant, str(repo)],
        cwd=repo,
        env=env,
        check=True,
    )


def write_json(path: Path, data, *, sort_keys=True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- 1. cassette task

TICKET_SCRIPTS = {
    "T-1001": [
        [("get_service_status", {"service": "checkout"})],
        {
            "ticket_id": "T-1001",
            "category": "incident",
            "priority": "P1",
            "team": "payments-platform",
            "summary": (
                "Checkout 502s match open incident INC-2291 (degraded since 2026-11-09 22:10 UTC); "
                "link the ticket to it and point the customer to the status page."
            ),
        },
    ],
    "T-1002": [
        [("get_service_status", {"service": "email"})],
        {
            "ticket_id": "T-1002",
            "category": "account",
            "priority": "P3",
            "team": "identity",
            "summary": (
                "Email delivery is operational, so check the suppression list for this address "
                "and resend the reset link manually."
            ),
        },
    ],
    "T-1003": [
        [("get_customer", {"customer_id": "C-207"})],
        [("get_service_status", {"service": "billing"})],
        {
            "ticket_id": "T-1003",
            "category": "billing",
            "priority": "P2",
            "team": "billing-ops",
            "summary": (
                "Business-plan customer (eu-west) reports a duplicate charge on INV-55821 while "
                "billing is operational; verify and refund the duplicate."
            ),
        },
    ],
    "T-1004": [
        {
            "ticket_id": "T-1004",
            "category": "feature_request",
            "priority": "P4",
            "team": "product",
            "summary": (
                "Friendly request for a dashboard dark mode; add a vote to the dark-mode feature "
                "request and thank the customer."
            ),
        },
    ],
}
TICKET_RECORDED_AT = {
    "T-1001": "2026-11-10T09:12:04Z",
    "T-1002": "2026-11-10T09:14:31Z",
    "T-1003": "2026-11-12T16:02:47Z",
    "T-1004": "2026-11-12T16:05:10Z",
}


class ScriptedTriageModel:
    """Stands in for the chat completions endpoint while a repo records."""

    def __init__(self, variant: str) -> None:
        # Two candidates, two recording sessions: other ids, other days.
        self.variant = variant
        self.shift = timedelta(
            days=0 if variant == "good" else -3, minutes=0 if variant == "good" else 97
        )
        self.now = TICKET_RECORDED_AT["T-1001"]
        self.log: list[dict] = []  # one entry per request: ticket, turn, key
        self.last_headers = {
            "Authorization": f"Bearer {FAKE_OPENAI_KEY}",
            "Content-Type": "application/json",
        }

    def send(self, payload: dict) -> dict:
        first_user = next(m["content"] for m in payload["messages"] if m["role"] == "user")
        ticket = re.search(r"Ticket (T-\d+)", first_user).group(1)
        turn = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        step = TICKET_SCRIPTS[ticket][turn]
        when = parse_iso(TICKET_RECORDED_AT[ticket]) + self.shift + timedelta(seconds=41 * turn)
        self.now = iso(when)
        self.log.append({"ticket": ticket, "turn": turn, "key": canonical_key(payload)})
        seed = f"{self.variant}:{ticket}:{turn}"
        if isinstance(step, list):
            return chat_completion(seed=seed, when=when, payload=payload, tool_calls=step)
        return chat_completion(
            seed=seed, when=when, payload=payload, content=json.dumps(step, separators=(",", ":"))
        )

    complete = send  # cassette-flawed's client calls it complete()


def request_ids(prefix: str):
    n = 0

    def next_id() -> str:
        nonlocal n
        n += 1
        return fake_uuid(f"{prefix}:{n}")

    return next_id


def in_repo_cassette(variant: str, repo: Path) -> None:
    shutil.rmtree(repo / "cassettes", ignore_errors=True)
    model = ScriptedTriageModel(variant)
    tickets = json.loads((repo / "data" / "tickets.json").read_text())
    if variant == "good":
        from triage.agent import triage_all
        from triage.cassette import CassetteTransport
        from triage.tools import ToolBox

        transport = CassetteTransport(
            "record", repo / "cassettes", live=model, clock=lambda: model.now
        )
        triage_all(tickets, transport, ToolBox(repo / "data"), new_request_id=request_ids("good"))
    else:
        from triager.bot import Tools, triage_all
        from triager.cassettes import Cassettes

        cassettes = Cassettes("cassettes", mode="record", client=model, now=lambda: model.now)
        triage_all(tickets, cassettes, Tools(), new_id=request_ids("flawed"))
    for entry in model.log:
        assert (repo / "cassettes" / f"{entry['key']}.json").is_file(), entry
    (repo / "cassettes" / ".generated.json").write_text(json.dumps(model.log))


def cassette_flaws(repo: Path) -> None:
    """Apply cassette-flawed's deliberate defects (see demo/README.md)."""
    folder = repo / "cassettes"
    log = json.loads((folder / ".generated.json").read_text())
    (folder / ".generated.json").unlink()
    key = {(e["ticket"], e["turn"]): e["key"] for e in log}

    def load(k):
        return json.loads((folder / f"{k}.json").read_text())

    def save(path, data):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")

    # (a) hand-edited key: the request was recorded at temperature 0.2; the code now
    #     sends 0 and the candidate renamed the file and edited "key" instead of
    #     re-recording. Replay finds it by the edited key; the stored request disagrees.
    k = key[("T-1001", 0)]
    data = load(k)
    data["request"]["temperature"] = 0.2
    save(folder / f"{k}.json", data)

    # (c) one cassette kept the real Authorization header (recorded before redact()).
    k = key[("T-1001", 1)]
    data = load(k)
    data["request_headers"]["Authorization"] = f"Bearer {FAKE_OPENAI_KEY}"
    save(folder / f"{k}.json", data)

    # (d) stale recording (67 days before 2026-11-29) ...
    k = key[("T-1002", 0)]
    data = load(k)
    old = parse_iso("2026-09-23T17:40:12Z")
    data["recorded_at"] = iso(old)
    data["response"]["created"] = int(old.timestamp())
    save(folder / f"{k}.json", data)
    # ... and a recording made with another model than the one the code asks for.
    k = key[("T-1002", 1)]
    data = load(k)
    data["model"] = OTHER_MODEL
    data["response"]["model"] = OTHER_MODEL
    data["response"]["system_fingerprint"] = FINGERPRINT[OTHER_MODEL]
    save(folder / f"{k}.json", data)

    # (b) leftover from an older client that stamped "created" and whose key kept it,
    #     although REPLAY.md says created is dropped. Unused by the current code.
    k = key[("T-1002", 0)]
    data = load(k)
    request = dict(data["request"])
    request["messages"] = [
        {"role": "system", "content": "You are a support triage assistant. Reply with JSON."},
        *request["messages"][1:],
    ]
    when = parse_iso("2026-11-03T11:20:55Z")
    request["created"] = int(when.timestamp())
    request["request_id"] = fake_uuid("flawed:legacy")
    kept_created = canonical_key(request, volatile=("user", "request_id", "id"))
    assert kept_created != canonical_key(request)
    legacy = {
        "key": kept_created,
        "request": request,
        "request_headers": {"Authorization": "Bearer ***", "Content-Type": "application/json"},
        "response": chat_completion(
            seed="legacy",
            when=when,
            payload=request,
            tool_calls=[("get_service_status", {"service": "email"})],
        ),
        "recorded_at": iso(when),
        "model": MODEL,
    }
    save(folder / f"{kept_created}.json", legacy)

    # (e) the whole T-1003 conversation in one file instead of one turn per file.
    k1, k2, k3 = key[("T-1003", 0)], key[("T-1003", 1)], key[("T-1003", 2)]
    data = load(k1)
    data["turns"] = []
    for k in (k2, k3):
        turn = load(k)
        data["turns"].append({"key": k, "request": turn["request"], "response": turn["response"]})
        (folder / f"{k}.json").unlink()
    save(folder / f"{k1}.json", data)

    # (f) the same cassette twice, under two file names.
    k = key[("T-1004", 0)]
    (folder / "archive").mkdir(exist_ok=True)
    shutil.copyfile(folder / f"{k}.json", folder / "archive" / f"{k}.json")

    flaws = {
        "a hand-edited key": key[("T-1001", 0)],
        "b created kept in key (orphan)": kept_created,
        "c unredacted Authorization": key[("T-1001", 1)],
        "d stale recorded_at": key[("T-1002", 0)],
        "d other model": key[("T-1002", 1)],
        "e whole conversation in one file": k1,
        "f duplicate (also under archive/)": k,
    }
    for what, name in flaws.items():
        print(f"  cassette-flawed ({what}): cassettes/{name}.json", file=sys.stderr)


def build_cassette() -> None:
    for variant in ("good", "flawed"):
        repo = REPOS / f"cassette-{variant}"
        run_in_repo(repo, "cassette", variant)
        if variant == "good":
            (repo / "cassettes" / ".generated.json").unlink()
        else:
            cassette_flaws(repo)


# ---------------------------------------------------------------- 2. run-twice task

RUN_TWICE_ANSWERS = [
    (
        "billing",
        "Sorry about that: we will correct the October invoice to 9 seats and refund "
        "the difference.",
    ),
    (
        "bug",
        "Thanks for the report, we reproduced the CSV export crash and are fixing the "
        "comma escaping.",
    ),
    ("feature", "SSO with Okta is on our roadmap; we have added your vote and will let you know."),
    ("praise", "Thank you, we will pass this on to the support team!"),
    ("question", "Öffnen Sie Einstellungen > Profil > Sprache und wählen Sie Deutsch."),
]


def build_run_twice() -> None:
    for variant in ("good", "flawed"):
        repo = REPOS / f"run-twice-{variant}"
        folder = repo / "fixtures" / "recordings"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        inputs = json.loads((repo / "fixtures" / "inputs.json").read_text(encoding="utf-8"))
        start = parse_iso("2026-11-14T10:22:31Z")
        for n, (item, (label, reply)) in enumerate(zip(inputs, RUN_TWICE_ANSWERS, strict=True)):
            text = item["text"]
            sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            when = start + timedelta(seconds=2 * n, microseconds=137_211 * (n + 1))
            record = {
                "text": text,
                "response": json.dumps({"label": label, "reply": reply}, ensure_ascii=False),
                "model": MODEL,
                # the flawed candidate used datetime.utcnow().isoformat() + "Z"
                "recorded_at": iso(when)
                if variant == "good"
                else when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
            if variant == "good":
                write_json(folder / f"{sha}.json", record)
            else:
                (folder / f"{sha}.json").write_text(json.dumps(record, indent=2))


# ---------------------------------------------------------------- 3. trace task

SHOP_TOOL_CALLS = {
    "single-order": [("create_order", {"sku": "A-1", "qty": 2})],
    "two-items": [
        ("create_order", {"sku": "A-1", "qty": 1}),
        ("create_order", {"sku": "B-2", "qty": 3}),
    ],
    "bad-quantity": [("create_order", {"sku": "C-3", "qty": 0})],
}
SHOP_RECORDED_AT = {
    "single-order": "2026-11-18T13:05:21Z",
    "two-items": "2026-11-18T13:06:02Z",
    "bad-quantity": "2026-11-18T13:07:44Z",
}


def shop_final_text(scenario: str, results: list[dict]) -> str:
    # A model confirms what the tool results say; when a result carries no order the
    # (the flawed harness's "queued" placeholder), it makes an id up, as models do.
    ids = [r["order"]["id"] if r.get("order") else "ord_deadbeef" for r in results]
    if scenario == "single-order":
        return f"Done: order {ids[0]} is placed for 2 x A-1 (espresso beans, 1 kg)."
    if scenario == "two-items":
        return (
            f"Both orders are in: {ids[0]} for 1 x A-1 and {ids[1]} for 3 x B-2 "
            "(paper filters, 100 pack)."
        )
    return (
        "I could not place the C-3 order: the shop only accepts a quantity between 1 and 100. "
        "How many hand grinders should I order?"
    )


class ScriptedShopModel:
    def __init__(self, scenarios: list[dict], variant: str) -> None:
        self.variant = variant
        self.shift = timedelta(
            days=0 if variant == "good" else -1, minutes=0 if variant == "good" else 212
        )
        self.by_user = {s["user"]: s["name"] for s in scenarios}
        self.now = parse_iso(SHOP_RECORDED_AT["single-order"])

    def complete(self, payload: dict) -> dict:
        user = next(m["content"] for m in payload["messages"] if m["role"] == "user")
        scenario = self.by_user[user]
        turn = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        self.now = parse_iso(SHOP_RECORDED_AT[scenario]) + self.shift + timedelta(seconds=3 * turn)
        seed = f"shop:{self.variant}:{scenario}:{turn}"
        if turn == 0:
            return chat_completion(
                seed=seed, when=self.now, payload=payload, tool_calls=SHOP_TOOL_CALLS[scenario]
            )
        results = [json.loads(m["content"]) for m in payload["messages"] if m["role"] == "tool"]
        return chat_completion(
            seed=seed, when=self.now, payload=payload, content=shop_final_text(scenario, results)
        )


def in_repo_shop(variant: str, repo: Path) -> None:
    import harness

    shutil.rmtree(repo / "recordings", ignore_errors=True)
    scenarios = json.loads((repo / "scenarios.json").read_text())
    scripted = ScriptedShopModel(scenarios, variant)
    model = harness.RecordingModel(scripted, repo / "recordings", clock=lambda: scripted.now)
    try:  # the committed trace names the stub's documented default address
        socket.create_connection(("127.0.0.1", 8080), timeout=0.2).close()
        port = free_port()
        print(
            "warning: 127.0.0.1:8080 is busy, replay.jsonl will name another port", file=sys.stderr
        )
    except OSError:
        port = 8080
    with harness.spawned_stub(port) as url:
        log, answers = harness.run_all(scenarios, model, url)
    log.write(repo / "replay.jsonl")
    for name, text in answers.items():
        print(f"  [{variant} {name}] {text}", file=sys.stderr)


def shop_flaws(repo: Path) -> None:
    """shop-trace-flawed: one POST row lost its Idempotency-Key in the log."""
    path = repo / "replay.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    post = next(r for r in rows if r["method"] == "POST" and r["url"].endswith("/orders"))
    del post["headers"]["Idempotency-Key"]
    path.write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows))


def build_shop() -> None:
    for variant in ("good", "flawed"):
        repo = REPOS / f"shop-trace-{variant}"
        run_in_repo(repo, "shop", variant)
        if variant == "flawed":
            shop_flaws(repo)


# ---------------------------------------------------------------- 4. ticket-service task

TICKET_ANSWERS = {
    "checkout-api": {
        "service": "checkout-api",
        "severity": "high",
        "first_seen": "2026-11-12T08:14:03Z",
        "evidence": "upstream payment-gateway timed out after 30000ms",
        "confidence": 0.86,
        "needs_human": False,
    },
    "auth-svc": {
        "service": "auth-svc",
        "severity": "medium",
        "first_seen": "Nov 12 08:15:44",
        "evidence": "token refresh failed for 3 users: invalid_grant",
        "confidence": 0.78,
        "needs_human": False,
    },
    "search-indexer": {
        "service": "search-indexer",
        "severity": "critical",
        "first_seen": "2026-11-12 09:01:17",
        "evidence": "disk /var/lib/index 98% full, writes paused",
        "confidence": 0.91,
        "needs_human": True,
    },
    "payments": {
        "service": "payments",
        "severity": "critical",
        "first_seen": None,
        "evidence": "FATAL ledger mismatch in nightly reconciliation",
        "confidence": 0.83,
        "needs_human": True,
    },
    "mailer": {
        "service": "mailer",
        "severity": "low",
        "first_seen": "2026-11-12T10:42:00+01:00",
        "evidence": "queue drained, 0 pending",
        "confidence": 0.9,
        "needs_human": False,
    },
}
# What the model really said about the vague line: prose, not a ticket.
TICKET_JUNK = (
    "Sure! This sounds like a performance problem in the mobile app. I would rate it low severity."
)


def in_repo_ticket(variant: str, repo: Path) -> None:
    import replay

    if variant == "good":
        from ticketing import build_payload
    else:
        import app

        def build_payload(line):  # mirrors app.ask_model
            return {
                "model": app.MODEL,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": app.PROMPT},
                    {"role": "user", "content": line},
                ],
            }

    folder = repo / "recordings"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    text = (repo / "samples" / "lines.txt").read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    start = parse_iso("2026-11-16T15:30:08Z" if variant == "good" else "2026-11-20T08:02:51Z")
    for n, line in enumerate(dict.fromkeys(lines)):
        payload = build_payload(line)
        answer = next((a for name, a in TICKET_ANSWERS.items() if f"{name}" in line), None)
        content = json.dumps(answer) if answer else TICKET_JUNK
        when = start + timedelta(seconds=7 * n)
        key = canonical_key(payload)
        write_json(
            folder / f"{key}.json",
            {
                "key": key,
                "request": payload,
                "response": chat_completion(
                    seed=f"ticket:{variant}:{n}", when=when, payload=payload, content=content
                ),
                "recorded_at": iso(when),
                "model": MODEL,
            },
        )
    # The sample ledger is what `make replay` leaves in out/ledger.jsonl.
    shutil.rmtree(repo / "out", ignore_errors=True)
    sys.modules.pop(
        "app", None
    )  # ticket-service-flawed's replay configures app through env at import
    replay.main()
    shutil.copyfile(repo / "out" / "ledger.jsonl", repo / "ledger.jsonl")
    shutil.rmtree(repo / "out")


def build_ticket() -> None:
    for variant in ("good", "flawed"):
        run_in_repo(REPOS / f"ticket-service-{variant}", "ticket", variant)


# ---------------------------------------------------------------- entry point

FAMILIES = {
    "cassette": build_cassette,
    "run-twice": build_run_twice,
    "shop": build_shop,
    "ticket": build_ticket,
}
IN_REPO = {"cassette": in_repo_cassette, "shop": in_repo_shop, "ticket": in_repo_ticket}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--in-repo"]:
        family, variant, repo = argv[1], argv[2], Path(argv[3])
        sys.path.insert(0, str(repo))
        IN_REPO[family](variant, repo)
        return 0
    for name in argv or list(FAMILIES):
        FAMILIES[name]()
        print(f"regenerated: {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
