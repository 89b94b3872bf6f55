"""Source fingerprints: winnowed k-grams of a file's normalised tokens.

The fingerprint `cohort.code_similarity` compares (in submissions, which holds the cohort),
after Schleimer, Wilkerson and Aiken, "Winnowing: Local Algorithms for Document
Fingerprinting" (SIGMOD 2003). A file's text becomes tokens with what a copier changes
cheaply abstracted away: every identifier is `N`, every literal `L`, comments and layout
dropped, keywords and operators kept. Python goes through the standard `tokenize`; any other
source through a small generic lexer (C-like and shell-like comments, quoted strings,
numbers, words). Each run of `K` tokens is hashed, and of every `W` consecutive hashes the
smallest is kept (the rightmost on a tie): a copied passage of at least `W + K - 1` tokens
always shares a fingerprint, however the rest is reordered or renamed.

Text in, hashes out; nothing here opens a file or knows of rows. The input is bounded by
the caller (a capped read); here the tokens are capped (`MAX_TOKENS`) and every pass is
linear in them.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import re
import tokenize
from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "MAX_TOKENS",
    "K",
    "W",
    "fingerprints",
    "generic_tokens",
    "generic_tokens_at",
    "kgrams",
    "located_fingerprints",
    "python_tokens",
    "python_tokens_at",
    "winnow",
]

K = 5  # tokens per k-gram: shorter runs (`x = y`) are in every program
W = 4  # hashes per window: a shared run of W + K - 1 = 8 tokens is always caught
MAX_TOKENS = 200_000  # tokens of one file that are fingerprinted; the rest is not read

_SKIPPED = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)

# Words kept as themselves by the generic lexer: control flow and declarations of the
# common languages (anything else that looks like a word is an identifier, `N`).
_KEYWORDS = frozenset(
    [
        "if",
        "else",
        "elif",
        "for",
        "while",
        "do",
        "switch",
        "case",
        "default",
        "break",
        "continue",
        "return",
        "function",
        "func",
        "def",
        "class",
        "struct",
        "interface",
        "enum",
        "type",
        "const",
        "let",
        "var",
        "new",
        "delete",
        "try",
        "catch",
        "finally",
        "throw",
        "throws",
        "raise",
        "import",
        "from",
        "export",
        "package",
        "public",
        "private",
        "protected",
        "static",
        "async",
        "await",
        "yield",
        "fn",
        "impl",
        "match",
        "mut",
        "pub",
        "use",
        "mod",
        "go",
        "defer",
        "select",
        "chan",
        "range",
        "then",
        "fi",
        "done",
        "esac",
        "local",
    ]
)

# One alternative per token class; each always matches where it starts (an unterminated
# comment or string runs to the end of the text or line), so the scan is linear.
_GENERIC = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>//[^\n]*|\#[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<string>"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|`[^`]*`?)
    | (?P<number>\d[\w.]*)
    | (?P<word>[^\W\d]\w*)
    | (?P<op>[^\w\s])
    """,
    re.VERBOSE | re.DOTALL,
)


def python_tokens(text: str) -> list[str]:
    """Python source as normalised tokens; a file that stops tokenising (cut by the read
    cap, or not Python after all) keeps the tokens read before that point."""
    return python_tokens_at(text)[0]


def python_tokens_at(text: str) -> tuple[list[str], list[int]]:
    """`python_tokens`, and the line (1-based) each token starts on."""
    out: list[str] = []
    lines: list[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _SKIPPED:
                continue
            if tok.type == tokenize.NAME:
                out.append(tok.string if keyword.iskeyword(tok.string) else "N")
            elif tok.type in (tokenize.NUMBER, tokenize.STRING):
                out.append("L")
            else:
                out.append(tok.string)
            lines.append(tok.start[0])
            if len(out) >= MAX_TOKENS:
                break
    except (tokenize.TokenError, SyntaxError):
        pass
    return out, lines


def generic_tokens(text: str) -> list[str]:
    """Any other source as normalised tokens (see the module docstring)."""
    return generic_tokens_at(text)[0]


def generic_tokens_at(text: str) -> tuple[list[str], list[int]]:
    """`generic_tokens`, and the line (1-based) each token starts on."""
    out: list[str] = []
    lines: list[int] = []
    line, counted_to = 1, 0  # newlines counted up to `counted_to`: linear over the text
    for match in _GENERIC.finditer(text):
        kind = match.lastgroup
        if kind in ("space", "comment"):
            continue
        start = match.start()
        line += text.count("\n", counted_to, start)
        counted_to = start
        if kind in ("string", "number"):
            out.append("L")
        elif kind == "word":
            word = match.group()
            out.append(word if word in _KEYWORDS else "N")
        else:
            out.append(match.group())
        lines.append(line)
        if len(out) >= MAX_TOKENS:
            break
    return out, lines


def kgrams(tokens: Sequence[str], k: int = K) -> Iterator[tuple[str, ...]]:
    """Every run of `k` consecutive tokens, in order (none when fewer than `k`)."""
    for start in range(len(tokens) - k + 1):
        yield tuple(tokens[start : start + k])


def _hash(gram: tuple[str, ...]) -> int:
    """A stable signed 64-bit hash of one k-gram (stored; the same in every process)."""
    digest = hashlib.blake2b("\x1f".join(gram).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def winnow(hashes: Sequence[int], w: int = W) -> list[tuple[int, int]]:
    """The (hash, position) pairs winnowing selects: the minimum of each window of `w`
    hashes, the rightmost on a tie, each selected position once (the paper's figure 2).
    A sequence shorter than a window selects its minimum."""
    if not hashes:
        return []
    w = min(w, len(hashes))
    picked: list[tuple[int, int]] = []
    last = -1
    window: list[int] = []  # positions whose hashes increase strictly: the minimum first
    for pos, value in enumerate(hashes):
        while window and hashes[window[-1]] >= value:
            window.pop()  # `>=`: on a tie the newer, rightmost position wins
        window.append(pos)
        if window[0] <= pos - w:
            window.pop(0)
        if pos >= w - 1 and window[0] != last:
            last = window[0]
            picked.append((hashes[last], last))
    return picked


def fingerprints(tokens: Iterable[str], k: int = K, w: int = W) -> list[int]:
    """The distinct winnowed k-gram hashes of a token sequence, in first-selected order."""
    hashes = [_hash(gram) for gram in kgrams(list(tokens), k)]
    return list(dict.fromkeys(value for value, _ in winnow(hashes, w)))


def located_fingerprints(
    tokens: Sequence[str], lines: Sequence[int], k: int = K, w: int = W
) -> list[tuple[int, int, int]]:
    """`fingerprints` with where each was first selected: (hash, first line, last line) of
    its k-gram, from the tokens' lines (what a reader is shown as the matching span)."""
    hashes = [_hash(gram) for gram in kgrams(tokens, k)]
    seen: dict[int, tuple[int, int, int]] = {}
    for value, pos in winnow(hashes, w):
        if value not in seen:
            seen[value] = (value, lines[pos], lines[pos + k - 1])
    return list(seen.values())
