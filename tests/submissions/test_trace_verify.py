"""Trace verification against real loopback stubs: live re-fetch, idempotency probe, re-drive."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import shlex
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from cassettes_app.formats import parse_path
from cassettes_app.hops import is_model_hop, stub_hops
from cassettes_app.jsonvalues import json_equal
from cassettes_app.parsed import TraceHop
from submissions.checks.trace_live.idempotency import (
    probe_body_from_hops,
    trace_idempotency_enforced,
)
from submissions.checks.trace_live.live import trace_live_match
from submissions.checks.trace_live.redrive import mask_volatile
from submissions.checks.trace_live.rows import RowResult
from submissions.runs.trace import redrive_in_sandbox
from submissions.sandbox.runtime import redrive_driver as driver
from tests.stubs.demo import REPOS, DemoStub
from tests.stubs.guard import ConnectGuard, FakeResolver
from tests.stubs.redrive import redrive_here
from tests.stubs.servers import (
    HugeHandler,
    RedirectHandler,
    ResetServer,
    StubServer,
    TraceStoreHandler,
    free_port,
)

LOOPBACK = ["127.0.0.0/8", "::1"]
GOOD_TRACE = REPOS / "shop-trace-good" / "replay.jsonl"
FLAWED_TRACE = REPOS / "shop-trace-flawed" / "replay.jsonl"
FAST = {"timeout": 1.0, "retries": 1, "backoff": 0.01}


@pytest.fixture(autouse=True)
def guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectGuard]:
    """Every test here may only connect to 127.0.0.0/8 or ::1; anything else fails it."""
    connect_guard = ConnectGuard()
    connect_guard.install(monkeypatch)
    yield connect_guard
    connect_guard.assert_clean()


@pytest.fixture(autouse=True)
def resolver(monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
    """No real DNS: literals and a small name table only."""
    fake = FakeResolver(socket.getaddrinfo)
    fake.set("localhost", "127.0.0.1")
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def hops_of(path: Path) -> list[TraceHop]:
    result = parse_path(str(path))
    assert result.hops and not [f for f in result.findings if f.severity == "error"]
    return result.hops


@pytest.fixture(scope="module")
def good_hops() -> list[TraceHop]:
    return hops_of(GOOD_TRACE)


@pytest.fixture(scope="module")
def flawed_hops() -> list[TraceHop]:
    return hops_of(FLAWED_TRACE)


@pytest.fixture
def good_stub(tmp_path: Path) -> Iterator[DemoStub]:
    stub = DemoStub("shop-trace-good", tmp_path / "good").start()
    yield stub
    stub.stop()


@pytest.fixture
def flawed_stub(tmp_path: Path) -> Iterator[DemoStub]:
    stub = DemoStub("shop-trace-flawed", tmp_path / "flawed").start()
    yield stub
    stub.stop()


def trace_records(hops: list[TraceHop]) -> dict[str, dict]:
    """What the demo stub would store for each stub hop of a trace."""
    return {
        h.trace_id: {
            "trace_id": h.trace_id,
            "method": h.method,
            "path": "/orders",
            "status": h.status,
            "req": h.req,
            "idempotency_key": h.idempotency_key,
            "resp": h.resp,
        }
        for h in stub_hops(hops)
        if h.trace_id
    }


def outcomes(rows: list[RowResult]) -> dict[int, str]:
    return {r.line: r.outcome for r in rows}


# --- which hops are the stub's --------------------------------------------------------------


def test_model_hops_are_told_apart_from_stub_hops(good_hops: list[TraceHop]) -> None:
    assert [h.line for h in stub_hops(good_hops)] == [2, 5, 6, 9]

    def hop(url: str) -> TraceHop:
        return TraceHop(1, url, "POST", 200, "t", None, [], None, None)

    for url in (
        "https://api.anthropic.com/v1/messages",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0:generateContent",
        "https://proxy.example.com/v1/chat/completions",
        "https://api.openai.com/v1/responses",
        "https://my.openai.azure.com/openai/deployments/x/chat/completions?api-version=1",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/converse",
    ):
        assert is_model_hop(hop(url)), url
    for url in ("http://127.0.0.1:8080/orders", "https://shop.example.com/orders/ord_1"):
        assert not is_model_hop(hop(url)), url


def test_json_equality_and_masking() -> None:
    assert json_equal({"a": 1, "b": [1, 2.0]}, {"b": [1.0, 2], "a": 1})
    assert not json_equal({"a": True}, {"a": 1})
    assert not json_equal([1, 2], [2, 1])
    import re

    masked = mask_volatile(
        {
            "id": "ord_a43c9c3c77cb",
            "trace": "tr_259055ba8bf21333",
            "at": "2026-01-02T03:04:05.123Z",
            "uuid": "3f2b8c1e-5d4a-4c3b-9e2f-1a2b3c4d5e6f",
            "created": 1795007121,
            "qty": 2,
        },
        re.compile(r"ord_[0-9a-f]+"),
    )
    assert masked == {
        "id": "<order_id>",
        "trace": "<trace_id>",
        "at": "<timestamp>",
        "uuid": "<uuid>",
        "created": "<volatile>",
        "qty": 2,
    }


# --- trace.live_match against the real demo stubs ---------------------------------------------


def test_good_stub_matches_and_persists_across_a_restart(
    good_stub: DemoStub, good_hops: list[TraceHop]
) -> None:
    # The fresh stub learns the trace's hops by re-driving them (same keys, same trace ids).
    outcome, rows = redrive_here(good_hops, good_stub.url, path="replay.jsonl", timeout=1.0)
    assert outcome.status == "pass", outcome.summary
    assert outcome.evidence[0]["mode"] == "redrive" and "re-drive" in outcome.summary
    assert set(outcomes(rows).values()) == {"match"} and len(rows) == 4

    outcome, rows = trace_live_match(
        good_hops, good_stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
    )
    assert outcome.id == "trace.live_match" and outcome.status == "pass", outcome.summary
    assert outcomes(rows) == {2: "match", 5: "match", 6: "match", 9: "match"}
    assert outcome.evidence[0]["mode"] == "live"
    assert outcome.evidence[0]["counts"] == {
        "match": 4,
        "mismatch": 0,
        "missing": 0,
        "unreachable": 0,
    }

    good_stub.restart(keep_state=True)  # the good stub writes its state file
    outcome, _ = trace_live_match(
        good_hops, good_stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
    )
    assert outcome.status == "pass", outcome.summary


def test_restarted_stub_without_memory_gives_missing_rows(
    good_stub: DemoStub, good_hops: list[TraceHop]
) -> None:
    redrive_here(good_hops, good_stub.url, timeout=1.0)
    good_stub.restart(keep_state=False)
    outcome, rows = trace_live_match(
        good_hops, good_stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
    )
    assert outcome.status == "warn"
    assert "the stub has no record of any trace: it probably restarted" in outcome.summary
    assert set(outcomes(rows).values()) == {"missing"}
    assert all(r.error == "stub answered 404" for r in rows)


def test_stub_whose_trace_disagrees_on_one_row(good_hops: list[TraceHop]) -> None:
    records = trace_records(good_hops)
    changed = records["tr_b3833330472d9400"]
    changed["status"] = 200
    changed["resp"] = {**changed["resp"], "id": "ord_ffffffffffff"}
    # Another row stores its request as JSON text, keys reordered and spaced: still a match.
    records["tr_54514c00891ae35c"]["req"] = '{ "sku": "B-2",  "qty": 3 }'
    with StubServer(TraceStoreHandler, records=records) as stub:
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
        )
    assert outcome.status == "fail"
    assert outcomes(rows) == {2: "match", 5: "mismatch", 6: "match", 9: "match"}
    row = next(r for r in rows if r.outcome == "mismatch")
    assert {d["field"]: (d["file"], d["live"]) for d in row.differences} == {
        "status": (201, 200),
        "order_id": (["ord_a86789407b67"], ["ord_ffffffffffff"]),
    }
    assert outcome.evidence[1]["line"] == 5 and outcome.evidence[1]["path"] == "replay.jsonl"
    assert "1 of 4 rows disagree" in outcome.summary


def test_idempotency_key_and_body_differences_are_reported(good_hops: list[TraceHop]) -> None:
    records = trace_records(good_hops)
    records["tr_259055ba8bf21333"]["idempotency_key"] = "idem_other"
    records["tr_259055ba8bf21333"]["req"] = {"sku": "A-1", "qty": 3}
    with StubServer(TraceStoreHandler, records=records) as stub:
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
        )
    row = next(r for r in rows if r.line == 2)
    assert {d["field"] for d in row.differences} == {"idempotency_key", "req"}
    assert outcome.status == "fail"


def test_concurrency_is_bounded_and_rows_are_capped(good_hops: list[TraceHop]) -> None:
    many = [
        TraceHop(
            i, "http://127.0.0.1:8080/orders", "POST", 201, f"tr_{i:04d}", None, [], None, None
        )
        for i in range(1, 41)
    ]
    records = {h.trace_id: {"status": 201} for h in many}
    with StubServer(TraceStoreHandler, records=records) as stub:
        outcome, rows = trace_live_match(
            many, stub.url, path="t.jsonl", allow=LOOPBACK, concurrency=3, max_rows=30, **FAST
        )
    assert outcome.status == "pass" and len(rows) == 30
    assert len(stub.hits) == 30 and 1 < stub.max_active <= 3
    assert "only the first 30 of 40 rows" in outcome.summary


def test_slow_stub_rows_are_unreachable_in_bounded_time(good_hops: list[TraceHop]) -> None:
    records = trace_records(good_hops)
    with StubServer(TraceStoreHandler, records=records, slow_all=True, delay=2.0) as stub:
        started = time.monotonic()
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, concurrency=2,
            timeout=0.3, retries=1, backoff=0.01,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert outcome.status == "error" and "did not answer" in outcome.summary
    assert set(outcomes(rows).values()) == {"unreachable"}
    assert any("timeout" in (r.error or "") for r in rows)
    assert elapsed < 1.5


def test_one_slow_row_is_unreachable_the_rest_match(good_hops: list[TraceHop]) -> None:
    records = trace_records(good_hops)
    slow = frozenset({"tr_54514c00891ae35c"})
    with StubServer(TraceStoreHandler, records=records, slow_ids=slow, delay=2.0) as stub:
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, timeout=0.3, retries=0
        )
    assert outcomes(rows) == {2: "match", 5: "match", 6: "unreachable", 9: "match"}
    assert outcome.status == "warn"


def test_resetting_stub_is_retried_then_unreachable(good_hops: list[TraceHop]) -> None:
    with ResetServer() as server:
        outcome, rows = trace_live_match(
            good_hops, server.url, path="replay.jsonl", allow=LOOPBACK, concurrency=1,
            timeout=1.0, retries=2, backoff=0.01,
        )  # fmt: skip
        connections = server.connections
    assert outcome.status == "error"
    assert set(outcomes(rows).values()) == {"unreachable"}
    assert "reset after 3 attempts" in (rows[0].error or "")
    # Three rows tried, three attempts each; the fourth is not tried once the stub is deemed down.
    assert connections == 9
    assert rows[3].error == "not tried: the stub answered no request"


def test_stub_that_is_not_running_is_an_error(good_hops: list[TraceHop]) -> None:
    port = free_port()
    outcome, rows = trace_live_match(
        good_hops, f"http://127.0.0.1:{port}", path="replay.jsonl", allow=LOOPBACK, **FAST
    )
    assert outcome.status == "error" and "connect" in outcome.summary
    assert set(outcomes(rows).values()) == {"unreachable"}


def test_redirect_to_another_host_is_refused_per_row(
    good_hops: list[TraceHop], guard: ConnectGuard
) -> None:
    with StubServer(RedirectHandler) as stub:
        stub.server.RequestHandlerClass.location = f"http://localhost:{stub.port}/final"
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, **FAST
        )
    assert outcome.status == "error"
    assert all(
        "another host" in (r.error or "") for r in rows if r.error and "not tried" not in r.error
    )
    assert {a[0] for a in guard.attempts} == {"127.0.0.1"}
    assert all(h["path"].startswith("/_trace/") for h in stub.hits)


def test_two_gigabyte_trace_record_stops_at_the_cap(good_hops: list[TraceHop]) -> None:
    with StubServer(HugeHandler) as stub:
        started = time.monotonic()
        outcome, rows = trace_live_match(
            good_hops, stub.url, path="replay.jsonl", allow=LOOPBACK, max_bytes=200_000, **FAST
        )
        elapsed = time.monotonic() - started
    assert set(outcomes(rows).values()) == {"unreachable"}
    assert "larger than 200000 bytes" in (rows[0].error or "")
    assert all(h["sent"] < 50_000_000 for h in stub.hits if "sent" in h)
    assert elapsed < 3
    assert outcome.status == "error"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "http://10.0.0.1",
        "http://169.254.169.254",
        "http://[::ffff:127.0.0.1]:8080",
        "http://100.64.0.1",
        "http://localhost:8080",
        "file:///etc/passwd",
    ],
)
def test_stub_url_refused_by_the_guard(
    url: str, good_hops: list[TraceHop], guard: ConnectGuard
) -> None:
    outcome, rows = trace_live_match(good_hops, url, path="replay.jsonl", allow=[])
    assert outcome.status == "error" and "refused by the outbound guard" in outcome.summary
    assert rows == []
    probe = trace_idempotency_enforced(url, allow=[])
    assert probe.status == "error" and "refused" in probe.summary
    assert guard.attempts == []


def test_trace_ids_cannot_walk_the_stub_path() -> None:
    url = "http://127.0.0.1:8080/orders"
    hops = [
        TraceHop(1, url, "POST", 201, "..", None, [], None, None),
        TraceHop(2, url, "POST", 201, "a/../b?x#y", None, [], None, None),
    ]
    with StubServer(TraceStoreHandler, records={}) as stub:
        outcome, rows = trace_live_match(
            hops, stub.url + "/", path="t.jsonl", allow=LOOPBACK, **FAST
        )
    assert outcome.status == "warn"
    assert sorted(h["path"] for h in stub.hits) == ["/_trace/%2E%2E", "/_trace/a%2F..%2Fb%3Fx%23y"]
    assert set(outcomes(rows).values()) == {"missing"}


def test_time_budget_bounds_the_work(good_hops: list[TraceHop], good_stub: DemoStub) -> None:
    outcome, rows = trace_live_match(
        good_hops, good_stub.url, path="r.jsonl", allow=LOOPBACK, budget=0.0, **FAST
    )
    assert outcome.status == "error"
    assert all("time budget" in (r.error or "") for r in rows[1:])
    outcome, rows = redrive_here(good_hops, good_stub.url, budget=0.0, timeout=1.0)
    assert outcome.status == "error"
    assert all("time budget" in (r.error or "") for r in rows[1:])


def test_trace_without_stub_hops_is_skipped(good_hops: list[TraceHop]) -> None:
    model_only = [h for h in good_hops if is_model_hop(h)]
    outcome, rows = trace_live_match(
        model_only, "http://127.0.0.1:1", path="r.jsonl", allow=LOOPBACK
    )
    assert outcome.status == "skip" and rows == []


# --- trace.idempotency_enforced -------------------------------------------------------------


def test_good_stub_passes_the_idempotency_probe(good_stub: DemoStub) -> None:
    outcome = trace_idempotency_enforced(good_stub.url, allow=LOOPBACK, sku="A-1", timeout=2.0)
    assert outcome.id == "trace.idempotency_enforced"
    assert outcome.status == "pass", outcome.summary
    assert [e["response"]["status"] for e in outcome.evidence] == [201, 200, 409, 400, 400, 400]
    first, second = outcome.evidence[0], outcome.evidence[1]
    order_id = json.loads(first["response"]["body"])["id"]
    assert order_id in second["message"]
    key = first["request"]["headers"]["Idempotency-Key"]
    assert key.startswith("probe_") and second["request"]["headers"]["Idempotency-Key"] == key
    assert "Idempotency-Key" not in outcome.evidence[3]["request"]["headers"]
    assert outcome.evidence[5]["request"]["body"] == "not json {"
    # The curl line is shell-quoted and carries the exact request.
    argv = shlex.split(first["curl"])
    assert argv[:2] == ["curl", "-sS"] and f"{good_stub.url}/orders" in argv
    assert f"Idempotency-Key: {key}" in argv
    assert argv[argv.index("--data-raw") + 1] == first["request"]["body"]


def test_probe_body_can_come_from_the_trace(good_stub: DemoStub, good_hops: list[TraceHop]) -> None:
    body = probe_body_from_hops(good_hops)
    assert body == {"qty": 2, "sku": "A-1"}
    outcome = trace_idempotency_enforced(good_stub.url, allow=LOOPBACK, body=body, timeout=2.0)
    assert outcome.status == "pass", outcome.summary
    assert json.loads(outcome.evidence[2]["request"]["body"]) == {"qty": 3, "sku": "A-1"}


def test_fresh_keys_each_run(good_stub: DemoStub) -> None:
    one = trace_idempotency_enforced(good_stub.url, allow=LOOPBACK, sku="B-2", timeout=2.0)
    two = trace_idempotency_enforced(good_stub.url, allow=LOOPBACK, sku="B-2", timeout=2.0)
    assert one.status == two.status == "pass"
    keys = {e["request"]["headers"].get("Idempotency-Key") for e in one.evidence + two.evidence}
    assert len(keys - {None}) == 6  # two runs x (shared key + two fresh bad-body keys)


def test_stub_without_the_409_branch_fails_the_probe(flawed_stub: DemoStub) -> None:
    outcome = trace_idempotency_enforced(flawed_stub.url, allow=LOOPBACK, sku="A-1", timeout=2.0)
    assert outcome.status == "fail"
    conflict = outcome.evidence[2]
    assert conflict["probe"] == "same key, different body" and conflict["ok"] is False
    assert conflict["response"]["status"] == 200
    assert "expected 409" in outcome.summary


def test_unknown_sku_shows_the_stubs_own_reason(good_stub: DemoStub) -> None:
    outcome = trace_idempotency_enforced(good_stub.url, allow=LOOPBACK, timeout=2.0)  # PROBE-SKU
    assert outcome.status == "fail"
    assert "unknown sku" in outcome.evidence[0]["response"]["body"]


def test_probe_of_an_unreachable_stub_is_an_error() -> None:
    outcome = trace_idempotency_enforced(
        f"http://127.0.0.1:{free_port()}", allow=LOOPBACK, timeout=0.5, retries=0
    )
    assert outcome.status == "error" and len(outcome.evidence) == 1
    assert outcome.evidence[0]["curl"].startswith("curl ")


# --- re-drive -------------------------------------------------------------------------------


def conflict_trace() -> list[TraceHop]:
    """201, 200 (same key and body), 409 (same key, other body), as the good stub answers."""
    key = "idem_conflict_probe_0001"
    order = {"id": "ord_" + hashlib.sha256(f"order:{key}".encode()).hexdigest()[:12],
             "qty": 1, "sku": "A-1", "status": "created"}  # fmt: skip
    headers = [("Content-Type", "application/json"), ("Idempotency-Key", key)]
    url = "http://127.0.0.1:8080/orders"
    conflict = {"error": "Idempotency-Key was already used with a different body"}
    return [
        TraceHop(1, url, "POST", 201, "tr_c1", key, headers, {"sku": "A-1", "qty": 1}, order),
        TraceHop(2, url, "POST", 200, "tr_c2", key, headers, {"sku": "A-1", "qty": 1}, order),
        TraceHop(3, url, "POST", 409, "tr_c3", key, headers, {"sku": "A-1", "qty": 2}, conflict),
    ]


def test_redrive_conflict_trace_matches_good_stub(good_stub: DemoStub) -> None:
    outcome, rows = redrive_here(conflict_trace(), good_stub.url, timeout=1.0)
    assert outcome.status == "pass", outcome.summary
    assert outcomes(rows) == {1: "match", 2: "match", 3: "match"}


def test_redrive_against_flawed_stub_mismatches_on_the_409_hop(
    flawed_stub: DemoStub, good_hops: list[TraceHop]
) -> None:
    # The good demo trace has no 409 hop, so it replays cleanly even on the flawed stub ...
    outcome, _ = redrive_here(good_hops, flawed_stub.url, timeout=1.0)
    assert outcome.status == "pass"
    # ... a trace with a conflict shows the missing 409 branch.
    flawed_stub.restart(keep_state=False)
    outcome, rows = redrive_here(conflict_trace(), flawed_stub.url, timeout=1.0)
    assert outcome.status == "fail" and outcome.evidence[0]["mode"] == "redrive"
    assert outcomes(rows) == {1: "match", 2: "match", 3: "mismatch"}
    diffs = {d["field"]: (d["file"], d["live"]) for d in rows[2].differences}
    assert diffs["status"] == (409, 200)
    assert "resp" in diffs


def test_redrive_flawed_trace_shows_the_unlogged_key(
    flawed_stub: DemoStub, flawed_hops: list[TraceHop]
) -> None:
    outcome, rows = redrive_here(flawed_hops, flawed_stub.url, path="replay.jsonl", timeout=1.0)
    assert outcome.status == "fail"
    assert outcomes(rows) == {2: "mismatch", 5: "match", 8: "match"}
    assert {d["field"]: (d["file"], d["live"]) for d in rows[0].differences}["status"] == (201, 400)


def test_redrive_masks_volatile_fields(good_hops: list[TraceHop], good_stub: DemoStub) -> None:
    """Recorded ids that differ from a fresh stub's are masked, statuses still compared."""
    hops = copy.deepcopy(stub_hops(good_hops))
    hops[0].resp = {**hops[0].resp, "id": "ord_0000000000aa"}
    outcome, _ = redrive_here(hops, good_stub.url, timeout=1.0)
    assert outcome.status == "pass", outcome.summary


def test_redrive_never_forwards_recorded_secrets(good_hops: list[TraceHop]) -> None:
    hop = copy.deepcopy(stub_hops(good_hops)[0])
    hop.request_headers.append(("Authorization", "Bearer sk-secret"))
    with StubServer(RedirectHandler, location="/final") as stub:
        redrive_here([hop], stub.url, timeout=1.0)
    sent = stub.hits[0]["headers"]
    assert "Authorization" not in sent
    assert sent["Idempotency-Key"] == hop.idempotency_key and sent["X-Trace-Id"] == hop.trace_id


# --- re-drive: the sandbox driver's give-up and time-budget rules ---------------------------


def test_redrive_gives_up_after_three_requests_in_a_row_without_an_answer() -> None:
    replies = iter([{"error": "refused"}, {"error": "refused"}, {"status": 201}])
    sent = []

    def send(request: dict) -> dict:
        sent.append(request["line"])
        return next(replies, {"error": "refused"})

    answers = driver.send_all([{"line": n} for n in range(1, 9)], send, 3, None)
    # An answer resets the count: lines 4, 5, 6 fail in a row, 7 and 8 are not sent.
    assert sent == [1, 2, 3, 4, 5, 6]
    assert answers[6:] == [{"error": "not sent: the stub stopped answering"}] * 2


def test_redrive_stops_sending_once_its_time_budget_is_used_up() -> None:
    clock = iter([100.0, 100.0, 105.0, 110.5, 111.0]).__next__  # the first is the start
    sent = []
    answers = driver.send_all(
        [{"line": n} for n in range(1, 5)],
        lambda r: sent.append(r["line"]) or {"status": 200},
        3,
        10.0,
        clock=clock,
    )
    assert sent == [1, 2]
    assert answers[2:] == [{"error": "not sent: the time budget of 10 s was used up"}] * 2


class _DriverHereSlot:
    """A slot that runs the re-drive driver's sending part here, on a loopback port where
    nothing listens (the spec as the trace job wrote it; only the stub start is left out)."""

    trusted_python = ["python3"]

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.spec: dict = {}

    @contextlib.contextmanager
    def workspace(self, tree: Path) -> Iterator[Path]:
        yield self.tmp_path

    def run(self, argv: list[str], *, workspace: Path) -> SimpleNamespace:
        spec_name, nonce = argv[-2], argv[-1]
        self.spec = json.loads((workspace / spec_name).read_text())
        dead = f"127.0.0.1:{free_port()}"
        for request in self.spec["requests"]:
            request["url"] = request["url"].replace(f"127.0.0.1:{self.spec['port']}", dead)
        opener = driver.opener_without_proxy()
        answers = driver.send_all(
            self.spec["requests"],
            lambda r: driver.send_one(opener, r, 1.0, self.spec["max_bytes"]),
            self.spec["give_up_after"],
            self.spec["budget"],
        )
        line = nonce + json.dumps({"answers": answers, "log": ""})
        return SimpleNamespace(stdout=line.encode(), stderr=b"", exit_code=0)


def test_the_trace_jobs_redrive_gives_up_on_a_stub_that_stopped_answering(
    good_hops: list[TraceHop], tmp_path: Path
) -> None:
    slot = _DriverHereSlot(tmp_path)
    outcome, rows = redrive_in_sandbox(good_hops, tmp_path, "python shop_stub.py",
                                       path="replay.jsonl", slot=slot,
                                       id_pattern="ord_[0-9a-f]+")  # fmt: skip
    assert slot.spec["give_up_after"] == 3 and slot.spec["budget"] == 120.0
    assert outcome.status == "error" and outcome.evidence[0]["mode"] == "redrive"
    assert [r.error.startswith("URLError") for r in rows] == [True, True, True, False]
    assert rows[3].error == "not sent: the stub stopped answering"
