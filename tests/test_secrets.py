"""Tests for cassettes_app.secrets (placeholder while writing)."""

from __future__ import annotations


def test_import() -> None:
    """The module imports."""
    import cassettes_app.secrets  # noqa: F401
