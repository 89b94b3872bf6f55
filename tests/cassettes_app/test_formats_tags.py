"""YAML tags real recorders write: read as the plain values they wrap, never executed."""

from __future__ import annotations

import pytest

from cassettes_app.formats import parse_file
from cassettes_app.limits import LoadError
from cassettes_app.safeload import load_yaml

RUBY_VCR = b"""---
http_interactions:
- request:
    method: post
    uri: https://api.openai.com/v1/chat/completions
    body:
      encoding: UTF-8
      string: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
    headers:
      Content-Type:
      - application/json
  response:
    status:
      code: 200
      message: OK
    headers:
      Content-Type:
      - application/json
    body:
      encoding: ASCII-8BIT
      string: !binary |-
        eyJpZCI6ImNoYXRjbXBsLTEiLCJtb2RlbCI6ImdwdC00by1taW5pIiwiY2hvaWNlcyI6W3siaW5kZXgiOjAs
        Im1lc3NhZ2UiOnsicm9sZSI6ImFzc2lzdGFudCIsImNvbnRlbnQiOiJoZWxsbyJ9fV19
  recorded_at: Mon, 02 Nov 2026 10:00:00 GMT
recorded_with: VCR 6.3.1
"""


def test_psych_binary_bodies_are_decoded_and_every_interaction_kept() -> None:
    result = parse_file("spec/cassettes/chat.yml", RUBY_VCR)
    (recording,) = result.recordings
    (interaction,) = recording.interactions
    assert interaction.status == 200
    assert interaction.response_body.json["choices"][0]["message"]["content"] == "hello"
    assert not [f for f in result.findings if f.severity == "error"]


def test_a_binary_tag_that_is_not_base64_is_a_finding_with_its_line() -> None:
    bad = RUBY_VCR.replace(b"eyJpZCI6", b"@@@not-base64@@@", 1)
    result = parse_file("spec/cassettes/chat.yml", bad)
    assert result.recordings == [] or not result.recordings[0].interactions
    (finding,) = [f for f in result.findings if f.severity == "error"]
    assert "base64" in finding.message and finding.line is not None


AIOHTTP_HEADERS = b"""interactions:
- request:
    body: null
    headers:
      ? !!python/object/apply:multidict._multidict.istr
      - Authorization
      : - XXXXXX
    method: GET
    uri: https://api.example.com/v1/models
  response:
    body:
      string: '{"data": []}'
    headers:
      ? !!python/object/apply:multidict._multidict.istr
      - Content-Type
      : - application/json
    status:
      code: 200
      message: OK
    url: https://api.example.com/v1/models
version: 1
"""


def test_aiohttp_header_keys_are_read_as_the_strings_they_wrap() -> None:
    doc = load_yaml(AIOHTTP_HEADERS)
    headers = doc["interactions"][0]["response"]["headers"]
    assert headers == {"Content-Type": ["application/json"]}
    assert all(type(k) is str for k in headers)
    (recording,) = parse_file("cassettes/models.yaml", AIOHTTP_HEADERS).recordings
    assert recording.interactions[0].status == 200


@pytest.mark.parametrize(
    "doc",
    [
        b"a: !!python/object/apply:os.system ['id']\n",
        b"a: !!python/object/apply:multidict.MultiDict [[]]\n",
        b"a: !!python/name:subprocess.Popen\n",
        b"a: !ruby/object:Net::HTTPOK {}\n",
        b"a: !ruby/struct:VCR::Request {}\n",
    ],
)
def test_every_other_language_tag_stays_refused(doc: bytes) -> None:
    with pytest.raises(LoadError, match="YAML tag"):
        load_yaml(doc)
