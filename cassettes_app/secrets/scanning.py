"""Scanning free text, headers, URLs and JSON values for credentials."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cassettes_app.secrets.detectors import (
    _P_ASSIGN,
    _P_COOKIE,
    _P_HEADER,
    CREDENTIAL_HEADERS,
    _ascii_lower,
    _basic_placeholder,
    _cookie_values,
    _generic_spans,
    _provider_spans,
    _resolve,
    _Span,
    _value_status,
)
from cassettes_app.secrets.placeholders import is_placeholder
from cassettes_app.secrets.profiles import TextProfile, _profile
from cassettes_app.secrets.rules import (
    LEAK,
    MAX_HITS,
    REDACTED,
    SESSION_COOKIE,
    SecretHit,
    _as_text,
    fingerprint,
    is_session_cookie,
    redact_value,
)

MAX_JSON_DEPTH = 200

MAX_JSON_NODES = 1_000_000


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
            rule = SESSION_COOKIE if is_session_cookie(cname) else "credential-header"
            if is_placeholder(value[vs:ve]):
                spans.append(_Span(vs, ve, rule, REDACTED, cname, _P_COOKIE))
            elif ve - vs >= 8:
                spans.append(_Span(vs, ve, rule, LEAK, cname, _P_COOKIE))
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
            if lname in CREDENTIAL_HEADERS:
                spans = _credential_spans(value, lname)
            else:
                spans = _resolve(_provider_spans(value))
            for s in spans:
                context = f"{where} header {name}"
                cookie_rule = s.rule in ("credential-header", SESSION_COOKIE)
                if cookie_rule and s.detail and lname.endswith("cookie"):
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
        username, password = parts.username, parts.password
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if "=" in parts.fragment:
            pairs += parse_qsl(parts.fragment, keep_blank_values=True)
    except ValueError:
        username, password, pairs = None, None, []
    if password is not None and not (not username and password.isdigit()):
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


_JSON_HEADER_KEYS = frozenset(n.replace("-", "") for n in CREDENTIAL_HEADERS) - {"apikey"}

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
