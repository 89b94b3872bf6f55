"""A recording full of NUL characters is analysed and stored on every database.

PostgreSQL refuses NUL in text and jsonb; the whole analysis used to fail on the first one
("internal error: DataError"). It now stores U+FFFD in its place; SQLite keeps the NUL.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from submissions.assignments import assignment_values
from submissions.models import CheckResult, Interaction, Job, Recording, Turn
from submissions.pgtext import _json_nul_free
from tests.conftest import ingest_inline

LOST = "\ufffd" if connection.vendor == "postgresql" else "\x00"


def _nul_everywhere() -> dict[str, str]:
    request = {
        "model": "gpt-4o\x00mini",
        "messages": [{"role": "user", "content": "refund\x00 ord_1"}],
        "tools": [{"type": "function", "function": {"name": "refund\x00", "parameters": {}}}],
    }
    response = {
        "id": "chatcmpl-\x00",
        "model": "gpt-4o\x00mini",
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call\x00", "type": "function",
                            "function": {"name": "refund\x00", "arguments": '{"id\\u0000": 1}'}}],
        }}],
    }  # fmt: skip
    cassette = {"key": "0" * 16, "request": request, "response": response, "k\x00": "v\x00"}
    har = {"log": {"entries": [{
        "startedDateTime": "2026-11-20T10:00:00Z\x00",
        "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions?q=\x00",
                    "headers": [{"name": "X-Odd\x00", "value": "v\x00"}],
                    "postData": {"mimeType": "application/json", "text": json.dumps(request)}},
        "response": {"status": 200, "headers": [{"name": "x", "value": "\x00"}],
                     "content": {"mimeType": "application/json", "text": json.dumps(response)}},
    }]}}  # fmt: skip
    return {
        "README.md": "# nul\n",
        "cassettes/a.json": json.dumps(cassette),
        "cassettes/b.har": json.dumps(har),
        "cassettes/c.json": '{"x\\u0000": broken',
    }


def test_a_recording_with_nul_characters_is_stored(db: None) -> None:
    values = assignment_values(
        {"slug": "nul", "title": "NUL", "replay_command": "",
         "recordings": ["cassettes/*.json", "cassettes/*.har"]}
    )  # fmt: skip
    submission, _ = ingest_inline(_nul_everywhere(), values)
    analysis = Job.objects.get(submission=submission, kind=Job.Kind.ANALYSIS)
    assert analysis.state == Job.State.PASSED, analysis.error
    assert Recording.objects.filter(submission=submission).count() == 3
    texts = json.dumps(
        [list(Turn.objects.filter(submission=submission).values_list("new_messages", "response")),
         list(Interaction.objects.filter(recording__submission=submission)
              .values_list("url", "request_headers"))],
        ensure_ascii=False,
    )  # fmt: skip
    for part in (f"refund{LOST} ord_1", f"q={LOST}", f"X-Odd{LOST}"):
        assert json.dumps(part, ensure_ascii=False)[1:-1] in texts
    assert CheckResult.objects.filter(submission=submission).exists()


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (b'"a\\u0000b"', b'"a\\ufffdb"'),
        (b'"\\\\u0000"', b'"\\\\u0000"'),  # an escaped backslash, then the letters u0000
        (b'"\\\\\\u0000"', b'"\\\\\\ufffd"'),  # an escaped backslash, then a NUL
        (b'{"\\u0000": "\\u00001"}', b'{"\\ufffd": "\\ufffd1"}'),
        (b'"plain"', b'"plain"'),
    ],
)
def test_only_nul_escapes_change_in_json_text(sent: bytes, stored: bytes) -> None:
    assert _json_nul_free(sent) == stored
    # The value read back is the one sent, each NUL (and nothing else) replaced.
    assert json.loads(stored) == _nul_replaced(json.loads(sent))


def _nul_replaced(value: object) -> object:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_nul_replaced(k): _nul_replaced(v) for k, v in value.items()}
    return value
