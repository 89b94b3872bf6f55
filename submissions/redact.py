"""The one redactor every stored log and message goes through."""

from __future__ import annotations

from cassettes_app.secrets import redact_text

__all__ = ["redact_text"]
