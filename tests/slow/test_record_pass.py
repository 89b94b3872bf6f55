"""The record pass, end to end: the hand-in's record command in the real sandbox, its only
network the relay to the host-side model proxy, against a real loopback model (issue 29).

The candidate's code is hostile in the second test: it tries other paths, methods and hosts
through the relay, other ports, public addresses, raw sockets and DNS, and hunts for the key
in its environment, /proc, the socket's folder and the proxy's answers. Each is refused, and
the key string is nowhere: not in the sandbox's output, the stored recordings, the record
pass's row, the logs, the pages or the report."""

from __future__ import annotations

import io
import json
import logging
import textwrap
import zipfile

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from submissions.assignments import assignment_values
from submissions.intake.record_pass import PLACEHOLDER
from submissions.models import Job, Rerecord
from tests.conftest import ingest_inline
from tests.stubs import chat_model
from tests.stubs.chat_model import ChatModel, use_as_team_endpoint

# Transactional: the proxy takes each call from the ledger on its own threads.
pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

KEY = "sk-record-pass-0123456789abcdefSECRETKEY"
ORDER = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Place the order"}]}

RECORD = textwrap.dedent(
    """
    import json, os, urllib.request
    base, key = os.environ["MODEL_BASE_URL"], os.environ["OPENAI_API_KEY"]
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Place the order"}]}
    for n in range(int(os.environ.get("CALLS", "1"))):
        req = urllib.request.Request(base + "/chat/completions", json.dumps(request).encode(),
                                     {"Authorization": "Bearer " + key,
                                      "Content-Type": "application/json"})
        try:
            answer = json.loads(urllib.request.urlopen(req, timeout=20).read())
        except urllib.error.HTTPError as exc:
            print("refused", exc.code, exc.read().decode())
            break
        os.makedirs("cassettes", exist_ok=True)
        with open(f"cassettes/{n}.json", "w") as f:
            json.dump({"key": f"{n:016x}", "request": request, "response": answer,
                       "recorded_at": "2026-01-01T00:00:00Z", "model": "gpt-4o-mini"}, f)
    """
)


def _cassette(response: dict, n: int = 0) -> str:
    return json.dumps(
        {"key": f"{n:016x}", "request": ORDER, "response": response,
         "recorded_at": "2025-01-01T00:00:00Z", "model": "gpt-4o-mini"}
    )  # fmt: skip


@pytest.fixture
def model(settings, monkeypatch):
    served = ChatModel()
    use_as_team_endpoint(settings, monkeypatch, served.url, key_env="RECORD_PASS_KEY", key=KEY,
                         check_calls=2)  # fmt: skip
    yield served
    served.close()


def _handin(files: dict[str, str], command: str, slug: str):
    values = assignment_values(
        {"slug": slug, "title": "Record", "replay_command": "",
         "recordings": ["cassettes/*.json"], "record_command": command}
    )  # fmt: skip
    return ingest_inline(files, values, candidate="Ada")[0]


def _record(submission) -> tuple[Job, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("record_pass", str(submission.pk), "--inline", stdout=out, stderr=err)
    except Exception as exc:  # the command fails loudly when the pass could not run
        return submission.jobs.filter(kind=Job.Kind.RECORD).get(), f"{exc}\n{err.getvalue()}"
    return submission.jobs.filter(kind=Job.Kind.RECORD).get(), out.getvalue()


def test_a_record_pass_rerecords_through_the_proxy_and_is_stopped_at_the_cap(model, lead) -> None:
    edited = chat_model.answer(ORDER, qty=5)  # the committed recording was edited by hand
    files = {
        "record.py": RECORD,
        "cassettes/0000000000000000.json": _cassette(edited),
        "README.md": "Record mode is capped: MAX_CALLS=1\n",
    }
    submission = _handin(files, "CALLS=3 python3 record.py", "record-ok")
    job, said = _record(submission)
    assert job.state == Job.State.PASSED, said
    rerecord = Rerecord.objects.get(submission=submission)
    run = rerecord.record_pass
    assert run["exit_code"] == 0 and run["calls"] == 2  # the endpoint's check_calls cap
    assert [e["status"] for e in run["exchanges"]] == [200, 200, 429]
    assert model.seen == [f"Bearer {KEY}"] * 2  # the key only in the model's header
    assert any("declares a cap of 1" in f for f in run["findings"])  # README.md line 1
    assert any("refused at the proxy's cap" in f for f in run["findings"])
    pairs = list(
        rerecord.pairs.values_list("original_path", "rerecorded_path", "matched_by", "changed")
    )
    assert rerecord.status == Rerecord.Status.READY and rerecord.changed_count >= 1, pairs
    assert KEY not in json.dumps(run)
    client = Client()
    client.force_login(lead)
    page = client.get(rerecord.get_absolute_url()).content.decode()
    assert "Record pass in the sandbox" in page and "may make 2 model calls" in page
    assert KEY not in page


HOSTILE = textwrap.dedent(
    """
    import json, os, socket, urllib.request, glob
    found = {}
    base, key = os.environ["MODEL_BASE_URL"], os.environ["OPENAI_API_KEY"]
    def status(url, data=None, method=None, headers=None):
        req = urllib.request.Request(url, data, headers or {}, method=method)
        try:
            r = urllib.request.urlopen(req, timeout=10)
            return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except Exception as exc:
            return type(exc).__name__, str(exc)
    found["other_path"] = status(base + "/embeddings", b"{}", "POST")[0]
    found["get_models"] = status(base + "/models")[0]
    found["with_query"] = status(base + "/chat/completions?x=1", b"{}", "POST")[0]
    # A proxy-style request for another host, sent through the relay as raw bytes.
    s = socket.create_connection(("127.0.0.1", int(base.split(":")[2].split("/")[0])))
    s.sendall(b"POST http://169.254.169.254/latest HTTP/1.1\\r\\nHost: 169.254.169.254\\r\\n"
              b"Content-Length: 2\\r\\n\\r\\n{}")
    found["other_host"] = s.recv(100).split(b" ")[1].decode(); s.close()
    # The Unix socket itself, spoken to directly.
    u = socket.socket(socket.AF_UNIX)
    u.connect(glob.glob("/run/cr-model/*")[0])
    u.sendall(b"DELETE /v1/files HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
    found["socket_direct"] = u.recv(100).split(b" ")[1].decode(); u.close()
    for name, addr in (("loopback_port", ("127.0.0.1", 6379)), ("public", ("1.1.1.1", 443))):
        try:
            socket.create_connection(addr, timeout=3).close(); found[name] = "connected"
        except OSError as exc:
            found[name] = type(exc).__name__
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); found["raw"] = "open"
    except OSError as exc:
        found["raw"] = type(exc).__name__
    try:
        socket.getaddrinfo("api.openai.com", 443); found["dns"] = "resolved"
    except OSError as exc:
        found["dns"] = type(exc).__name__
    # Hunting for the key: env, every readable environ, the socket's folder, the answers.
    loot = json.dumps(dict(os.environ))
    for path in glob.glob("/proc/*/environ") + glob.glob("/run/cr-model/*"):
        try:
            loot += open(path, "rb").read().decode("latin-1")
        except OSError:
            pass
    answer = status(base + "/chat/completions",
                    json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                    "POST", {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    loot += answer[1]
    found["answer_status"] = answer[0]
    found["key_seen"] = key
    os.makedirs("cassettes", exist_ok=True)
    with open("cassettes/0.json", "w") as f:
        json.dump({"found": found, "loot": loot}, f)
    print("LOOT", loot)
    """
)


def test_hostile_record_code_is_refused_everything_and_never_sees_the_key(
    model, caplog, lead
) -> None:
    model.reject = True  # the model's 401 body quotes the key it was sent
    submission = _handin({"record.py": HOSTILE, "README.md": "no cap\n"}, "python3 record.py",
                         "record-hostile")  # fmt: skip
    with caplog.at_level(logging.DEBUG):
        job, said = _record(submission)
    assert job.state == Job.State.PASSED, said
    job.refresh_from_db()
    rerecord = Rerecord.objects.get(submission=submission)
    with rerecord.archive.open("rb") as handle, zipfile.ZipFile(handle) as archive:
        stored = archive.read("record-pass/cassettes/0.json").decode()
    found = json.loads(stored)["found"]
    assert (found["other_path"], found["get_models"], found["with_query"]) == (403, 405, 403)
    assert found["other_host"] == "403" and found["socket_direct"] == "405"
    assert found["loopback_port"] == "ConnectionRefusedError"
    assert found["public"] in ("OSError", "ConnectionRefusedError")  # ENETUNREACH
    assert found["raw"] == "PermissionError" and found["dns"] == "gaierror"
    assert found["answer_status"] == 401 and found["key_seen"] == PLACEHOLDER
    assert PLACEHOLDER in stored  # the hunt ran and found only the placeholder
    run = rerecord.record_pass
    assert any("refused by the proxy" in f for f in run["findings"])
    assert any("declares no cap" in f for f in run["findings"])
    client = Client()
    client.force_login(lead)
    pages = [client.get(reverse("submission", args=[submission.pk])).content.decode()]
    report = io.StringIO()
    call_command("report", str(submission.pk), "--format", "json", stdout=report)
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    pages.append(client.get(rerecord.get_absolute_url()).content.decode())
    for text in (stored, json.dumps(run), said, job.log, caplog.text, report.getvalue(),
                 dump.getvalue(), *pages):  # fmt: skip
        assert KEY not in text
    assert model.seen == [f"Bearer {KEY}"]  # the one allowed call, with the real key
