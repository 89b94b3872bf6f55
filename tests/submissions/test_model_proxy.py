"""The re-record pass's host-side model proxy and the relay, driven over real sockets.

The relay (`submissions/sandbox/runtime/relay.py`) runs here on the host's loopback, as it
runs in the sandbox's: a client speaks plain HTTP to it with a placeholder key, and only the
proxy on the Unix socket decides what reaches the loopback model and with which key."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from submissions.net.endpoints import parse_endpoints
from submissions.net.model_proxy import PLACEHOLDER, CapRefused, ModelProxy
from submissions.sandbox.types import RUNTIME_FILES
from tests.stubs import anthropic_model, chat_model
from tests.stubs.anthropic_model import AnthropicModel
from tests.stubs.chat_model import ChatModel

KEY = "sk-proxy-test-0123456789abcdefSECRETKEY"
ORDER = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Place the order"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _endpoint(url: str, api: str = "openai-chat"):
    raw = [{"name": "team", "base_url": url, "api": api, "key_env": "UNUSED"}]
    return parse_endpoints(json.dumps(raw))[0]


@pytest.fixture
def relay(tmp_path: Path):
    """Start the relay (ours) in front of a Unix socket path; yields (base, socket path)."""
    started: list[subprocess.Popen] = []
    sock = tmp_path / "model.sock"

    def start(prefix: str) -> str:
        port = _free_port()
        script = str(RUNTIME_FILES / "relay.py")
        proc = subprocess.Popen([sys.executable, script, str(port), str(sock), "sleep", "60"])
        started.append(proc)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}{prefix}"

    yield start, sock
    for proc in started:
        proc.kill()
        proc.wait()


def _post(url: str, body: object, **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers=headers, timeout=10)


def test_a_call_goes_through_with_the_real_key_and_is_counted(relay, caplog) -> None:
    start, sock = relay
    model = ChatModel()
    proxy = ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                       allow=["127.0.0.1"])  # fmt: skip
    try:
        with proxy, caplog.at_level(logging.DEBUG):
            base = start(proxy.base_path())
            answer = _post(f"{base}/chat/completions", ORDER, Authorization=f"Bearer {PLACEHOLDER}")
        assert answer.status_code == 200 and answer.json() == chat_model.answer(ORDER)
        assert model.seen == [f"Bearer {KEY}"]  # swapped on the host, for the model only
        assert (proxy.calls, proxy.tokens) == (1, 15)
        assert [e.as_dict()["status"] for e in proxy.exchanges] == [200]
        assert "/v1/chat/completions -> 200" in caplog.text and KEY not in caplog.text
    finally:
        model.close()


def test_other_methods_paths_hosts_and_framings_are_refused(relay) -> None:
    start, sock = relay
    model = ChatModel()
    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"]) as proxy:  # fmt: skip
            base = start(proxy.base_path())
            port = int(base.split(":")[2].split("/")[0])
            assert httpx.get(f"{base}/models").status_code == 405
            assert _post(f"{base}/embeddings", {"input": "x"}).status_code == 403
            assert _post(f"{base}/chat/completions?x=1", ORDER).status_code == 403
            # Proxy-style requests for another host, and CONNECT, go nowhere.
            for raw in (
                b"POST http://169.254.169.254/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 2\r\n\r\n{}",
                b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n",
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            ):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(raw)
                    head = s.recv(200)
                assert head.split(b" ")[1] in (b"403", b"405", b"411"), head
            assert model.seen == []  # the model was never asked
            assert proxy.calls == 0 and all(e.refused for e in proxy.exchanges)
    finally:
        model.close()


def test_refused_requests_with_bodies_are_all_answered_under_concurrency(relay) -> None:
    """The proxy refuses before reading a body and closes: every client still gets its 403.

    The relay once shut both sockets down when the body's copy to the closed proxy failed,
    cutting off the answer still on its way back ("Server disconnected without sending a
    response"); many concurrent clients with bodies larger than one read make it likely.
    """
    start, sock = relay
    model = ChatModel()
    body = {"input": "x" * 300_000}  # several relay reads; under the 1 MB cap
    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"]) as proxy:  # fmt: skip
            base = start(proxy.base_path())

            def one(n: int) -> int | str:
                path = "/embeddings" if n % 2 else "/chat/completions?x=1"
                try:
                    return _post(f"{base}{path}", body).status_code
                except httpx.HTTPError as exc:
                    return f"{type(exc).__name__}: {exc}"

            with ThreadPoolExecutor(max_workers=8) as pool:
                statuses = list(pool.map(one, range(48)))
        assert statuses == [403] * 48
        assert model.seen == []
    finally:
        model.close()


def test_past_the_cap_the_proxy_answers_429_and_says_why(relay) -> None:
    start, sock = relay
    model = ChatModel()
    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"], max_calls=2) as proxy:  # fmt: skip
            url = start(proxy.base_path()) + "/chat/completions"
            statuses = [_post(url, ORDER).status_code for _ in range(2)]
            refused = _post(url, ORDER)
        assert statuses == [200, 200] and refused.status_code == 429
        assert "may make 2 model calls" in refused.json()["error"]["message"]
        assert len(model.seen) == 2 and proxy.calls == 2
    finally:
        model.close()


def test_the_ledger_refuses_before_the_model_is_called(relay) -> None:
    start, sock = relay
    model = ChatModel()
    settled: list[int | None] = []

    def reserve(estimate: int):
        if len(settled) >= 1:
            raise CapRefused("cap month_calls of endpoint team reached: 1 of 1")
        return settled.append

    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"], reserve=reserve) as proxy:  # fmt: skip
            url = start(proxy.base_path()) + "/chat/completions"
            assert _post(url, ORDER).status_code == 200
            second = _post(url, ORDER)
        assert second.status_code == 429 and "month_calls" in second.text
        assert settled == [15] and len(model.seen) == 1
    finally:
        model.close()


def test_an_answer_quoting_the_key_reaches_the_sandbox_with_the_placeholder(relay) -> None:
    start, sock = relay
    model = ChatModel()
    model.reject = True  # its 401 body quotes the key it was sent
    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"]) as proxy:  # fmt: skip
            answer = _post(start(proxy.base_path()) + "/chat/completions", ORDER)
        assert answer.status_code == 401
        assert KEY not in answer.text and PLACEHOLDER in answer.text
    finally:
        model.close()


def test_an_anthropic_endpoint_gets_its_key_in_x_api_key(relay) -> None:
    start, sock = relay
    model = AnthropicModel()
    request = {"model": "claude-3-5-haiku-20241022", "max_tokens": 50,
               "messages": [{"role": "user", "content": "Place the order"}]}  # fmt: skip
    try:
        endpoint = _endpoint(model.url, "anthropic-messages")
        with ModelProxy(endpoint=endpoint, key=KEY, socket_path=sock,
                        allow=["127.0.0.1"]) as proxy:  # fmt: skip
            base = start(proxy.base_path())
            answer = _post(f"{base}/messages", request, **{"x-api-key": PLACEHOLDER})
        assert answer.json() == anthropic_model.answer(request)
        assert model.seen == [KEY] and proxy.tokens == 20
    finally:
        model.close()


def test_a_model_the_guard_refuses_is_never_reached(relay) -> None:
    start, sock = relay
    model = ChatModel()
    try:
        # OUTBOUND_ALLOW does not list loopback: the guard refuses the endpoint itself.
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock) as proxy:
            answer = _post(start(proxy.base_path()) + "/chat/completions", ORDER)
        assert answer.status_code == 502 and KEY not in answer.text
        assert model.seen == []
    finally:
        model.close()


def test_the_sandbox_sees_the_relay_and_the_placeholder_never_the_key(tmp_path: Path) -> None:
    from submissions.assignments import DEFAULT_RECORD_ENV
    from submissions.intake.record_pass import sandbox_env

    proxy = ModelProxy(endpoint=_endpoint("https://api.example.com/v1"), key=KEY,
                       socket_path=tmp_path / "s")  # fmt: skip
    env = sandbox_env(DEFAULT_RECORD_ENV, proxy)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:8765/v1"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8765"
    assert env["OPENAI_API_KEY"] == PLACEHOLDER and KEY not in json.dumps(env)


def test_the_hand_ins_declared_record_cap_is_read_with_its_place(tmp_path: Path) -> None:
    from submissions.intake.record_pass import declared_cap

    assert declared_cap(tmp_path) is None
    (tmp_path / "Makefile").write_text("record:\n\tMAX_CALLS=20 python record.py\n")
    assert declared_cap(tmp_path) == {"calls": 20, "path": "Makefile", "line": 2}
    (tmp_path / "REPLAY.md").write_text("# Replay\n\nThe record cap is 5 calls.\n")
    assert declared_cap(tmp_path) == {"calls": 5, "path": "REPLAY.md", "line": 3}
    (tmp_path / "README.md").symlink_to("/etc/passwd")  # never followed
    assert declared_cap(tmp_path)["path"] == "REPLAY.md"


def test_record_env_in_an_assignment_file_is_checked() -> None:
    from submissions.assignments import AssignmentError, assignment_values

    base = {"slug": "r", "title": "R", "record_command": "make record"}
    values = assignment_values({**base, "record_env": {"LLM_URL": "base_url", "LLM_KEY": "key"}})
    assert values["record_command"] == "make record"
    assert values["record_env"] == {"LLM_URL": "base_url", "LLM_KEY": "key"}
    with pytest.raises(AssignmentError, match=r"record_env\.LLM_KEY"):
        assignment_values({**base, "record_env": {"LLM_KEY": KEY}})


# --- streamed answers: tokens counted from the usage events -----------------------------


def test_a_streamed_openai_answer_counts_the_tokens_of_its_usage_chunk(relay) -> None:
    start, sock = relay
    model = ChatModel()
    streamed = {**ORDER, "stream": True, "stream_options": {"include_usage": True}}
    settled: list[int | None] = []
    try:
        with ModelProxy(endpoint=_endpoint(model.url), key=KEY, socket_path=sock,
                        allow=["127.0.0.1"], max_tokens=30,
                        reserve=lambda _: settled.append) as proxy:  # fmt: skip
            url = start(proxy.base_path()) + "/chat/completions"
            answers = [_post(url, streamed) for _ in range(3)]
        assert answers[0].headers["content-type"] == "text/event-stream"
        assert '"usage"' in answers[0].text and answers[0].text.endswith("data: [DONE]\n\n")
        # 15 tokens a call: the third is past the 30-token cap, and the model is not asked.
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert "may spend 30 tokens" in answers[2].json()["error"]["message"]
        assert (proxy.tokens, len(model.seen)) == (30, 2) and settled == [15, 15]
        assert [e.tokens for e in proxy.exchanges] == [15, 15, None]
    finally:
        model.close()


def test_a_streamed_anthropic_answer_counts_message_start_and_delta_usage(relay) -> None:
    start, sock = relay
    model = AnthropicModel()
    request = {"model": "claude-3-5-haiku-20241022", "max_tokens": 50, "stream": True,
               "messages": [{"role": "user", "content": "Place the order"}]}  # fmt: skip
    try:
        endpoint = _endpoint(model.url, "anthropic-messages")
        with ModelProxy(endpoint=endpoint, key=KEY, socket_path=sock,
                        allow=["127.0.0.1"]) as proxy:  # fmt: skip
            answer = _post(f"{start(proxy.base_path())}/messages", request)
        assert answer.status_code == 200 and "event: message_delta" in answer.text
        assert proxy.tokens == 20  # 12 input (message_start) + 8 output (the last delta)
    finally:
        model.close()


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        (b'data: {"choices": []}\n\ndata: [DONE]\n\n', None),  # no usage asked for
        (b"data: not json\n\n" * 3, None),
        (b"\xff\xfe" * 1000, None),
        (b"", None),
        (
            b'event: message_delta\ndata: {"type": "message_delta", "usage": '
            b'{"output_tokens": true}}\n\n',
            None,
        ),
        (b'data: {"usage": {"total_tokens": 7}}\r\n\r\ndata: [DONE]\r\n\r\n', 7),
    ],
)
def test_broken_or_usage_less_streams_count_no_tokens_and_never_crash(body, tokens) -> None:
    from submissions.net.model_proxy import answer_tokens

    assert answer_tokens(body) == tokens


@pytest.mark.parametrize("module", ["tests.stubs.chat_model", "tests.stubs.anthropic_model"])
def test_the_loopback_models_start_from_the_command_line_as_the_readme_says(module) -> None:
    from tests.paths import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(_free_port())],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        path = "/chat/completions" if module.endswith("chat_model") else "/messages"
        request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(url + path, json=request,
                            headers={"anthropic-version": "2023-06-01"}, timeout=10)  # fmt: skip
        assert answer.status_code == 200 and "usage" in answer.json()
    finally:
        proc.kill()
        proc.wait()
