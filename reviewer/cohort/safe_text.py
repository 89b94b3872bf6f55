"""Free text made safe to show or share: redacted whole, then cut.

A key cut in half before the scan could slip past it, so text is redacted first and
shortened afterwards. Memoised per instance (one page or report build): a cohort repeats
the same evidence lines and summaries many times.
"""

from __future__ import annotations

from cassettes_app.secrets.redaction import redact_text
from cassettes_app.text import clipped


class SafeText:
    """Redact whole, then cut; each distinct text is scanned once."""

    # Text this far past what is shown is dropped before the scan: a key that starts inside
    # the shown part ends well within it, and a long log costs no scan of its tail.
    MARGIN = 4096

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def full(self, text: object, limit: int = 20_000) -> str:
        raw = "" if text is None else str(text)
        raw = raw[: limit + self.MARGIN]
        out = self._seen.get(raw)
        if out is None:
            out = self._seen[raw] = redact_text(raw)
        return out

    def cut(self, text: object, limit: int, *, one_line: bool = True) -> str:
        raw = "" if text is None else str(text)
        # Whitespace goes first: squeezed after the scan, it could pull an unscanned tail
        # into the shown part.
        raw = " ".join(raw.split()) if one_line else raw.strip()
        out = self.full(raw, limit)
        return clipped(out, limit)
