"""Tests for cassettes_app.secrets: key shapes, credential positions, redaction, speed.

Every fake key is built at run time (split prefixes, seeded random) so the
repository itself holds no literal key-shaped string.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import json
import random
import string
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cassettes_app import secrets
from cassettes_app.secrets import (
    LEAK,
    REDACTED,
    SecretHit,
    redact_text,
    redact_value,
    scan_headers,
    scan_json,
    scan_text,
    scan_url,
    scanning,
    shannon_entropy,
)

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
UPPER = string.ascii_uppercase + string.digits


def rand(n: int, alphabet: str = ALNUM, seed: object = 0) -> str:
    """Return n seeded-random characters from alphabet."""
    rng = random.Random(f"{seed}|{n}|{alphabet}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def big_random(n: int, seed: int = 0) -> str:
    """Return n seeded-random alphanumeric characters, fast."""
    table = bytes(ord(ALNUM[i % 62]) for i in range(256))
    return random.Random(seed).randbytes(n).translate(table).decode("ascii")


def sha(secret: str) -> str:
    """Return the sha256 hex of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def b64url(data: dict[str, object]) -> str:
    """Encode a JSON object the way JWT segments are encoded."""
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# ------------------------------------------------------------------ fake keys


def openai_project(seed: object = 0) -> str:
    """A project key shaped like sk-proj-<74>T3BlbkFJ<74>."""
    return "sk-" + "proj-" + rand(74, URLSAFE, seed) + "T3Blbk" + "FJ" + rand(74, URLSAFE, seed)


def openai_legacy(seed: object = 0) -> str:
    """A legacy key: sk-<20>T3BlbkFJ<20>."""
    return "sk-" + rand(20, ALNUM, seed) + "T3Blbk" + "FJ" + rand(20, ALNUM, f"{seed}b")


def openai_demo_fake() -> str:
    """The demo's fake project key: high entropy, with FAKE in it."""
    digest = base64.b64encode(hashlib.sha256(b"cassette-review demo - not a real key").digest())
    middle = digest.decode().rstrip("=").replace("+", "x").replace("/", "Q")
    return "sk-" + "proj-" + "FAKE" + middle + "FAKE" + "demo"


def anthropic(seed: object = 0) -> str:
    """An Anthropic key: sk-ant-api03-<93>AA."""
    return "sk-" + "ant-" + "api03-" + rand(93, URLSAFE, seed) + "AA"


def google(seed: object = 0) -> str:
    """A Google API key: AIza<35>."""
    return "AI" + "za" + rand(35, URLSAFE, seed)


def aws_key_id(seed: object = 0) -> str:
    """An AWS access key id: AKIA<16>."""
    return "AK" + "IA" + rand(16, string.ascii_uppercase + "234567", seed)


def aws_secret(seed: object = 0) -> str:
    """An AWS secret access key: 40 base64 characters."""
    return rand(40, B64, seed)


def github_pat(seed: object = 0) -> str:
    """A classic GitHub token: ghp_<36>."""
    return "gh" + "p_" + rand(36, ALNUM, seed)


def github_fine(seed: object = 0) -> str:
    """A fine-grained GitHub token: github_pat_<22>_<59>."""
    return "github" + "_pat_" + rand(22, ALNUM, seed) + "_" + rand(59, ALNUM, seed)


def slack_token(seed: object = 0) -> str:
    """A Slack bot token."""
    digits = string.digits
    return "xo" + "xb-" + rand(11, digits, seed) + "-" + rand(13, digits, seed) + "-" + rand(24)


def slack_webhook(seed: object = 0) -> str:
    """A Slack incoming-webhook URL."""
    path = "T" + rand(10, UPPER, seed) + "/B" + rand(10, UPPER, seed) + "/" + rand(24, ALNUM, seed)
    return "https://hooks" + ".slack.com/services/" + path


def jwt(seed: object = 0) -> str:
    """A signed JWT."""
    payload = {"sub": rand(12, ALNUM, seed), "iat": 1700000000}
    return b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url(payload) + "." + rand(43, URLSAFE)


def private_key(seed: object = 0) -> str:
    """A PEM private key block."""
    lines = [rand(64, B64, f"{seed}-{i}") for i in range(12)]
    return (
        "-----BEGIN RSA "
        + "PRIVATE KEY-----\n"
        + "\n".join(lines)
        + "\n-----END RSA PRIVATE KEY-----"
    )


def huggingface(seed: object = 0) -> str:
    """A Hugging Face token: hf_<34 letters>."""
    return "h" + "f_" + rand(34, string.ascii_letters, seed)


def stripe(seed: object = 0) -> str:
    """A live Stripe secret key."""
    return "sk" + "_live_" + rand(24, ALNUM, seed)


# rule, builder, how the key sits in a file, a placeholder in the same position
PROVIDERS: list[tuple[str, Callable[[object], str], str, str]] = [
    ("openai-api-key", openai_project, "{}", "sk-" + "x" * 48),
    ("openai-api-key", openai_legacy, "{}", "sk-" + "proj-" + "*" * 20),
    ("anthropic-api-key", anthropic, "{}", "sk-" + "ant-api03-" + "X" * 95),
    ("google-api-key", google, "{}", "AI" + "za" + "X" * 35),
    ("aws-access-key-id", aws_key_id, "{}", "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"),
    (
        "aws-secret-access-key",
        aws_secret,
        "aws_secret_access_key = {}",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    ),
    ("github-pat", github_pat, "{}", "gh" + "p_" + "x" * 36),
    ("github-fine-grained-pat", github_fine, "{}", "github" + "_pat_" + "X" * 82),
    ("slack-token", slack_token, "{}", "xo" + "xb-" + "X" * 12 + "-" + "X" * 24),
    (
        "slack-webhook",
        slack_webhook,
        "{}",
        "https://hooks" + ".slack.com/services/T00000000/B00000000/" + "X" * 24,
    ),
    ("jwt", jwt, "{}", b64url({"alg": "HS256"}) + "." + b64url({"sub": "1"}) + ".REDACTED"),
    (
        "private-key",
        private_key,
        "{}",
        "-----BEGIN " + "PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
    ),
    ("huggingface-token", huggingface, "{}", "h" + "f_" + "x" * 34),
    ("stripe-key", stripe, "{}", "sk" + "_live_" + "x" * 24),
]
PROVIDER_IDS = [f"{rule}-{i}" for i, (rule, *_) in enumerate(PROVIDERS)]


def leaks(hits: list[SecretHit]) -> list[SecretHit]:
    """Keep the hits whose status is leak."""
    return [h for h in hits if h.status == LEAK]


# ------------------------------------------------------------- provider rules


@pytest.mark.parametrize(("rule", "build", "layout", "placeholder"), PROVIDERS, ids=PROVIDER_IDS)
def test_provider_key_is_a_leak_with_line_and_column(
    rule: str, build: Callable[[object], str], layout: str, placeholder: str
) -> None:
    """Each provider rule finds its key in free text, with line and column."""
    secret = build("leak")
    line = "export CONFIG=1 # " + layout.format(secret) + " trailing"
    hits = scan_text("first line\n" + line + "\nlast line\n", "repo/.env", start_line=10)
    assert [(h.rule, h.status) for h in hits] == [(rule, LEAK)]
    hit = hits[0]
    assert (hit.path, hit.line) == ("repo/.env", 11)
    core = secret.removeprefix("https://")
    assert hit.column == line.index(core) + 1
    assert hit.fingerprint == sha(core)
    assert hit.context.startswith("text")


@pytest.mark.parametrize(("rule", "build", "layout", "placeholder"), PROVIDERS, ids=PROVIDER_IDS)
def test_provider_placeholder_is_redacted_not_leaked(
    rule: str, build: Callable[[object], str], layout: str, placeholder: str
) -> None:
    """The same position holding a known placeholder gives status redacted."""
    hits = scan_text("key: " + layout.format(placeholder) + "\n", "README.md")
    assert hits, "a placeholder in a key position is reported as redacted"
    assert {(h.rule, h.status) for h in hits} == {(rule, REDACTED)}


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "xxxxxxxx",
        "sk-" + "...REDACTED",
        "OPENAI_API_KEY=sk-" + "..." + "\n",
        "Bearer sk-" + "<your key>",
        "sk-" + "test-key-123",
        "sk-" + "proj-your-key-here",
    ],
)
def test_openai_placeholders(text: str) -> None:
    """Common OpenAI placeholders never count as leaks."""
    assert not leaks(scan_text(text, "p"))
    assert redact_text(text) == text


def test_key_containing_fake_is_still_a_leak() -> None:
    """A provider-shaped high-entropy key is a leak even when it says FAKE."""
    key = openai_demo_fake()
    hits = scan_text('"Authorization": "Bearer ' + key + '"', "cassettes/a.json")
    assert [(h.rule, h.status) for h in hits] == [("openai-api-key", LEAK)]
    assert key not in redact_text("Bearer " + key)


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "ant-api03-" + rand(10),  # far too short
        "AI" + "za" + rand(34) + "!",  # one character short
        "AI" + "za" + rand(36),  # one character long
        "AK" + "IA" + rand(16, string.ascii_lowercase),  # lower case
        "gh" + "p_" + rand(35),  # 35, not 36
        "h" + "f_" + rand(34, string.digits),  # digits
        "sk" + "_test_" + rand(24),  # Stripe test mode
        "eyJ" + rand(20) + "." + rand(20) + "." + rand(20),  # header is not JSON
        "task-" + rand(40),  # sk- inside a word
        "sk-learn and scikit-learn are fine",
        "-----BEGIN PUBLIC KEY-----\n" + rand(64, B64) + "\n-----END PUBLIC KEY-----",
    ],
)
def test_near_misses_are_not_hits(text: str) -> None:
    """Shapes that only look similar to a key are not reported."""
    assert scan_text(text, "p") == []


def test_jwt_without_alg_header_and_with_alg_none() -> None:
    """A JWT header must decode to JSON with alg; an unsigned alg=none token still leaks."""
    no_alg = b64url({"typ": "JWT"}) + "." + b64url({"sub": "1"}) + "." + rand(43)
    assert scan_text(no_alg, "p") == []
    unsigned = b64url({"alg": "none"}) + "." + b64url({"sub": rand(8)}) + "."
    assert [(h.rule, h.status) for h in scan_text(unsigned, "p")] == [("jwt", LEAK)]


def test_escaped_newline_before_key_still_starts_a_token() -> None:
    """A key right after a JSON-escaped newline (\\n) is found."""
    key = github_pat("esc")
    hits = scan_text('{"log": "line one\\n' + key + '"}', "trace.jsonl")
    assert [h.rule for h in hits] == ["github-pat"]


# ------------------------------------------------------------------ headers

CREDENTIAL_HEADERS = [
    "Authorization",
    "AUTHORIZATION",
    "authorization",
    "Proxy-Authorization",
    "x-api-key",
    "X-Api-Key",
    "api-key",
    "api_key",
    "x-goog-api-key",
]


@pytest.mark.parametrize("where", ["request", "response"])
@pytest.mark.parametrize("name", CREDENTIAL_HEADERS)
def test_credential_header_names_in_requests_and_responses(where: str, name: str) -> None:
    """Credential-bearing header names are flagged whatever their case, both directions."""
    opaque = rand(40, ALNUM, name)
    value = ("Bearer " if "authorization" in name.lower() else "") + opaque
    hits = scan_headers({name: value}, "cassettes/a.yaml", where=where, line=12)
    assert [(h.rule, h.status, h.context, h.line) for h in hits] == [
        ("credential-header", LEAK, f"{where} header {name}", 12)
    ]
    assert hits[0].fingerprint == sha(opaque)


def test_header_containers_lists_pairs_and_har() -> None:
    """Dicts with list values, lists of pairs and HAR name/value dicts all work."""
    opaque = rand(32, ALNUM, "containers")
    forms: list[object] = [
        {"Authorization": ["Bearer " + opaque]},
        [("Authorization", "Bearer " + opaque)],
        [["authorization", ["Bearer " + opaque]]],
        [{"name": "Authorization", "value": "Bearer " + opaque}],
    ]
    for headers in forms:
        hits = scan_headers(headers, "h", where="request")  # type: ignore[arg-type]
        assert [(h.rule, h.status, h.fingerprint) for h in hits] == [
            ("credential-header", LEAK, sha(opaque))
        ], headers


def test_provider_key_in_authorization_header_names_the_provider() -> None:
    """A provider key under Authorization is reported by its provider rule."""
    key = openai_project("hdr")
    hits = scan_headers({"Authorization": "Bearer " + key}, "c.json", where="request")
    assert [(h.rule, h.status, h.context) for h in hits] == [
        ("openai-api-key", LEAK, "request header Authorization")
    ]
    hits = scan_headers({"X-Trace": "k=" + anthropic("x")}, "c.json", where="response")
    assert [(h.rule, h.status) for h in hits] == [("anthropic-api-key", LEAK)]


HEADER_PLACEHOLDERS = [
    "<OPENAI_ACCESS_TOKEN>",
    "Bearer <OPENAI_API_KEY>",
    "**REDACTED**",
    "AUTHORIZATION-XXX",
    "Bearer DUMMY",
    "Bearer dummy",
    "Bearer <token>",
    "Bearer x",
    "Basic x",
    "Basic " + base64.b64encode(b"user:password").decode(),
    "Bearer sk-" + "x" * 40,
    "Bearer sk-" + "...REDACTED",
    "Bearer ***",
    "REDACTED",
    "<redacted>",
    "***",
    "FILTERED",
    "",
    "test",
    "dummy",
    "fake",
    "changeme",
    "xxxxxxxxxxxxxxxx",
    "Bearer $OPENAI_API_KEY",
    "Bearer ${OPENAI_API_KEY}",
    "your-api-key-here",
]


@pytest.mark.parametrize("value", HEADER_PLACEHOLDERS)
def test_header_placeholders_are_redacted(value: str) -> None:
    """Known placeholders in credential headers give status redacted, never leak."""
    for name in ("Authorization", "x-api-key"):
        hits = scan_headers([(name, value)], "c.yaml", where="request")
        assert hits and all(h.status == REDACTED for h in hits), (name, value)


def test_basic_auth_with_a_real_password_leaks() -> None:
    """Basic credentials that decode to a real-looking password are a leak."""
    cred = base64.b64encode(("alice:" + rand(18, ALNUM, "basic")).encode()).decode()
    hits = scan_headers({"Authorization": "Basic " + cred}, "c", where="request")
    assert [(h.rule, h.status, h.fingerprint) for h in hits] == [
        ("credential-header", LEAK, sha(cred))
    ]


def test_cookies_flag_values_not_attributes() -> None:
    """Cookie pairs are each checked; Set-Cookie attributes are not secrets."""
    a, b = rand(40, ALNUM, "cookie-a"), rand(24, ALNUM, "cookie-b")
    hits = scan_headers(
        {"Set-Cookie": [f"__cf_bm={a}; path=/; expires=Thu, 01 Jan 2030 00:00:00 GMT; HttpOnly"]},
        "c",
        where="response",
    )
    assert [(h.status, h.fingerprint, h.context) for h in hits] == [
        (LEAK, sha(a), "response header Set-Cookie (__cf_bm)")
    ]
    hits = scan_headers({"cookie": f"session={a}; csrftoken={b}"}, "c", where="request")
    assert [h.fingerprint for h in leaks(hits)] == [sha(a), sha(b)]


def test_ordinary_headers_are_not_hits() -> None:
    """Ordinary response headers, ids and digests are not credentials."""
    headers = {
        "Content-Type": "application/json",
        "openai-organization": "user-" + rand(24, string.ascii_lowercase),
        "openai-processing-ms": "412",
        "x-request-id": "req_" + sha("x")[:32],
        "etag": '"' + sha("body") + '"',
        "cf-ray": rand(16, "0123456789abcdef") + "-AMS",
        "x-ratelimit-remaining-tokens": "149999",
        None: None,
    }
    assert scan_headers(headers, "c", where="response") == []  # type: ignore[arg-type]


# ---------------------------------------------------------------------- URLs


def test_credential_query_parameters() -> None:
    """Credential query parameters are found, named, and provider keys keep their rule."""
    key, opaque, sig = google("q"), rand(24, ALNUM, "q"), sha("sig")
    url = f"https://api.example.com/v1/models?key={key}&api_key={opaque}&X-Amz-Signature={sig}"
    hits = scan_url(url, "c.yaml", line=3)
    got = {(h.rule, h.status, h.context, h.fingerprint) for h in hits}
    assert got == {
        ("google-api-key", LEAK, "query parameter key", sha(key)),
        ("credential-query", LEAK, "query parameter api_key", sha(opaque)),
        ("credential-query", LEAK, "query parameter X-Amz-Signature", sha(sig)),
    }
    assert all(h.line == 3 for h in hits)


def test_presigned_url_credential_names_the_aws_key() -> None:
    """X-Amz-Credential carries the access key id."""
    key_id = aws_key_id("presign")
    url = f"https://b.s3.amazonaws.com/o?X-Amz-Credential={key_id}%2F20240101%2Fus-east-1%2Fs3"
    assert [(h.rule, h.status) for h in scan_url(url, "u")] == [("aws-access-key-id", LEAK)]


def test_query_placeholders_and_plain_urls() -> None:
    """Placeholder parameters are redacted; URLs without credentials give nothing."""
    hits = scan_url("https://x.test/a?key=REDACTED&token=%3Ctoken%3E&sig=", "u")
    assert hits and all(h.status == REDACTED for h in hits)
    for url in (
        "https://api.openai.com/v1/chat/completions",
        "https://example.com/search?q=cats&page=2&sort=new",
        "http://localhost:8000/admin/",
        "http://[::1",  # unparseable: no exception
    ):
        assert scan_url(url, "u") == [], url


def test_user_password_in_url() -> None:
    """user:password@ is a leak unless the password is a placeholder."""
    password = rand(14, ALNUM, "userinfo")
    hits = scan_url(f"https://bob:{password}@git.example.com/repo.git", "u")
    assert [(h.rule, h.status, h.fingerprint) for h in hits] == [
        ("basic-auth-url", LEAK, sha(password))
    ]
    hits = scan_url("postgres://app:password@db:5432/app", "u")
    assert [(h.rule, h.status) for h in hits] == [("basic-auth-url", REDACTED)]


def test_fragment_access_token() -> None:
    """An OAuth implicit-flow fragment is checked like a query string."""
    token = rand(30, ALNUM, "frag")
    hits = scan_url(f"https://app.test/cb#access_token={token}&state=1", "u")
    assert [(h.rule, h.fingerprint) for h in hits] == [("credential-query", sha(token))]


# ---------------------------------------------------------------------- JSON


def test_json_walk_credential_names_and_paths() -> None:
    """Credential-named keys with random values leak; their JSON path is the context."""
    doc = {
        "config": {
            "api_key": rand(32, ALNUM, "j1"),
            "apiKey": rand(40, B64, "j2"),
            "client_secret": rand(32, "0123456789abcdef", "j3"),
            "password": "changeme",
            "access_token": "short",
            "private_key": private_key("json"),
        },
        "items": [{"note": "uses " + github_pat("json")}],
    }
    hits = scan_json(doc, "settings.json", line=1)
    got = [(h.rule, h.status, h.context) for h in hits]
    assert got == [
        ("high-entropy-credential", LEAK, "json key api_key at $.config.api_key"),
        ("high-entropy-credential", LEAK, "json key apiKey at $.config.apiKey"),
        ("high-entropy-credential", LEAK, "json key client_secret at $.config.client_secret"),
        ("high-entropy-credential", REDACTED, "json key password at $.config.password"),
        ("private-key", LEAK, "json key private_key at $.config.private_key"),
        ("github-pat", LEAK, "json $.items[0].note"),
    ]
    assert all(h.line == 1 for h in hits)


def test_json_cassette_headers_and_har_entries() -> None:
    """Header-named keys (VCR) and HAR name/value entries use the header rules."""
    opaque = rand(36, ALNUM, "vcr")
    vcr = {"interactions": [{"request": {"headers": {"authorization": ["Bearer " + opaque]}}}]}
    hits = scan_json(vcr, "c.json")
    assert [(h.rule, h.status) for h in hits] == [("credential-header", LEAK)]
    assert hits[0].context.endswith("$.interactions[0].request.headers.authorization")
    har = {
        "request": {
            "headers": [{"name": "x-api-key", "value": opaque}],
            "queryString": [{"name": "key", "value": google("har")}],
        }
    }
    assert sorted(h.rule for h in scan_json(har, "a.har")) == [
        "credential-header",
        "google-api-key",
    ]


def test_json_filtered_cassette_has_no_leak() -> None:
    """A cassette recorded with filtered headers has no leak."""
    doc = {
        "key": sha("request")[:16],
        "request": {"headers": {"Authorization": ["DUMMY"], "x-api-key": "**REDACTED**"}},
        "response": {"headers": {"set-cookie": ["FILTERED"]}, "body": {"id": "chatcmpl-1"}},
    }
    hits = scan_json(doc, "c.json")
    assert hits and not leaks(hits)


def test_json_depth_and_node_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk is iterative and bounded: deep nesting and huge documents are cut off."""
    deep: object = {"api_key": rand(32, ALNUM, "deep")}
    for _ in range(10_000):
        deep = [deep]
    assert scan_json(deep, "deep.json") == []  # beyond depth 200, and no RecursionError
    shallow: object = {"api_key": rand(32, ALNUM, "shallow")}
    for _ in range(150):
        shallow = [shallow]
    assert len(scan_json(shallow, "ok.json")) == 1
    monkeypatch.setattr(scanning, "MAX_JSON_NODES", 50)
    wide = [*range(100), {"api_key": rand(32, ALNUM, "wide")}]
    assert scan_json(wide, "wide.json") == []


# ------------------------------------------------------- generic rules in text


def test_credential_values_in_free_text() -> None:
    """Authorization, x-api-key and credential assignments in text are found."""
    opaque, assigned = rand(40, ALNUM, "t1"), rand(32, B64, "t2")
    text = (
        f"curl -H 'Authorization: Bearer {opaque}' https://x.test\n"
        f"MY_SERVICE_API_KEY={assigned}\n"
        f"x-api-key: {rand(30, ALNUM, 't3')}\n"
    )
    hits = scan_text(text, "run.log")
    assert [(h.rule, h.line) for h in hits] == [
        ("credential-header", 1),
        ("high-entropy-credential", 2),
        ("credential-header", 3),
    ]
    assert hits[0].fingerprint == sha(opaque)
    assert hits[1].context == "text MY_SERVICE_API_KEY"


# ------------------------------------------------------------ false positives


def false_positive_corpus() -> str:
    """Text that mentions keys and tokens and holds random-looking values, but no secret."""
    rng = random.Random(42)
    uuids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(20)]
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(20)]
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(4000)).decode()
    cassette = "\n".join(
        [
            "interactions:",
            "- request:",
            '    body: \'{"model": "gpt-4o-mini", "max_tokens": 256}\'',
            "    headers:",
            "      Content-Type:",
            "      - application/json",
            "    method: POST",
            "    uri: https://api.openai.com/v1/chat/completions",
            "  response:",
            "    headers:",
            "      openai-organization:",
            "      - user-" + rand(24, string.ascii_lowercase, "org"),
            "      x-request-id:",
            "      - req_" + digests[0][:32],
            "    body:",
            '      string: \'{"id": "chatcmpl-' + rand(29, ALNUM, "id") + '", '
            '"usage": {"prompt_tokens": 123456, "completion_tokens": 42}}\'',
            "    status: {code: 200, message: OK}",
        ]
    )
    prose = (
        "Set the API key in your environment before running. The secret to stable tests is "
        "isolation. Tokens are counted per request, and max_tokens=256 limits the output. "
        "Keep passwords in a password manager. See https://example.com/docs?page=2#tokens."
    )
    code = "\n".join(
        [
            'api_key = os.environ["OPENAI_API_KEY"]',
            "client = OpenAI(api_key=settings.OPENAI_API_KEY)",
            'headers = {"Authorization": f"Bearer {api_key}"}',
            "token = request.headers.get('Authorization')",
            "password_field = forms.CharField(widget=forms.PasswordInput)",
            "secret = secrets.token_hex(32)",
            "total_tokens: 184467",
            'logprob = {"token": "Hello", "logprob": -0.01}',
        ]
    )
    return "\n".join(
        [
            *uuids,
            *digests,
            json.dumps({"key": digests[1][:16], "sha256": digests[2], "trace_id": uuids[0]}),
            "data:image/png;base64," + png,
            json.dumps({"body": {"encoding": "base64", "string": png}}),
            cassette,
            prose,
            code,
        ]
    )


def test_false_positive_corpus_has_no_hits() -> None:
    """UUIDs, digests, cassette keys, base64 images, prose, code and a clean cassette."""
    corpus = false_positive_corpus()
    assert scan_text(corpus, "corpus.txt") == []
    assert redact_text(corpus) == corpus
    doc = {
        "ids": [str(uuid.UUID(int=i)) for i in range(5)],
        "sha256": sha("x"),
        "key": sha("k")[:16],
        "body": {"string": base64.b64encode(random.Random(1).randbytes(600)).decode()},
        "usage": {"prompt_tokens": 10, "total_tokens": 20},
        "next_page_token": rand(40, B64, "page"),
        "logprobs": [{"token": "Hello", "logprob": -0.1}],
    }
    assert scan_json(doc, "c.json") == []


# ------------------------------------------------------------------ redaction


def test_redact_text_on_a_log_with_many_secrets() -> None:
    """Every secret in a log is replaced; ordinary text survives; redaction is stable."""
    pieces = {
        "openai": openai_project("log"),
        "google": google("log"),
        "bearer": rand(40, ALNUM, "log-bearer"),
        "anthropic": anthropic("log"),
        "json_key": rand(32, ALNUM, "log-json"),
        "password": "pw-" + rand(9, ALNUM, "log-pw"),
        "userinfo": rand(12, ALNUM, "log-user"),
        "aws_id": aws_key_id("log"),
        "aws_secret": aws_secret("log"),
        "jwt": jwt("log"),
        "slack": slack_token("log"),
        "hf": huggingface("log"),
        "stripe": stripe("log"),
        "fine": github_fine("log"),
        "xapikey": rand(30, ALNUM, "log-x"),
        "pem": private_key("log"),
    }
    log = "\n".join(
        [
            "INFO starting run 7 for model gpt-4o-mini",
            f"DEBUG environ({{'OPENAI_API_KEY': '{pieces['openai']}', 'HOME': '/root'}})",
            f"> GET https://generativelanguage.googleapis.com/v1/models?key={pieces['google']}",
            f"> Authorization: Bearer {pieces['bearer']}",
            f"> x-api-key: {pieces['anthropic']}",
            f"> X-Api-Key: {pieces['xapikey']}",
            json.dumps({"api_key": pieces["json_key"], "model": "gpt-4o-mini"}),
            f"db password={pieces['password']}",
            f"git clone https://bob:{pieces['userinfo']}@git.example.com/repo.git",
            f"AWS_ACCESS_KEY_ID={pieces['aws_id']} AWS_SECRET_ACCESS_KEY={pieces['aws_secret']}",
            f"session token {pieces['jwt']}",
            f"slack={pieces['slack']} hf={pieces['hf']} stripe={pieces['stripe']}",
            f"GH_TOKEN={pieces['fine']}",
            json.dumps({"private_key": pieces["pem"]}),
            pieces["pem"],
            "INFO done: 3 passed in 0.42s",
        ]
    )
    out = redact_text(log)
    for name, secret in pieces.items():
        assert secret not in out, name
    for line in pieces["pem"].splitlines()[1:-1]:
        assert line not in out
    for kept in ("INFO starting run 7", "gpt-4o-mini", "'HOME': '/root'", "3 passed in 0.42s"):
        assert kept in out
    assert redact_value(pieces["openai"]) in out
    assert redact_text(out) == out
    assert leaks(scan_text(out, "log")) == []


def test_redact_value_shape() -> None:
    """The redacted form keeps at most 4 chars and at most a quarter, then length and hash."""
    key = openai_legacy("shape")
    assert redact_value(key) == f"{key[:4]}…({len(key)} chars, #{sha(key)[:8]})"
    assert redact_value("abcdefg").startswith("a…(7 chars, #")
    assert redact_value("abc").startswith("…(3 chars, #")
    assert secrets.fingerprint(key) == sha(key)


def test_shannon_entropy() -> None:
    """Entropy is 0 for one repeated symbol and log2(n) for n distinct symbols."""
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    assert shannon_entropy(string.hexdigits[:16]) == pytest.approx(4.0)


# ------------------------------------------------------------- never in full


def hits_for_every_rule() -> list[tuple[str, str, list[SecretHit]]]:
    """Return (rule, secret, hits) for one leak of every rule."""
    out = []
    for rule, build, layout, _ in PROVIDERS:
        secret = build("full")
        out.append((rule, secret.removeprefix("https://"), scan_text(layout.format(secret), "p")))
    header = rand(40, ALNUM, "full-h")
    out.append(
        ("credential-header", header, scan_headers({"authorization": header}, "p", where="request"))
    )
    query = rand(40, ALNUM, "full-q")
    out.append(("credential-query", query, scan_url("https://h.test/?sig=" + query, "p")))
    entropy = rand(40, B64, "full-e")
    out.append(("high-entropy-credential", entropy, scan_json({"client_secret": entropy}, "p")))
    password = rand(20, ALNUM, "full-u")
    out.append(("basic-auth-url", password, scan_url(f"https://u:{password}@h.test/", "p")))
    cookie = rand(40, ALNUM, "full-c")
    out.append(
        (
            "session-cookie",
            cookie,
            scan_headers({"set-cookie": f"__cf_bm={cookie}; path=/"}, "p", where="response"),
        )
    )
    return out


def test_secret_never_appears_in_full() -> None:
    """No field and no repr of a hit contains the secret, for every rule."""
    seen_rules = set()
    for rule, secret, hits in hits_for_every_rule():
        assert [h.rule for h in hits] == [rule]
        seen_rules.add(rule)
        for hit in hits:
            assert secret not in repr(hit)
            for field in dataclasses.fields(hit):
                assert secret not in str(getattr(hit, field.name)), (rule, field.name)
            assert hit.fingerprint == sha(secret)
            assert len(hit.redacted.split("…")[0]) <= min(4, len(secret) // 4)
    assert seen_rules == set(secrets.RULES)


def test_hits_are_frozen() -> None:
    """Hits are immutable value objects."""
    hit = scan_text(github_pat("frozen"), "p")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        hit.status = REDACTED  # type: ignore[misc]


def test_odd_inputs_do_not_raise() -> None:
    """Bytes, numbers and None in scanned structures are tolerated."""
    assert scan_text(b"api_key=" + rand(30).encode(), "p")  # type: ignore[arg-type]
    assert scan_headers({"x-api-key": b"x", "n": 3}, "p", where="request")  # type: ignore[dict-item]
    assert scan_json({"a": [1, 2.5, None, True, {"b": b"bytes"}], 3: "x"}, "p") == []
    assert redact_text("") == ""


# ----------------------------------------------------------------- performance


@pytest.mark.scale
def test_adversarial_10mb_scans_in_under_a_second() -> None:
    """Pathological input is linear: 10 MB of near-misses scans and redacts in < 1 s each."""
    mb = 1_000_000
    text = "".join(
        [
            "a" * mb,
            "sk-" + big_random(mb, 1),  # a prefix followed by a huge token
            "eyJ" * (mb // 3),
            "eyJhbGciOiJIUzI1NiJ9." * (mb // 21),
            "-----BEGIN " * (mb // 11),
            "-----BEGIN PRIVATE KEY-----" + "A" * mb,
            "AKIA" * (mb // 4),
            "Authorization: Bearer " * (mb // 22),
            "://a:" * (mb // 5),
            "api_key=" * (mb // 8),
        ]
    )
    assert len(text) >= 10 * mb
    # CPU time, with headroom: a linear scan takes ~0.4 s here; a quadratic one takes minutes,
    # and a busy CI machine must not turn wall-clock noise into a failure.
    start = time.process_time()
    scan_text(text, "big.log")
    scanned = time.process_time() - start
    start = time.process_time()
    redact_text(text)
    redacted = time.process_time() - start
    assert scanned < 2.0 and redacted < 2.0, (scanned, redacted)


def test_sk_followed_by_1mb_is_fast() -> None:
    """K-12: sk- followed by 1 MB of alphanumerics, and 1 MB of 'a'."""
    for text in ("sk-" + big_random(1_000_000, 2), "a" * 1_000_000):
        start = time.perf_counter()
        assert scan_text(text, "p") == []
        assert redact_text(text) == text
        assert time.perf_counter() - start < 1.0


@pytest.mark.scale
def test_redact_big_log_is_fast() -> None:
    """A 5 MB JSON-lines trace with a few keys redacts in well under a second."""
    line = json.dumps(
        {
            "event": "llm.call",
            "model": "gpt-4o-mini",
            "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876},
            "headers": {"content-type": "application/json", "x-request-id": sha("r")[:24]},
            "text": "The ticket is about a refund; the customer asked twice. " * 3,
        }
    )
    key = openai_project("big")
    lines = [line] * (5_000_000 // len(line))
    lines[len(lines) // 2] = json.dumps({"api_key": key})
    log = "\n".join(lines)
    start = time.perf_counter()
    out = redact_text(log)
    assert time.perf_counter() - start < 1.0
    assert key not in out and len(out) < len(log)


# --------------------------------------------------------------- module hygiene


def test_module_is_stdlib_only_and_offline() -> None:
    """The package imports only the standard library (and itself): no Django, no network."""
    modules = set()
    for path in Path(secrets.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
    modules -= {m for m in modules if m.startswith("cassettes_app.secrets.")}  # each other
    assert modules
    for name in modules:
        assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, name
    assert not modules & {"socket", "ssl", "http.client", "urllib.request", "django"}
