"""Small template filters for the reviewing pages."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from django import template

register = template.Library()


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """mapping[key], or None (for dicts keyed by ids)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def status_label(status: str) -> str:
    """A check status as a reviewer reads it: `error` is "could not run", never a flaw."""
    from reviewer.review.verdict import status_label as label

    return label(status)


@register.filter
def environment_caused(check: Any) -> bool:
    """True for an error this server's environment caused (the banner names the fix)."""
    from reviewer.review.verdict import environment_caused as caused

    return caused(check)


@register.filter
def ticks(text: object) -> str:
    """Text with `backticked` parts as code: escaped first, so nothing else becomes markup."""
    from django.utils.html import escape
    from django.utils.safestring import mark_safe

    escaped = escape(str(text))
    return mark_safe(re.sub(r"`([^`\n]{1,300})`", r"<code>\1</code>", escaped))  # noqa: S308


# `triager/llm.py:24` in a summary: a relative path with an extension, then a line number.
_LOCATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]{1,8}):(\d{1,7})\b")


@register.filter
def locations(html: object, submission: Any) -> str:
    """Already-escaped text with each code location (`path:line`) of a file the hand-in
    holds made a link to that line in the file viewer; other text is left as it is."""
    from django.urls import reverse
    from django.utils.safestring import mark_safe

    from submissions.intake.stored import member_paths

    text = str(html)
    if submission is None or ":" not in text or not _LOCATION.search(text):
        return mark_safe(text)  # noqa: S308 - the input was escaped by the filter before
    files = member_paths(submission)  # from the stored archive: no WORK_DIR needed
    url = reverse("submission_file", args=[submission.pk])

    def link(match: re.Match[str]) -> str:
        path, line = match.group(1), match.group(2)
        if path not in files:
            return match.group(0)
        return f'<a href="{url}?path={quote(path)}&amp;line={line}#L{line}">{match.group(0)}</a>'

    return mark_safe(_LOCATION.sub(link, text))  # noqa: S308 - paths match [\w./-] only
