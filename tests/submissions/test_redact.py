"""Stored headers and the secret scanners read one list of credential header names."""

from __future__ import annotations

import pytest

from cassettes_app.secrets import LEAK, scan_headers
from submissions.redact import redact_header

SECRET = "sk9Qx7Lm2Vb8Nc4Zr6Tw1Yp3Hd5Jf0Gk"


# x-auth-token was only on the scanners' list, openai-api-key and api_key only on redact's.
@pytest.mark.parametrize("name", ["X-Auth-Token", "OpenAI-Api-Key", "api_key", "x-api-key"])
def test_a_credential_header_is_redacted_when_stored_and_flagged_when_scanned(name: str) -> None:
    stored = redact_header(name, SECRET)
    assert SECRET not in stored and SECRET[:4] in stored
    hits = scan_headers({name: SECRET}, "cassettes/a.json", where="request")
    assert [(h.rule, h.status) for h in hits] == [("credential-header", LEAK)]


def test_a_plain_header_keeps_its_value() -> None:
    assert redact_header("Content-Type", "application/json") == "application/json"


def test_json_storable_drops_nul_from_strings_and_keys() -> None:
    from submissions.redact import json_storable

    value = {"a\x00": ["x\x00y", {"k": "\x00"}, 1, None], "t": ("z\x00",)}
    assert json_storable(value) == {"a": ["xy", {"k": ""}, 1, None], "t": ["z"]}
