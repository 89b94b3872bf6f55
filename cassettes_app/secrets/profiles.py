"""Text profiles: which provider rules can match a text at all, found in one pass."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from cassettes_app.secrets.detectors import _GENERIC_FINDERS, _GENERIC_NEEDLES, _PROVIDERS
from cassettes_app.secrets.rules import _as_text

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


# The token rule skips every name with `tokens` at its end (detectors._TOKEN_NAME_SKIP,
# `tokens\b`): the usage counts of nearly every recorded model call ("prompt_tokens": 9,
# "max_tokens": 64). A `token` seen only as such an ending cannot fire, in the text or in
# any piece of it: a `tokens` before a character no name holds, or closing a JSON key. A
# JSON string that ends in `tokens` (its `"` followed by no `:`) keeps the rule, as a turn's
# text may join it to the next string (a stream's deltas) and so continue the name. Only
# for ASCII text, whose lowercased copy is its own letters one for one.
_TOKEN_RULE = _GENERIC_NEEDLES.index("token")
_LIVE_TOKEN = re.compile(r'token(?!s(?:[^a-z0-9_"]|"[ \t\r\n]*:|\Z))')
_ALL_GENERIC = range(len(_GENERIC_FINDERS))


def _generic_present(text: str, low: str, rules: Iterable[int]) -> frozenset[int]:
    """Which of `rules` (indices into _GENERIC) can fire on text, by the names its
    lowercased copy `low` holds; the token rule not where `token` only ends `tokens`."""
    generic = {i for i in rules if _GENERIC_FINDERS[i](low)}
    if _TOKEN_RULE in generic and text.isascii() and not _LIVE_TOKEN.search(low):
        generic.discard(_TOKEN_RULE)
    return frozenset(generic)


def _profile(text: str) -> tuple[TextProfile, str]:
    """The profile of text, and its lowercased copy (str.lower, so a superset of literals)."""
    providers = _providers_present(text)
    # str.lower maps each character on its own (final sigma aside, never ASCII), so a name
    # found by _ascii_lower in any piece of this text is also found in this copy.
    low = text.lower()
    return TextProfile(providers, _generic_present(text, low, _ALL_GENERIC)), low


def text_profile(text: str) -> TextProfile:
    """The rules that could fire on text or on any substring of it (see TextProfile)."""
    return _profile(_as_text(text))[0]


# JSON escapes that can stand for a character a literal holds (a letter, `=`, `/`).
_HIDING_ESCAPE = re.compile(r"\\[u/]")
_HIDING_ESCAPE_BYTES = re.compile(rb"\\[u/]")


def escapes_hide_literals(text: str | bytes) -> bool:
    """True when JSON text holds an escape that can stand for a character of a rule's
    literal (`\\u`, `\\/`; `to\\u006ben` is `token`): its strings, once decoded, may
    then hold a literal the text lacks. The other escapes (a quote, a backslash, a control
    character) stand for characters no literal holds."""
    if isinstance(text, str):
        return _HIDING_ESCAPE.search(text) is not None
    return _HIDING_ESCAPE_BYTES.search(text) is not None


def json_text_profile(text: str, within: TextProfile | None) -> TextProfile | None:
    """What redacting the strings of a JSON text (its keys and values, each decoded) may
    skip: `within`'s rules (all of them when None), narrowed to those whose literal the
    text holds.

    A text whose escapes can hide a literal (`escapes_hide_literals`) is not narrowed.
    Otherwise each string is a piece of the text, and a piece matches no rule whose
    literal the whole text lacks (see TextProfile).
    """
    if within is not None and within.empty:
        return within
    if escapes_hide_literals(text):
        return within
    if within is None:
        return text_profile(text)
    providers = frozenset(i for i in within.providers if _PROVIDER_NEEDLES[i].search(text))
    generic = (
        _generic_present(text, text.lower(), within.generic) if within.generic else frozenset()
    )
    return TextProfile(providers, generic)
