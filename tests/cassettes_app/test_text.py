"""The one ellipsis rule: exactly `limit` characters, the last an ellipsis, nothing stripped."""

from __future__ import annotations

from cassettes_app.text import clipped, one_line


def test_a_text_that_fits_is_kept_whole() -> None:
    assert clipped("abcde", 5) == "abcde"


def test_a_cut_text_is_exactly_limit_long_and_ends_in_an_ellipsis() -> None:
    assert clipped("abcdef", 5) == "abcd…"
    assert clipped("ab   cdef", 5) == "ab  …"  # what the report JSON always showed


def test_one_line_squeezes_every_whitespace_run() -> None:
    assert one_line("  a\n\tb  c ") == "a b c"
