"""Values that look like credentials but are placeholders, masks or templates."""

from __future__ import annotations

import re

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

# An environment variable's name where its value would be (api_key=LAST_FM_API_KEY): the
# recorder or the test wrote the name, not the secret.
_ENV_NAME = re.compile(
    r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)",
    re.ASCII,
)

_FAKE_AWS = re.compile(r"(?:AKIA|ASIA)(?:TEST|FAKE|DUMMY|MOCK|EXAMPLE|SAMPLE|XXXX)", re.ASCII)

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
    if _FAKE_AWS.match(v):  # AKIATEST…, AKIAFAKE…: test suites' stand-ins for a key id
        return True
    if _ENV_NAME.fullmatch(v):
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
    return bool(parts and any(p in _STRONG_WORDS or set(p) == {"x"} for p in parts))


def is_placeholder(value: str) -> bool:
    """Tell whether a credential-position value is a placeholder rather than a secret."""
    v = value.strip(" \t\r\n'\"`")
    if len(v) <= 3 or _masked(v) or _REFERENCE.fullmatch(v) or _FORMAT_FIELD.search(v):
        return True
    if _word_parts(v) is not None:
        return True
    low = v.lower()
    return low in "0123456789abcdefghijklmnopqrstuvwxyz" or low in "1234567890"
