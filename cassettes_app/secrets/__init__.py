"""Find and redact credentials in recordings, traces, logs and repository files.

Pure Python, standard library only (no Django), so workers and scripts can use it. One
module per concern: `rules` (rule names, hits, how a secret is shown), `placeholders`,
`profiles` (which rules a text can match), `detectors` (provider shapes and generic
rules), `scanning` (text, headers, URLs, JSON) and `redaction`.

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

from cassettes_app.secrets.detectors import CREDENTIAL_HEADERS, is_credential_header
from cassettes_app.secrets.placeholders import is_placeholder
from cassettes_app.secrets.profiles import (
    TextProfile,
    escapes_hide_literals,
    json_text_profile,
    text_profile,
)
from cassettes_app.secrets.redaction import redact_message, redact_text
from cassettes_app.secrets.rules import (
    LEAK,
    MAX_HITS,
    REDACTED,
    RULES,
    SESSION_COOKIE,
    SecretHit,
    fingerprint,
    redact_value,
    shannon_entropy,
)
from cassettes_app.secrets.scanning import (
    MAX_JSON_DEPTH,
    MAX_JSON_NODES,
    scan_and_profile,
    scan_headers,
    scan_json,
    scan_text,
    scan_url,
)

__all__ = [
    "CREDENTIAL_HEADERS",
    "LEAK",
    "MAX_HITS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NODES",
    "REDACTED",
    "RULES",
    "SESSION_COOKIE",
    "SecretHit",
    "TextProfile",
    "escapes_hide_literals",
    "fingerprint",
    "is_credential_header",
    "is_placeholder",
    "json_text_profile",
    "redact_message",
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
