"""Secrets kept at rest: a string sealed with a key from settings, opened only to be used.

What it guards: an access token (a private repository's, a model endpoint's API key) saved
so that a later job can use it again, without the database, a backup or a dump holding it
in plain text. The cipher is Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`):
authenticated, so a wrong key or an altered value is an error, never garbage.

The keys:
- `SECRET_STORE_KEYS` (comma-separated Fernet keys, `Fernet.generate_key()`): the first
  seals, every one opens (MultiFernet), so a key is rotated by putting the new one first,
  running `secrets_reseal` on the rows, then dropping the old one.
- unset: one key derived from `SECRET_KEY` (HKDF-SHA256, its own info string, so the value
  is never the key Django signs with), and one from each of `SECRET_KEY_FALLBACKS` to open.
  Zero configuration keeps working; changing SECRET_KEY without moving the old one to
  SECRET_KEY_FALLBACKS makes sealed values unreadable, and opening one then says so.

A sealed value is text (`sealed:v1:<fernet token>`) for a plain TextField. Nothing here
logs, and no message holds a secret or a key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

PREFIX = "sealed:v1:"
_INFO = b"cassette-review secret store v1"
SETTING = "SECRET_STORE_KEYS"


class SecretUnreadable(Exception):
    """A sealed value did not open with the keys configured: the message says what to do."""


def derive_key(secret_key: str) -> bytes:
    """A Fernet key derived from a Django SECRET_KEY (never equal to it)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


def parse_keys(keys: Iterable[str]) -> list[Fernet]:
    """The ciphers of SECRET_STORE_KEYS; ImproperlyConfigured names a malformed key by its
    position (settings call it at boot, so a bad key stops the start, not a later fetch)."""
    found = []
    for index, key in enumerate(keys):
        try:
            found.append(Fernet(key.strip().encode()))
        except (ValueError, binascii.Error):
            # The key itself is never repeated in the message.
            raise ImproperlyConfigured(
                f"{SETTING}: key {index + 1} is not a Fernet key (32 bytes, url-safe base64; "
                "make one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from None
    return found


def _box() -> tuple[MultiFernet, str]:
    """The cipher for the keys in settings, and where they came from (for messages)."""
    configured = [k for k in getattr(settings, SETTING, []) if k.strip()]
    if configured:
        return MultiFernet(parse_keys(configured)), SETTING
    secret = getattr(settings, "SECRET_KEY", "")
    if not secret:
        raise ImproperlyConfigured(
            f"no key to seal secrets with: set {SETTING} (or SECRET_KEY, which one is derived from)"
        )
    fallbacks = list(getattr(settings, "SECRET_KEY_FALLBACKS", []))
    derived = [Fernet(derive_key(k)) for k in [secret, *fallbacks] if k]
    return MultiFernet(derived), "SECRET_KEY"


def check_keys() -> str:
    """Raise ImproperlyConfigured when the keys cannot be used; else say where they come from."""
    return _box()[1]


def seal(secret: str) -> str:
    """`secret` sealed with the first key; the empty string stays empty (nothing to keep)."""
    if not secret:
        return ""
    box, _ = _box()
    return PREFIX + box.encrypt(secret.encode()).decode("ascii")


def unseal(sealed: str) -> str:
    """The secret a `seal` made; "" for "". Raises SecretUnreadable on a wrong key."""
    if not sealed:
        return ""
    if not sealed.startswith(PREFIX):
        raise SecretUnreadable("the stored value is not a sealed secret (was it saved in clear?)")
    box, source = _box()
    try:
        return box.decrypt(sealed[len(PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        hint = (
            f"was a key removed from {SETTING}?"
            if source == SETTING
            else f"was SECRET_KEY changed without keeping the old one in SECRET_KEY_FALLBACKS, "
            f"or {SETTING} set after it was saved?"
        )
        raise SecretUnreadable(
            f"a stored secret does not open with the keys configured ({source}): {hint} "
            "Save the secret again."
        ) from None


def reseal(sealed: str) -> str:
    """The same secret sealed with the current first key (for key rotation)."""
    if not sealed:
        return ""
    box, _ = _box()
    try:
        return PREFIX + box.rotate(sealed[len(PREFIX) :].encode("ascii")).decode("ascii")
    except InvalidToken:
        unseal(sealed)  # raises with the explanation
        raise
