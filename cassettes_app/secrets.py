"""Find and redact credentials in recordings, traces, logs and repository files.

Pure Python, standard library only (no Django), so workers and scripts can use it.

Provider key shapes are adapted from gitleaks (MIT licence,
https://github.com/gitleaks/gitleaks, ``cmd/generate/config/rules/*.go``) and
detect-secrets (Apache-2.0 licence, https://github.com/Yelp/detect-secrets,
``detect_secrets/plugins/``), including detect-secrets' entropy limits for
high-entropy strings. They were rewritten for Python's backtracking ``re``: every
pattern starts with a literal or a rare character set, and every repeat is bounded
and possessive, so a scan is linear in the input.

Nothing here ever calls a provider to "verify" a key, and no field, repr,
exception or log message carries a full secret: hits hold a short prefix, the
length and a hash (see ``redact_value``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "LEAK",
    "MAX_HITS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "REDACTED",
    "RULES",
    "SecretHit",
    "TextProfile",
    "fingerprint",
    "is_placeholder",
    "redact_text",
    "redact_value",
    "scan_and_profile",
    "scan_headers",
    "scan_json",
    "scan_text",
    "scan_url",
    "shannon_entropy",
    "text_profile",
]

LEAK = "leak"
REDACTED = "redacted"
MAX_JSON_DEPTH = 200
MAX_JSON_NODES = 1_000_000
MAX_HITS = 10_000  # per scan_text call; the rest of a flood of hits adds nothing

RULES = (
    "openai-api-key",
    "anthropic-api-key",
    "google-api-key",
    "aws-access-key-id",
    "aws-secret-access-key",
    "github-pat",
    "github-fine-grained-pat",
    "slack-token",
    "slack-webhook",
    "jwt",
    "private-key",
    "huggingface-token",
    "stripe-key",
    "credential-header",
    "credential-query",
    "high-entropy-credential",
    "basic-auth-url",
)


@dataclass(frozen=True, slots=True)
class SecretHit:
    """One credential (or a placeholder standing in for one) found somewhere."""

    rule: str
    path: str
    line: int | None
    column: int | None
    status: str  # LEAK or REDACTED (a known placeholder sits where a secret would)
    redacted: str  # short prefix, length and hash; never the secret
    fingerprint: str  # sha256 hex of the full secret, for de-duplication
    context: str  # where: "request header Authorization", "query parameter key", "text", ...


# ------------------------------------------------------------------ small helpers


def fingerprint(secret: str) -> str:
    """Return the sha256 hex digest of a secret (used to de-duplicate hits)."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def redact_value(secret: str) -> str:
    """Return the display form: at most 4 (and at most a quarter) chars, length, hash."""
    n = len(secret)
    keep = min(4, n // 4)
    return f"{secret[:keep]}…({n} chars, #{fingerprint(secret)[:8]})"


def shannon_entropy(s: str) -> float:
    """Return the Shannon entropy of ``s`` in bits per character."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_HEX = re.compile(r"[0-9a-fA-F]+", re.ASCII)
_KEYCHARS = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)
_NUMERIC = re.compile(r"[0-9][0-9.,:_+-]*", re.ASCII)
_CODE_REF = re.compile(r"[A-Za-z_$][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)*(?:\(\))?", re.ASCII)


def _high_entropy(value: str) -> bool:
    """Tell whether a value under a credential name looks random (detect-secrets limits)."""
    n = len(value)
    if n < 16 or value.isdigit():
        return False
    ent = shannon_entropy(value)
    if _HEX.fullmatch(value):
        return ent > 3.0
    # detect-secrets uses 4.5 for base64; a short string cannot reach that, so the
    # limit scales down with the length (16 chars: 3.4, 40+ chars: 4.5).
    return ent > min(4.5, 0.85 * math.log2(n))


def _is_code_ref(value: str) -> bool:
    """Tell whether a value is a variable or attribute name rather than a credential."""
    if not _CODE_REF.fullmatch(value):
        return False
    return "." in value or "_" in value or len(value) < 16


# -------------------------------------------------------------- placeholders

_MASK_RUN = re.compile(r"[xX]{4,}|\*|•|…|\.\.\.|#{4,}|0{8,}|_{4,}", re.ASCII)
_MASK_WORDS = re.compile(
    r"redact|filtered|scrubbed|censored|omitted|removed|masked|hidden|sanitized|obfuscated"
    r"|placeholder|changeme|change_me|your[_-]?(?:api|key|token|secret|own)"
)
_TEMPLATE = re.compile(
    r"<[^<>]{0,80}>|\$\{[^{}]{0,80}\}|\{\{[^{}]{0,80}\}\}|%\([^()]{0,80}\)s|\[[A-Za-z_ -]{1,80}\]",
    re.ASCII,
)
# References to where a secret lives: fine in a recording, not a secret themselves.
_REFERENCE = re.compile(
    r"\$[A-Za-z_][A-Za-z0-9_]{0,80}|(?:os\.environ|os\.getenv|process\.env|getenv)\S{0,80}",
    re.ASCII,
)
# A format field ({api_key}, {self.token}) means an unfilled template, never a secret.
_FORMAT_FIELD = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.\[\]'\"]{0,80}(?:\}|$)", re.ASCII)
_WORD_PARTS = re.compile(r"[a-z]+|[0-9]+", re.ASCII)
_PLACEHOLDER_TEXT = """
    test testing tests tester dummy fake fakes mock mocked mocks sample samples example examples
    changeme change me placeholder your yours my our the a an here goes insert replace put with
    set fill in to be of for api apikey key keys token tokens access secret secrets password
    passwd pass pwd credential credentials cred creds auth authorization bearer basic openai
    anthropic claude google gemini aws github gh slack stripe hf huggingface azure none null nil
    undefined na n a empty unset foo bar baz qux abc xyz todo tbd default demo local dev value
    env sk proj ant live id client org project user username admin service account invalid bogus
    random string str redacted filtered hidden session cookie sig signature private public new
    real valid sandbox stub x xx xxx xxxx ok no yes true false unknown missing not provided
    dummykey testkey fakekey mykey secretkey apitoken accesstoken authtoken
"""
_PLACEHOLDER_WORDS = frozenset(_PLACEHOLDER_TEXT.split())
_STRONG_TEXT = """
    test testing dummy fake mock mocked sample example examples changeme placeholder your
    redacted filtered invalid bogus here insert replace todo tbd xxx xxxx x xx
    dummykey testkey fakekey mykey
"""
_STRONG_WORDS = frozenset(_STRONG_TEXT.split())


def _masked(value: str) -> bool:
    """Tell whether a value is visibly masked: empty, REDACTED, ****, xxxx, <TEMPLATE>, ..."""
    v = value.strip(" \t\r\n'\"`")
    if not v or (len(v) >= 4 and len(set(v)) <= 2):
        return True
    if _MASK_RUN.search(v) or _TEMPLATE.fullmatch(v):
        return True
    if v.endswith(("EXAMPLE", "EXAMPLEKEY")):  # AWS's documented example keys
        return True
    return _MASK_WORDS.search(v.lower()) is not None


def _word_parts(value: str) -> list[str] | None:
    """Split a value into lowercase words and numbers when it is made only of placeholders."""
    parts = _WORD_PARTS.findall(value.lower())
    if not parts:
        return None
    for p in parts:
        if p.isdigit():
            if len(p) > 6:
                return None
        elif p not in _PLACEHOLDER_WORDS and set(p) != {"x"}:
            return None
    return parts


def _strong_placeholder(value: str) -> bool:
    """Tell whether a value is masked or made of words like test, dummy, your-key-here."""
    if _masked(value):
        return True
    parts = _word_parts(value)
    return bool(parts) and any(p in _STRONG_WORDS or set(p) == {"x"} for p in parts)


def is_placeholder(value: str) -> bool:
    """Tell whether a credential-position value is a placeholder rather than a secret."""
    v = value.strip(" \t\r\n'\"`")
    if len(v) <= 3 or _masked(v) or _REFERENCE.fullmatch(v) or _FORMAT_FIELD.search(v):
        return True
    if _word_parts(v) is not None:
        return True
    low = v.lower()
    return low in "0123456789abcdefghijklmnopqrstuvwxyz" or low in "1234567890"


# ------------------------------------------------------------------ span model


_MISS = object()
# Priority inside a cluster of overlapping spans (lower wins).
_P_PROVIDER, _P_USERINFO, _P_HEADER, _P_QUERY, _P_COOKIE, _P_ASSIGN, _P_BEARER = range(7)


class _Span(NamedTuple):
    """A candidate secret at text[start:end]."""

    start: int
    end: int
    rule: str
    status: str
    detail: str
    prio: int


_FLAGS = re.ASCII | re.DOTALL
_TOKCH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# A candidate is a run of key characters, optionally followed by one mask (***, ..., <X>)
# and a short run: enough to see placeholders, while junk candidates stay short.
_MASK_TAIL = r"(?:(?:\.\.\.|…|\*{1,64}+|•{1,64}+|<[^<>\s]{0,64}>)[A-Za-z0-9_-]{0,64}+)?"


def _body(n: int, chars: str = "A-Za-z0-9_-") -> str:
    """Pattern for a provider key body: up to n key characters and an optional mask."""
    return f"[{chars}]{{0,{n}}}+" + _MASK_TAIL


def _lead(n: int, chars: str = "A-Za-z0-9_-") -> str:
    """Lookbehind to put after an n-char literal: the literal must begin a token."""
    return rf"(?:(?<![{chars}].{{{n}}})|(?<=\\[nrt].{{{n}}}))"


def _too_long(text: str, end: int) -> bool:
    """Tell whether a bounded candidate stopped at its cap inside a longer token."""
    return end < len(text) and text[end] in _TOKCH


# Provider rules: (compiled pattern, classifier). A classifier gets the text and the
# match and returns (start, end, rule, status) or None.
_Classifier = Callable[[str, "re.Match[str]"], "tuple[int, int, str, str] | None"]

_RE_SK = re.compile(r"sk-" + _lead(3) + _body(512), _FLAGS)
_RE_AIZA = re.compile(r"AIza" + _lead(4) + _body(128), _FLAGS)
_RE_AWS = re.compile(r"A(?:KIA|SIA|BIA|CCA)" + _lead(4, "A-Za-z0-9") + _body(32, "A-Z0-9"), _FLAGS)
_RE_GH = re.compile(r"gh[pousr]_" + _lead(4) + _body(128), _FLAGS)
_RE_GHPAT = re.compile(r"github_pat_" + _lead(11) + _body(256), _FLAGS)
_RE_SLACK = re.compile(r"xox[baprse]-" + _lead(5) + _body(256), _FLAGS)
_RE_HOOK = re.compile(
    r"hooks\.slack\.com/(?:services|workflows|triggers)/" + _body(256, "A-Za-z0-9_/+-"), _FLAGS
)
_RE_JWT = re.compile(
    r"eyJ" + _lead(3) + r"([A-Za-z0-9_-]{4,8192}+)\.(" + _body(65536) + r")"
    r"(?:\.(" + _body(8192) + r"))?",
    _FLAGS,
)
_RE_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]{1,24}+ ){0,4}PRIVATE KEY(?: BLOCK)?-----"
    r"([A-Za-z0-9+/=\s:,.*<>()\\-]{0,65536}+)",
    _FLAGS,
)
_RE_PEM_STOP = re.compile(r"-----(?:END[ A-Z0-9]{0,60}+-----|BEGIN )", _FLAGS)
_RE_HF = re.compile(r"hf_" + _lead(3) + _body(128), _FLAGS)
_RE_STRIPE = re.compile(r"k_live_(?<=[sr]k_live_)" + _lead(8) + _body(128), _FLAGS)

_OPENAI_LEGACY = re.compile(r"[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", re.ASCII)
_OPENAI_PREFIXES = ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-")
_ANTHROPIC = re.compile(r"sk-ant-([a-z]{2,8}[0-9]{2})-(.*)", _FLAGS)


def _simple(
    rule: str, prefix_len: int, ok: Callable[[str], bool], start_shift: int = 0
) -> _Classifier:
    """Build a classifier for a prefix plus a body that ``ok`` accepts."""

    def classify(text: str, m: re.Match[str]) -> tuple[int, int, str, str] | None:
        if _too_long(text, m.end()):
            return None
        start, end = m.start() - start_shift, m.end()
        body = text[m.start() + prefix_len : end]
        if body and _strong_placeholder(body):
            return start, end, rule, REDACTED
        if ok(body):
            return start, end, rule, LEAK
        return None

    return classify


def _c_openai(text: str, m: re.Match[str]) -> tuple[int, int, str, str] | None:
    """Classify an ``sk-`` candidate (OpenAI, or Anthropic for ``sk-ant-``)."""
    if _too_long(text, m.end()):
        return None
    start, end = m.span()
    cand = text[start:end]
    if cand.startswith("sk-ant-"):
        am = _ANTHROPIC.fullmatch(cand)
        body = am.group(2) if am else cand[7:]
        if body and _strong_placeholder(body):
            return start, end, "anthropic-api-key", REDACTED
        if am and len(body) >= 20 and _KEYCHARS.fullmatch(body) and shannon_entropy(body) >= 3.0:
            return start, end, "anthropic-api-key", LEAK
        return None
    prefix = next((p for p in _OPENAI_PREFIXES if cand.startswith(p)), "sk-")
    body = cand[len(prefix) :]
    if body and _strong_placeholder(body):
        return start, end, "openai-api-key", REDACTED
    if not _KEYCHARS.fullmatch(body):
        return None
    if prefix == "sk-":
        legacy = _OPENAI_LEGACY.fullmatch(body) is not None
        if legacy or (len(body) >= 32 and body.isalnum() and shannon_entropy(body) >= 3.0):
            return start, end, "openai-api-key", LEAK
        return None
    if len(body) >= 20 and shannon_entropy(body) >= 3.0:
        return start, end, "openai-api-key", LEAK
    return None


def _random(pattern: str, min_entropy: float = 3.0) -> Callable[[str], bool]:
    """Accept a body that fully matches ``pattern`` and is not low-entropy filler."""
    rx = re.compile(pattern, re.ASCII)
    return lambda body: rx.fullmatch(body) is not None and shannon_entropy(body) >= min_entropy


def _aws_id_ok(body: str) -> bool:
    """Accept the 16 characters after AKIA/ASIA/ABIA/ACCA."""
    return re.fullmatch(r"[A-Z0-9]{16}", body, re.ASCII) is not None and len(set(body)) > 4


def _slack_ok(body: str) -> bool:
    """Accept a Slack token body: digits and letters in dash-separated groups."""
    return (
        re.fullmatch(r"[A-Za-z0-9-]{10,}", body, re.ASCII) is not None
        and any(c.isdigit() for c in body)
        and shannon_entropy(body) >= 3.0
    )


_HOOK_SERVICES = re.compile(r"services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}", re.ASCII)
_HOOK_OTHER = re.compile(r"(?:workflows|triggers)/[A-Za-z0-9/]{20,}", re.ASCII)


def _c_hook(text: str, m: re.Match[str]) -> tuple[int, int, str, str] | None:
    """Classify a hooks.slack.com URL."""
    if _too_long(text, m.end()):
        return None
    start, end = m.span()
    tail = text[start + len("hooks.slack.com/") : end]
    secret_part = tail.split("/", 1)[1] if "/" in tail else ""
    if not secret_part:
        return None
    if _strong_placeholder(secret_part):
        return start, end, "slack-webhook", REDACTED
    if _HOOK_SERVICES.fullmatch(tail) or (
        _HOOK_OTHER.fullmatch(tail) and shannon_entropy(secret_part) >= 3.0
    ):
        return start, end, "slack-webhook", LEAK
    return None


def _b64url_json(segment: str) -> Any:
    """Decode one base64url JWT segment to JSON, or return None."""
    if len(segment) > 8192:
        return None
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _c_jwt(text: str, m: re.Match[str]) -> tuple[int, int, str, str] | None:
    """Classify eyJ...eyJ...sig: the header must decode to JSON with "alg"."""
    header = _b64url_json("eyJ" + m.group(1))
    if not isinstance(header, dict) or "alg" not in header:
        return None
    start, end = m.start(), m.end()
    payload, sig = m.group(2), m.group(3)
    if not payload or _strong_placeholder(payload):
        return start, end, "jwt", REDACTED
    if sig is None or sig == "":
        alg = str(header.get("alg", "")).lower()
        return start, end, "jwt", LEAK if alg == "none" else REDACTED
    if _strong_placeholder(sig) or len(sig) < 8:
        return start, end, "jwt", REDACTED
    return start, end, "jwt", LEAK


_PEM_NOISE = re.compile(r"\\[nrt]|\s|^[A-Za-z-]+:[^\n\\]*$", re.MULTILINE)


def _c_pem(text: str, m: re.Match[str]) -> tuple[int, int, str, str] | None:
    """Classify a -----BEGIN ... PRIVATE KEY----- block (the END line is optional)."""
    body_start = m.start(1)
    body = m.group(1)
    stop = _RE_PEM_STOP.search(body)
    if stop and stop.group(0).startswith("-----END"):
        end = body_start + stop.end()
        body = body[: stop.start()]
    else:
        end = body_start + (stop.start() if stop else len(body))
        while end > body_start and text[end - 1] in " \t\r\n\\-":
            end -= 1
        body = text[body_start:end]
    core = _PEM_NOISE.sub("", body.strip("-"))
    if _strong_placeholder(core) or len(core) < 64 or shannon_entropy(core) < 3.0:
        return m.start(), end, "private-key", REDACTED
    return m.start(), end, "private-key", LEAK


_PROVIDERS: tuple[tuple[re.Pattern[str], _Classifier], ...] = (
    (_RE_SK, _c_openai),
    (_RE_AIZA, _simple("google-api-key", 4, _random(r"[A-Za-z0-9_-]{35}"))),
    (_RE_AWS, _simple("aws-access-key-id", 4, _aws_id_ok)),
    (_RE_GH, _simple("github-pat", 4, _random(r"[A-Za-z0-9]{36}"))),
    (_RE_GHPAT, _simple("github-fine-grained-pat", 11, _random(r"[A-Za-z0-9_]{82}"))),
    (_RE_SLACK, _simple("slack-token", 5, _slack_ok)),
    (_RE_HOOK, _c_hook),
    (_RE_JWT, _c_jwt),
    (_RE_PEM, _c_pem),
    (_RE_HF, _simple("huggingface-token", 3, _random(r"[A-Za-z]{34}"))),
    (_RE_STRIPE, _simple("stripe-key", 7, _random(r"[A-Za-z0-9]{16,99}"), start_shift=1)),
)


def _provider_spans(
    text: str, memo: dict[Any, Any] | None = None, only: frozenset[int] | None = None
) -> list[_Span]:
    """Find provider-shaped keys (and their placeholders) in text.

    `only`, when given, names the rules worth running (the others cannot match).
    """
    memo = {} if memo is None else memo
    spans: list[_Span] = []
    for index, (rx, classify) in enumerate(_PROVIDERS):
        if only is not None and index not in only:
            continue
        pos = 0
        while m := rx.search(text, pos):
            s0, e0 = m.span()
            key = (index, text[s0 : e0 + 1])  # the result depends on the match and next char
            got = memo.get(key, _MISS)
            if got is _MISS:
                found = classify(text, m)
                got = None if found is None else (found[0] - s0, found[1] - s0, *found[2:])
                memo[key] = got
            if got is None:
                pos = s0 + 1
                continue
            rs, re_, rule, status = got
            spans.append(_Span(s0 + rs, s0 + re_, rule, status, "", _P_PROVIDER))
            pos = max(s0 + re_, s0 + 1)
    return spans


# ------------------------------------------------------------- generic rules

# These run over an ASCII-lowercased copy of the text; spans map back 1:1.
_SEP = (
    r"(?:\\?[\"'])?\]?[ \t]{0,3}(?:=>|:=|=|:)[ \t]{0,3}"
    r"(?:\r?\n[ \t]{0,24}-[ \t]{1,3})?(?:\\?[\"'])?"
)
_VAL = r"(?P<v><[^<>\s]{0,64}>|\$\{[^{}\s]{0,64}\}|[^\s\"'`,;&\\<>(){}\[\]]{1,4096}+)"
_SCHEME = r"(?:(?P<s>bearer|basic|token|bot|apikey|digest|aws4-hmac-sha256|sso-key)[ \t]{1,3})?"
_SUFFIX = r"[a-z0-9_-]{0,24}+"

_G_AUTH = re.compile(r"(?P<n>authorization)" + _SEP + _SCHEME + _VAL, _FLAGS)
_G_APIKEY = re.compile(r"(?P<n>api[_-]?key" + _SUFFIX + ")" + _SEP + _SCHEME + _VAL, _FLAGS)
_G_TOKEN = re.compile(r"(?P<n>token" + _SUFFIX + ")" + _SEP + _SCHEME + _VAL, _FLAGS)
_G_ASSIGN = tuple(
    re.compile(r"(?P<n>" + word + _SUFFIX + ")" + _SEP + r"(?P<s>)" + _VAL, _FLAGS)
    for word in ("secret", r"passw(?:or)?d", "pwd", r"private[_-]?key")
)
_G_BEARER = re.compile(
    r"(?P<n>bearer)[ \t]{1,3}(?P<s>)(?P<v><[^<>\s]{0,64}>|[A-Za-z0-9._~+/=*-]{1,4096}+)", _FLAGS
)
_G_COOKIE = re.compile(r"(?P<n>cookie)" + _SEP + r"(?P<v>[^\r\n\"'`\\]{1,4096}+)", _FLAGS)
_G_QUERY = re.compile(
    r"[?&](?P<n>key|api_?key|api-key|access_token|token|sig|signature|x-amz-signature"
    r"|x-amz-credential|x-amz-security-token|client_secret|password|secret|refresh_token"
    r"|id_token|auth)=(?P<v>[^\s&#\"'`<>\\]{1,4096}+)",
    _FLAGS,
)
_G_USERINFO = re.compile(r"://(?P<u>[^\s/@:?#\"'<>]{0,64}+):(?P<v>[^\s/@?#\"'<>]{1,128}+)@", _FLAGS)

_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}", re.ASCII)
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]{0,40}+", re.ASCII)
_MAX_VALUE = 2048
_TOKEN_NAME_SKIP = re.compile(
    r"tokens\b|tokeniz|token[_-]?(?:type|count|limit|usage|ids?|len|budget|logprob|index|str)"
    r"|(?:max|num|page|next|prev|cursor|continuation|csrf|xsrf|prompt|completion|sync)[_-]?token",
    re.ASCII | re.IGNORECASE,
)
_HEADER_NAMES = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "anthropic-api-key",
        "x-auth-token",
        "x-access-token",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
    }
)


def _ascii_lower(text: str) -> str:
    """Lowercase text without changing its length, so offsets stay valid."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return text.translate({c: c + 32 for c in range(65, 91)})


def _value_status(value: str, kind: str, redact: bool) -> str | None:
    """Decide whether a value in a credential position is a leak, a placeholder or nothing."""
    if len(value) > _MAX_VALUE:
        return None
    if kind in ("header", "userinfo"):
        return REDACTED if is_placeholder(value) else LEAK
    if value.endswith(":"):
        return None  # "Authorization: Bearer Authorization:" is a name, not a value
    if _masked(value):
        return REDACTED
    if _REFERENCE.fullmatch(value) or _FORMAT_FIELD.search(value):
        return None  # a reference to where the secret lives, or an unfilled template
    if kind != "json" and _is_code_ref(value):
        return None  # a variable or a reference to where the secret lives
    if redact:
        if _NUMERIC.fullmatch(value) or is_placeholder(value) or _is_code_ref(value):
            return None
        need = {"query": 4, "text-header": 4, "bearer": 12, "cookie": 8, "token": 16}.get(kind, 6)
        if len(value) < need:
            return None
        if kind == "token" and shannon_entropy(value) < 3.0:
            return None
        return LEAK
    if kind in ("text-header", "query"):
        if is_placeholder(value):
            return REDACTED
        if len(value) >= 8 and not _NUMERIC.fullmatch(value) and not _is_code_ref(value):
            return LEAK
        return None
    if kind in ("bearer", "cookie"):
        ok = len(value) >= (20 if kind == "bearer" else 16) and shannon_entropy(value) >= 3.0
        return LEAK if ok and not _is_code_ref(value) else None
    # "assign", "token", "json": detect-secrets style entropy test.
    if _high_entropy(value):
        return LEAK
    if kind != "token" and _strong_placeholder(value):
        return REDACTED
    return None


def _basic_placeholder(cred: str) -> bool:
    """Tell whether a Basic credential decodes to user:placeholder."""
    try:
        raw = base64.b64decode(cred + "=" * (-len(cred) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    if ":" not in raw:
        return False
    return is_placeholder(raw.split(":", 1)[1])


_Found = list[tuple[int, int, str, str, str, int]]  # start, end, rule, status, detail, prio


def _full_name(text: str, m: re.Match[str]) -> str:
    """Return the credential name of a match, with the prefix before the keyword."""
    ns, ne = m.span("n")
    before = text[max(0, ns - 40) : ns][::-1]
    head = _NAME_CHARS.match(before)
    return text[ns - (head.end() if head else 0) : ne]


def _on_auth(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``Authorization: <scheme> <value>`` in free text."""
    vs, ve = m.span("v")
    name = _full_name(text, m)
    if m.group("s") == "basic" and _basic_placeholder(text[vs:ve]):
        return [(vs, ve, "credential-header", REDACTED, name, _P_HEADER)]
    return _one(text, m, "credential-header", "text-header", name, _P_HEADER, redact)


def _on_apikey(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``x-api-key: ...`` (a header) or ``OPENAI_API_KEY=...`` (an assignment)."""
    name = _full_name(text, m)
    if "-" in name.strip("-"):
        return _one(text, m, "credential-header", "text-header", name, _P_HEADER, redact)
    return _one(text, m, "high-entropy-credential", "assign", name, _P_ASSIGN, redact)


def _on_assign(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``secret=``, ``password:``, ``private_key =`` (and AWS secret keys)."""
    name = _full_name(text, m)
    vs, ve = m.span("v")
    value = text[vs:ve]
    lname = name.lower().replace("_", "").replace("-", "")
    if "secretaccesskey" in lname or "awssecret" in lname:
        if _masked(value):
            return [(vs, ve, "aws-secret-access-key", REDACTED, name, _P_PROVIDER)]
        if _AWS_SECRET.fullmatch(value) and shannon_entropy(value) >= 3.5:
            return [(vs, ve, "aws-secret-access-key", LEAK, name, _P_PROVIDER)]
    return _one(text, m, "high-entropy-credential", "assign", name, _P_ASSIGN, redact)


def _on_token(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``access_token=``, ``GITHUB_TOKEN:``, ``x-auth-token:`` but not max_tokens."""
    name = _full_name(text, m)
    if _TOKEN_NAME_SKIP.search(name):
        return []
    if name.lower().replace("_", "-") in _HEADER_NAMES:
        return _one(text, m, "credential-header", "text-header", name, _P_HEADER, redact)
    return _one(text, m, "high-entropy-credential", "token", name, _P_ASSIGN, redact)


def _on_bearer(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle a bare ``Bearer <value>``."""
    return _one(text, m, "credential-header", "bearer", "bearer", _P_BEARER, redact)


def _on_cookie(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``Cookie: a=b; c=d`` and ``Set-Cookie: a=b; Path=/``."""
    set_cookie = text[max(0, m.start() - 4) : m.start()].lower() == "set-"
    name = "set-cookie" if set_cookie else "cookie"
    out: _Found = []
    for vs, ve, cname in _cookie_values(text, *m.span("v"), first_only=set_cookie):
        status = _value_status(text[vs:ve], "cookie", redact)
        if status is not None:
            out.append((vs, ve, "credential-header", status, f"{name} {cname}", _P_COOKIE))
    return out


def _on_query(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``?key=...`` and ``&sig=...`` in URLs inside text."""
    name = text[m.start("n") : m.end("n")]
    vs, ve = m.span("v")
    value = text[vs:ve]
    if "%" in value:  # judge the decoded value (%3Ctoken%3E is <token>)
        value = unquote(value)
    status = _value_status(value, "query", redact)
    return [] if status is None else [(vs, ve, "credential-query", status, name, _P_QUERY)]


def _on_userinfo(text: str, m: re.Match[str], redact: bool) -> _Found:
    """Handle ``scheme://user:password@host``."""
    if not m.group("u") and m.group("v").isdigit():
        return []  # host:port, not a password
    return _one(text, m, "basic-auth-url", "userinfo", "url", _P_USERINFO, redact)


def _one(
    text: str, m: re.Match[str], rule: str, kind: str, name: str, prio: int, redact: bool
) -> _Found:
    """Classify the ``v`` group of a match."""
    vs, ve = m.span("v")
    status = _value_status(text[vs:ve], kind, redact)
    return [] if status is None else [(vs, ve, rule, status, name, prio)]


# (pattern, handler, runs on the lowercased copy)
_GENERIC: tuple[tuple[re.Pattern[str], Callable[[str, re.Match[str], bool], _Found], bool], ...] = (
    (_G_AUTH, _on_auth, True),
    (_G_APIKEY, _on_apikey, True),
    *((rx, _on_assign, True) for rx in _G_ASSIGN),
    (_G_TOKEN, _on_token, True),
    (_G_BEARER, _on_bearer, True),
    (_G_COOKIE, _on_cookie, True),
    (_G_QUERY, _on_query, True),
    (_G_USERINFO, _on_userinfo, False),
)


# A literal each _GENERIC pattern cannot match without (checked on the lowercased text): a
# substring test is far cheaper than running the pattern over a body that has no such name.
_GENERIC_NEEDLES: tuple[str, ...] = (
    "authorization",
    "api",
    *("secret", "pass", "pwd", "private"),
    "token",
    "bearer",
    "cookie",
    "=",
    "://",
)
assert len(_GENERIC_NEEDLES) == len(_GENERIC)


def _finder(needle: str) -> Callable[[str], bool]:
    """A test for `needle in text`: re's literal search beats str.find for short needles."""
    if len(needle) == 1:
        return lambda text: needle in text  # memchr
    return re.compile(re.escape(needle)).search  # type: ignore[return-value]


_GENERIC_FINDERS = tuple(_finder(needle) for needle in _GENERIC_NEEDLES)


def _generic_spans(
    text: str,
    low: str,
    redact: bool,
    memo: dict[Any, Any],
    limit: int | None = None,
    only: frozenset[int] | None = None,
) -> list[_Span]:
    """Find credential values by the names around them (headers, assignments, queries).

    `only`, when given, names the rules worth running (the others cannot match).
    """
    spans: list[_Span] = []
    for index, (rx, handler, lowered) in enumerate(_GENERIC):
        if only is not None and index not in only:
            continue
        if not _GENERIC_FINDERS[index](low):
            continue
        for m in rx.finditer(low if lowered else text):
            s0, e0 = m.span()
            key = (index, text[max(0, s0 - 40) : e0])  # the name prefix is part of the input
            got = memo.get(key, _MISS)
            if got is _MISS:
                got = [(a - s0, b - s0, *rest) for a, b, *rest in handler(text, m, redact)]
                if redact:
                    got = [g for g in got if g[3] == LEAK]
                memo[key] = got
            for rs, re_, rule, status, detail, prio in got:
                spans.append(_Span(s0 + rs, s0 + re_, rule, status, detail, prio))
            if limit is not None and len(spans) >= limit:
                return spans
    return spans


def _cookie_values(
    text: str, start: int, end: int, *, first_only: bool
) -> list[tuple[int, int, str]]:
    """Return (start, end, name) of each cookie value in text[start:end]."""
    out: list[tuple[int, int, str]] = []
    pos = start
    for i, pair in enumerate(text[start:end].split(";")):
        if first_only and i > 0:
            break
        cname, eq, cval = pair.partition("=")
        stripped = cval.strip()
        if eq and stripped:
            vs = pos + len(cname) + 1 + (len(cval) - len(cval.lstrip()))
            out.append((vs, vs + len(stripped), cname.strip()))
        pos += len(pair) + 1
    return out


def _resolve(spans: list[_Span]) -> list[_Span]:
    """Keep, in each cluster of overlapping spans, the best non-overlapping ones."""
    spans = sorted((s for s in spans if s.end > s.start), key=lambda s: (s.start, s.prio))
    out: list[_Span] = []
    cluster: list[_Span] = []
    cluster_end = -1
    for s in [*spans, None]:
        if s is not None and (not cluster or s.start < cluster_end):
            cluster.append(s)
            cluster_end = max(cluster_end, s.end)
            continue
        if len(cluster) == 1:
            out.append(cluster[0])
        elif cluster:
            kept: list[_Span] = []
            for c in sorted(cluster, key=lambda c: (c.prio, c.start)):
                if all(c.end <= k.start or c.start >= k.end for k in kept):
                    kept.append(c)
            out.extend(sorted(kept, key=lambda c: c.start))
        if s is not None:
            cluster, cluster_end = [s], s.end
    return out


# What each _PROVIDERS pattern cannot match without (case kept): a pattern made only of
# literals, which a substring of a text matches only where the text does.
_PROVIDER_NEEDLES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(needle)
    for needle in (
        r"sk-",
        r"AIza",
        r"A(?:KIA|SIA|BIA|CCA)",
        r"gh[pousr]_",
        r"github_pat_",
        r"xox[baprse]-",
        r"hooks\.slack\.com/",
        r"eyJ",
        r"-----BEGIN ",
        r"hf_",
        r"k_live_",
    )
)
assert len(_PROVIDER_NEEDLES) == len(_PROVIDERS)

# The needles grouped by a character each of them holds, as patterns anchored on that
# character (looking back or ahead from it). One pass per group finds every place where
# some needle of the group occurs; a group whose character is missing (memchr finds that
# out at once) costs nothing.
_PROVIDER_GROUPS: tuple[tuple[str, tuple[tuple[int, str], ...]], ...] = (
    ("-", ((0, r"-(?<=sk-)"), (5, r"-(?<=xox[baprse]-)"), (8, r"-(?=----BEGIN )"))),
    (
        "_",
        (
            (3, r"_(?<=gh[pousr]_)"),
            (4, r"_(?<=github_pat_)"),
            (9, r"_(?<=hf_)"),
            (10, r"_(?<=k_live_)"),
        ),
    ),
    ("A", ((1, r"A(?=Iza)"), (2, r"A(?=KIA|SIA|BIA|CCA)"))),
    ("/", ((6, r"/(?<=hooks\.slack\.com/)"),)),
    ("J", ((7, r"J(?<=eyJ)"),)),
)
assert sorted(i for _, group in _PROVIDER_GROUPS for i, _ in group) == list(range(len(_PROVIDERS)))
# Per group: the gate, one pattern for any needle of it, and each needle's own pattern.
_PROVIDER_FINDERS = tuple(
    (
        gate,
        re.compile("|".join(pattern for _, pattern in group)),
        tuple((i, re.compile(pattern)) for i, pattern in group),
    )
    for gate, group in _PROVIDER_GROUPS
)


def _providers_present(text: str) -> frozenset[int]:
    """Indices of the _PROVIDER_NEEDLES found in text (each group in one pass)."""
    found: set[int] = set()
    for gate, any_needle, needles in _PROVIDER_FINDERS:
        if gate not in text:
            continue
        for match in any_needle.finditer(text):
            # Several needles may share this anchor (xoxb-----BEGIN): try each of them here.
            at = match.start()
            found.update(i for i, needle in needles if needle.match(text, at))
            if all(i in found for i, _ in needles):
                break
    return frozenset(found)


class TextProfile(NamedTuple):
    """Which rules could fire on a text, or on any piece of it, by the literals it holds.

    Every rule needs its literal (a provider prefix such as ``sk-``, or a name such as
    ``token`` in the lowercased text), so a rule whose literal is missing from a text
    matches nowhere in it, nor in any substring of it. Profiling a file once lets its scan
    and the redaction of every body cut from it skip those rules. A text with an empty
    profile holds no secret and needs no redaction.
    """

    providers: frozenset[int]  # indices into _PROVIDERS
    generic: frozenset[int]  # indices into _GENERIC

    @property
    def empty(self) -> bool:
        """True when no rule can fire: nothing to find, nothing to redact."""
        return not self.providers and not self.generic


def _profile(text: str) -> tuple[TextProfile, str]:
    """The profile of text, and its lowercased copy (str.lower, so a superset of literals)."""
    providers = _providers_present(text)
    # str.lower maps each character on its own (final sigma aside, never ASCII), so a name
    # found by _ascii_lower in any piece of this text is also found in this copy.
    low = text.lower()
    generic = frozenset(i for i, found in enumerate(_GENERIC_FINDERS) if found(low))
    return TextProfile(providers, generic), low


def text_profile(text: str) -> TextProfile:
    """The rules that could fire on text or on any substring of it (see TextProfile)."""
    return _profile(_as_text(text))[0]


def _find(
    text: str,
    *,
    redact: bool,
    limit: int | None = None,
    profile: TextProfile | None = None,
    low: str | None = None,
) -> list[_Span]:
    """Find every provider key and credential value in text, without overlaps.

    `profile`, when given, is that of text or of a text that holds it literally: rules it
    rules out are not run (they could not match). `low` is `_ascii_lower(text)` if known.
    """
    memo: dict[Any, Any] = {}
    spans = _provider_spans(text, memo, None if profile is None else profile.providers)
    if profile is None or profile.generic:
        if low is None:
            low = _ascii_lower(text)
        generic = None if profile is None else profile.generic
        spans.extend(_generic_spans(text, low, redact, memo, limit, generic))
    return _resolve(spans)


def _as_text(value: Any) -> str:
    """Turn a scanned value into text without failing."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _hit(
    secret: str,
    rule: str,
    path: str,
    line: int | None,
    column: int | None,
    status: str,
    context: str,
) -> SecretHit:
    """Build a hit that holds only the redacted form and the fingerprint."""
    return SecretHit(
        rule, path, line, column, status, redact_value(secret), fingerprint(secret), context
    )


# ------------------------------------------------------------------ public API


def scan_text(
    text: str, path: str, *, start_line: int = 1, profile: TextProfile | None = None
) -> list[SecretHit]:
    """Scan free text (repo files, bodies, logs) for keys and credential values.

    `profile` (optional) is `text_profile` of text or of a text holding it literally.
    """
    return _scan_text(_as_text(text), path, start_line, profile, None)


def scan_and_profile(text: str, path: str) -> tuple[list[SecretHit], TextProfile]:
    """`scan_text(text, path)` and `text_profile(text)`, sharing the work of both."""
    text = _as_text(text)
    profile, low = _profile(text)
    # _ascii_lower is str.lower whenever that keeps the length.
    hits = _scan_text(text, path, 1, profile, low if len(low) == len(text) else None)
    return hits, profile


def _scan_text(
    text: str, path: str, start_line: int, profile: TextProfile | None, low: str | None
) -> list[SecretHit]:
    hits: list[SecretHit] = []
    line, pos, line_start = start_line, 0, 0
    for s in _find(text, redact=False, limit=MAX_HITS, profile=profile, low=low)[:MAX_HITS]:
        newlines = text.count("\n", pos, s.start)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", pos, s.start) + 1
        pos = s.start
        context = f"text {s.detail}" if s.detail else "text"
        secret = text[s.start : s.end]
        hits.append(_hit(secret, s.rule, path, line, s.start - line_start + 1, s.status, context))
    return hits


def _header_items(headers: Any) -> Iterable[tuple[str, Any]]:
    """Yield (name, value) from a dict, a list of pairs or a list of HAR name/value dicts."""
    if headers is None:
        return
    if isinstance(headers, Mapping) or hasattr(headers, "items"):
        yield from ((str(k), v) for k, v in headers.items())
        return
    for item in headers:
        if isinstance(item, Mapping) and "name" in item:
            yield str(item.get("name")), item.get("value")
        elif isinstance(item, list | tuple) and len(item) == 2:
            yield str(item[0]), item[1]


def _header_values(value: Any) -> Iterable[str]:
    """Yield header values, flattening lists."""
    if isinstance(value, list | tuple):
        for v in value:
            yield from _header_values(v)
    elif value is not None:
        yield _as_text(value)


_SCHEME_SPLIT = re.compile(
    r"(bearer|basic|token|bot|apikey|api-key|key|digest|aws4-hmac-sha256|sso-key)[ \t]+(.*)",
    re.IGNORECASE | re.DOTALL | re.ASCII,
)


def _credential_spans(value: str, name: str) -> list[_Span]:
    """Classify one value under a credential header name (or a JSON key of that kind)."""
    provider = _resolve(_provider_spans(value))
    if provider:
        return provider
    lname = name.lower().replace("_", "-")
    if lname in ("cookie", "set-cookie"):
        spans: list[_Span] = []
        first_only = lname == "set-cookie"  # the rest of a Set-Cookie line is attributes
        for vs, ve, cname in _cookie_values(value, 0, len(value), first_only=first_only):
            if is_placeholder(value[vs:ve]):
                spans.append(_Span(vs, ve, "credential-header", REDACTED, cname, _P_COOKIE))
            elif ve - vs >= 8:
                spans.append(_Span(vs, ve, "credential-header", LEAK, cname, _P_COOKIE))
        return spans
    v = value.strip()
    start = value.find(v) if v else 0
    m = _SCHEME_SPLIT.fullmatch(v)
    if m and m.group(2).strip():
        cred = m.group(2).strip()
        start += m.start(2) + (len(m.group(2)) - len(m.group(2).lstrip()))
        if m.group(1).lower() == "basic" and _basic_placeholder(cred):
            return [_Span(start, start + len(cred), "credential-header", REDACTED, "", _P_HEADER)]
    else:
        cred = v
    status = REDACTED if is_placeholder(cred) else LEAK
    return [_Span(start, start + len(cred), "credential-header", status, "", _P_HEADER)]


def scan_headers(
    headers: list[tuple[str, str]] | dict[str, Any],
    path: str,
    *,
    where: str,
    line: int | None = None,
) -> list[SecretHit]:
    """Scan request or response headers: credential names always, key shapes everywhere."""
    hits: list[SecretHit] = []
    for name, raw in _header_items(headers):
        lname = name.strip().lower().replace("_", "-")
        for value in _header_values(raw):
            if lname in _HEADER_NAMES:
                spans = _credential_spans(value, lname)
            else:
                spans = _resolve(_provider_spans(value))
            for s in spans:
                context = f"{where} header {name}"
                if s.rule == "credential-header" and s.detail and lname.endswith("cookie"):
                    context += f" ({s.detail})"
                hits.append(
                    _hit(value[s.start : s.end], s.rule, path, line, None, s.status, context)
                )
    return hits


_QUERY_NAMES = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "access_token",
        "token",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "client_secret",
        "password",
        "secret",
        "refresh_token",
        "id_token",
        "auth",
    }
)


def scan_url(url: str, path: str, *, line: int | None = None) -> list[SecretHit]:
    """Scan a URL: credential query parameters, user:password@ and key shapes."""
    url = _as_text(url)
    hits: list[SecretHit] = []
    seen: set[tuple[str, str]] = set()

    def emit(secret: str, rule: str, status: str, context: str) -> None:
        fp = fingerprint(secret)
        if (rule, fp) not in seen:
            seen.add((rule, fp))
            hits.append(_hit(secret, rule, path, line, None, status, context))

    try:
        parts = urlsplit(url)
        password = parts.password
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if "=" in parts.fragment:
            pairs += parse_qsl(parts.fragment, keep_blank_values=True)
    except ValueError:
        parts, password, pairs = None, None, []
    if password is not None and not (not parts.username and password.isdigit()):
        status = REDACTED if is_placeholder(password) else LEAK
        emit(password, "basic-auth-url", status, "url user:password")
    for name, value in pairs:
        if name.lower() not in _QUERY_NAMES:
            continue
        provider = _resolve(_provider_spans(value))
        if provider:
            for s in provider:
                emit(value[s.start : s.end], s.rule, s.status, f"query parameter {name}")
            continue
        if is_placeholder(value):
            emit(value, "credential-query", REDACTED, f"query parameter {name}")
        elif len(value) >= 6:
            emit(value, "credential-query", LEAK, f"query parameter {name}")
    for s in _resolve(_provider_spans(url)):
        emit(url[s.start : s.end], s.rule, s.status, "url")
    return hits


_JSON_HEADER_KEYS = frozenset(n.replace("-", "") for n in _HEADER_NAMES) - {"apikey"}
_JSON_CRED_END = (
    "apikey",
    "apisecret",
    "secret",
    "secretkey",
    "password",
    "passwd",
    "pwd",
    "token",
    "privatekey",
    "credential",
    "credentials",
)
_JSON_CRED_SKIP = re.compile(
    r"page|next|prev|cursor|continuation|csrf|xsrf|count|limit|max|usage|type|hash|salt|policy"
    r"|pattern|length|expir|file|path|name|url|header|env|id$"
)


def _json_key_kind(key: str) -> str | None:
    """Return "header", "cred" or None for a JSON object key."""
    norm = key.lower().replace("_", "").replace("-", "")
    if norm in _JSON_HEADER_KEYS:
        return "header"
    if norm.endswith(_JSON_CRED_END) and not _JSON_CRED_SKIP.search(norm):
        return "cred"
    return None


def _render_path(link: tuple[Any, ...] | None) -> str:
    """Render a (parent, key) chain as a JSONPath-like string."""
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    out = "$"
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else f".{key}"
    return out


def _json_value_spans(key: str, kind: str, value: str) -> list[_Span]:
    """Classify a string stored under a credential-named or header-named JSON key."""
    if kind == "header":
        return _credential_spans(value, key)
    spans = _resolve(_provider_spans(value))
    if spans:
        return spans
    status = _value_status(value.strip(), "token" if key.lower() == "token" else "json", False)
    if status is None:
        return []
    return [_Span(0, len(value), "high-entropy-credential", status, "", _P_ASSIGN)]


def scan_json(value: Any, path: str, *, line: int | None = None) -> list[SecretHit]:
    """Walk parsed JSON: credential-named keys, header-shaped keys and every string value."""
    hits: list[SecretHit] = []
    texts: list[str] = []  # strings scanned as free text, joined once at the end
    offsets: list[int] = []
    links: list[tuple[Any, ...] | None] = []
    total = 0
    nodes = 0
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 0, None)]

    def add_text(text: str, link: tuple[Any, ...] | None) -> None:
        nonlocal total
        texts.append(text)
        offsets.append(total)
        links.append(link)
        total += len(text) + 3  # the "\n\x00\n" separator

    def classify(key: str, val: Any, link: tuple[Any, ...] | None, shown: str = "") -> bool:
        """Handle a credential- or header-named entry; return False to walk it normally."""
        kind = _json_key_kind(key)
        if kind is None or (kind == "cred" and not isinstance(val, str)):
            return False
        if kind == "header" and isinstance(val, Mapping):
            return False
        where = f"json key {shown or key} at {_render_path(link)}"
        for text in _header_values(val) if kind == "header" else (val,):
            for s in _json_value_spans(key, kind, text):
                secret = text[s.start : s.end]
                hits.append(_hit(secret, s.rule, path, line, None, s.status, where))
        return True

    while stack:
        node, depth, link = stack.pop()
        nodes += 1
        if nodes > MAX_JSON_NODES:
            break
        if isinstance(node, str):
            if len(node) >= 8:
                add_text(node, link)
            continue
        if depth >= MAX_JSON_DEPTH:
            continue
        if isinstance(node, Mapping):
            name = node.get("name")
            if isinstance(name, str) and "value" in node and len(node) <= 4:
                # A HAR-style {"name": ..., "value": ...} header or query entry.
                key = name
                if _json_key_kind(name) is None and name.lower() in _QUERY_NAMES:
                    key = "token" if name.lower() == "token" else "apikey"
                if classify(key, node["value"], link, name):
                    continue
            children = []
            for k, v in node.items():
                key = _as_text(k)
                child = (link, key)
                if len(key) >= 16:
                    add_text(key, link)
                if not classify(key, v, child):
                    children.append((v, depth + 1, child))
            stack.extend(reversed(children))
        elif isinstance(node, list | tuple):
            stack.extend((node[i], depth + 1, (link, i)) for i in range(len(node) - 1, -1, -1))
    if texts:
        joined = "\n\x00\n".join(texts)
        index = 0
        for s in _find(joined, redact=False):
            while index + 1 < len(offsets) and offsets[index + 1] <= s.start:
                index += 1
            where = f"json {_render_path(links[index])}" + (f" {s.detail}" if s.detail else "")
            hits.append(_hit(joined[s.start : s.end], s.rule, path, line, None, s.status, where))
    return hits


def redact_text(text: str, *, profile: TextProfile | None = None) -> str:
    """Replace every key and credential value in text with its redacted form.

    `profile` (optional) is `text_profile` of text or of a text holding it literally (say,
    the file a body was cut from): rules it rules out are skipped, and an empty profile
    returns text as is.
    """
    if not text:
        return text
    text = _as_text(text)
    if profile is not None and profile.empty:
        return text
    spans = [s for s in _find(text, redact=True, profile=profile) if s.status == LEAK]
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for s in spans:
        out.append(text[pos : s.start])
        out.append(redact_value(text[s.start : s.end]))
        pos = s.end
    out.append(text[pos:])
    return "".join(out)


def redact_message(
    message: dict[str, Any], *, profile: TextProfile | None = None
) -> dict[str, Any]:
    """A turn's message dict (text, tool calls, tool results) with every credential redacted.

    `profile`: that of a text holding every string of the message literally (see
    `redact_text`); None runs every rule.
    """
    if profile is not None and profile.empty:
        return message
    out = dict(message)
    out["text"] = redact_text(out.get("text") or "", profile=profile)
    out["tool_results"] = [
        {**r, "content": redact_text(str(r.get("content") or ""), profile=profile)}
        for r in out.get("tool_results") or []
    ]
    out["tool_calls"] = [
        {**call, "arguments": _redact_json(call.get("arguments"), profile)}
        for call in out.get("tool_calls") or []
    ]
    return out


def _redact_json(value: Any, profile: TextProfile | None, depth: int = 0) -> Any:
    """Every string inside a JSON value redacted (keys included); a deep rest as redacted text."""
    if isinstance(value, str):
        return redact_text(value, profile=profile)
    if depth > 50:
        return redact_text(json.dumps(value, ensure_ascii=False, default=str), profile=profile)
    if isinstance(value, dict):
        return {
            redact_text(str(k), profile=profile): _redact_json(v, profile, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact_json(v, profile, depth + 1) for v in value]
    return value
