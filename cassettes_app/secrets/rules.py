"""Rule names, hit statuses, the SecretHit record and how a secret is shown (never in full)."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

LEAK = "leak"

REDACTED = "redacted"

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
    "session-cookie",
)

# Cookies a provider's edge sets on every answer (bot management, load-balancer affinity,
# analytics). Kept in a recording they identify a browser session with the CDN, not the
# account: their own low-severity kind, never counted as credentials.
SESSION_COOKIE = "session-cookie"
_SESSION_COOKIES = re.compile(
    r"__cf_bm|_cfuvid|cf_clearance|__cfduid|__cflb|__cfruid|cf_ob_info|cf_use_ob"
    r"|AWSALB|AWSALBCORS|AWSALBTG|AWSALBTGCORS|AWSELB|AWSELBCORS"
    r"|ARRAffinity|ARRAffinitySameSite|BIGipServer[\w.-]*|TS01[0-9a-f]*"
    r"|_ga|_ga_[A-Z0-9]+|_gid|_gat|_gcl_au|_fbp|ajs_anonymous_id|__stripe_mid|__stripe_sid"
    r"|incap_ses_[\w]+|visid_incap_[\w]+|nlbi_[\w]+|ak_bmsc|bm_sv|bm_sz|_abck|bm_mi"
    r"|HWWAFSESID|HWWAFSESTIME|acw_tc|acw_sc__v2|SERVERID"  # Huawei, Alibaba edges
    r"|__utm[abcztv]|_hjid|_hjSession\w*|_hjSessionUser\w*|_pk_(?:id|ses)\.[\w.]+"
    r"|mp_\w+_mixpanel|amplitude_id\w*|AMP_\w+|optimizelyEndUserId|_uetsid|_uetvid"
    r"|vmidv1|_chorus_geoip_continent"  # Vox Media's visitor id and geo cookie
    r"|_csrf|csrftoken|XSRF-TOKEN|_xsrf",  # anti-forgery tokens: no login of their own
    re.ASCII,
)


def is_session_cookie(name: str) -> bool:
    """A cookie an edge or analytics script sets, by its name (see SESSION_COOKIE)."""
    return _SESSION_COOKIES.fullmatch(name.strip()) is not None


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


def _as_text(value: Any) -> str:
    """Turn a scanned value into text without failing."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
