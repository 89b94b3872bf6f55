"""The detectors: provider key shapes and generic credential rules, as spans of a text."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import unquote

from cassettes_app.secrets.placeholders import (
    _FORMAT_FIELD,
    _REFERENCE,
    _masked,
    _strong_placeholder,
    is_placeholder,
)
from cassettes_app.secrets.rules import (
    _KEYCHARS,
    _NUMERIC,
    LEAK,
    REDACTED,
    SESSION_COOKIE,
    _high_entropy,
    _is_code_ref,
    is_session_cookie,
    shannon_entropy,
)

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

# The one list of header names whose value is a credential, lower case with `-` (a name is
# compared after `_` -> `-`, so `api_key` is `api-key`). The scanners flag any value under
# them, and submissions/redact.py never stores one.
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "anthropic-api-key",
        "openai-api-key",
        "x-auth-token",
        "x-access-token",
        "x-amz-security-token",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
    }
)


def is_credential_header(name: str) -> bool:
    """A header name from CREDENTIAL_HEADERS, whatever its case, spaces or `_` for `-`."""
    return name.strip().lower().replace("_", "-") in CREDENTIAL_HEADERS


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
    if is_credential_header(name):
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
            rule = SESSION_COOKIE if is_session_cookie(cname) else "credential-header"
            out.append((vs, ve, rule, status, f"{name} {cname}", _P_COOKIE))
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
    # A Match or None: truthy as the bool this returns, without a wrapper call per text.
    return re.compile(re.escape(needle)).search  # type: ignore[return-value]  # Match|None as bool


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


_COOKIE_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
_COOKIE_VALUE = re.compile(r'"?[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"?')


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
        # RFC 6265: a cookie's name is a token and its value has no spaces or commas; text
        # that fails it (script code, `document.cookie = a.get(...)`) is no cookie.
        if (
            eq
            and stripped
            and _COOKIE_NAME.fullmatch(cname.strip())
            and _COOKIE_VALUE.fullmatch(stripped)
        ):
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
