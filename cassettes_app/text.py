"""Text cut for showing: the one ellipsis rule of every app.

A cut text keeps its first `limit - 1` characters and ends in "…", so it is exactly
`limit` long, as check summaries and evidence in the report JSON always were; nothing is
stripped before the ellipsis, so the same text is cut the same way in the report and on
every page.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last one an ellipsis when it is cut."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def one_line(text: str) -> str:
    """Every run of whitespace (line breaks included) as one space, the ends trimmed."""
    return " ".join(text.split())
