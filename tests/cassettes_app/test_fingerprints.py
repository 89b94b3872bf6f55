"""cassettes_app.fingerprints: normalised tokens, k-grams and winnowing."""

from __future__ import annotations

import time

from cassettes_app.fingerprints import (
    MAX_TOKENS,
    fingerprints,
    generic_tokens,
    generic_tokens_at,
    kgrams,
    located_fingerprints,
    python_tokens,
    python_tokens_at,
    winnow,
)

# Schleimer, Wilkerson, Aiken, "Winnowing: Local Algorithms for Document Fingerprinting"
# (SIGMOD 2003), figure 2: "A do run run run, a do run run" with irrelevant features
# removed, its 5-grams, their hypothetical hashes, and what winnowing with windows of 4
# selects.
PAPER_TEXT = "adorunrunrunadorunrun"
PAPER_GRAMS = [
    "adoru",
    "dorun",
    "orunr",
    "runru",
    "unrun",
    "nrunr",
    "runru",
    "unrun",
    "nruna",
    "runad",
    "unado",
    "nador",
    "adoru",
    "dorun",
    "orunr",
    "runru",
    "unrun",
]
PAPER_HASHES = [77, 74, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 74, 42, 17, 98]
PAPER_FINGERPRINTS = [(17, 3), (17, 6), (8, 8), (39, 11), (17, 15)]


def test_the_papers_five_grams() -> None:
    assert ["".join(g) for g in kgrams(list(PAPER_TEXT), 5)] == PAPER_GRAMS


def test_winnowing_selects_the_papers_fingerprints() -> None:
    assert winnow(PAPER_HASHES, 4) == PAPER_FINGERPRINTS


def test_winnowing_short_inputs() -> None:
    assert winnow([], 4) == []
    assert winnow([5, 3, 9], 4) == [(3, 1)]
    assert winnow([2, 2, 2, 2, 2], 4) == [(2, 3), (2, 4)]  # rightmost on a tie


ORIGINAL = '''
import json


def load(path):
    """Read the fixtures."""
    with open(path) as handle:
        return json.load(handle)  # parsed


def total(items, rate=0.2):
    return sum(item["price"] * (1 + rate) for item in items)
'''

RENAMED = """
import json
def sum_up(rows, tax=0.25):
    return sum(row['cost'] * (1 + tax) for row in rows)
def read_fixtures(filename):
    with open(filename) as f:
        return json.load(f)
"""


def test_python_names_and_literals_are_abstracted_comments_and_layout_dropped() -> None:
    tokens = python_tokens("def f(x):\n    # hi\n    return x + 1  # one\n")
    assert tokens == ["def", "N", "(", "N", ")", ":", "return", "N", "+", "L"]


def test_renamed_and_reordered_python_shares_the_fingerprints() -> None:
    original = set(fingerprints(python_tokens(ORIGINAL)))
    renamed = set(fingerprints(python_tokens(RENAMED)))
    # Only the k-grams across the seam where the functions were swapped (and the dropped
    # docstring) differ.
    assert len(original & renamed) >= 0.6 * len(renamed) > 0


def test_generic_lexer_abstracts_and_drops_comments() -> None:
    code = 'function add(a, b) { /* sum */ return a + 42; } // done\nlet s = "x\\"y";'
    assert generic_tokens(code) == [
        "function", "N", "(", "N", ",", "N", ")", "{", "return", "N", "+", "L", ";", "}",
        "let", "N", "=", "L", ";",
    ]  # fmt: skip


def test_a_cut_python_file_keeps_the_tokens_before_the_cut() -> None:
    assert python_tokens('x = 1\ny = """never closed\n') == ["N", "=", "L", "N", "="]


def test_hostile_text_stays_bounded_and_linear() -> None:
    # Unterminated comments and strings at every position, and one very long line: each
    # pass is linear, and at most MAX_TOKENS tokens are kept.
    for text in ("/*" * 300_000, '"' * 600_000, "a+" * 500_000, "(" * 600_000):
        started = time.monotonic()
        assert len(generic_tokens(text)) <= MAX_TOKENS
        assert len(python_tokens(text)) <= MAX_TOKENS
        assert time.monotonic() - started < 10


def test_tokens_know_their_lines_in_both_lexers() -> None:
    text = "def f(x):\n    # note\n\n    return x + 1\n"
    assert python_tokens_at(text) == (
        ["def", "N", "(", "N", ")", ":", "return", "N", "+", "L"],
        [1, 1, 1, 1, 1, 1, 4, 4, 4, 4],
    )
    js = "let a = 1;\n/* two\nlines */\nfoo(a,\n  'x');\n"
    tokens, lines = generic_tokens_at(js)
    assert tokens == ["let", "N", "=", "L", ";", "N", "(", "N", ",", "L", ")", ";"]
    assert lines == [1, 1, 1, 1, 1, 4, 4, 4, 4, 5, 5, 5]


def test_a_located_fingerprint_spans_its_k_grams_lines() -> None:
    tokens = [f"t{n}" for n in range(20)]
    lines = [n // 3 + 1 for n in range(20)]  # three tokens a line
    located = located_fingerprints(tokens, lines)
    assert [h for h, _, _ in located] == fingerprints(tokens)
    for _, first, last in located:
        assert last - first in (1, 2)  # five tokens span two or three lines
