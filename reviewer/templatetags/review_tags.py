"""Small template filters for the reviewing pages."""

from __future__ import annotations

from typing import Any

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
    import re

    from django.utils.html import escape
    from django.utils.safestring import mark_safe

    escaped = escape(str(text))
    return mark_safe(re.sub(r"`([^`\n]{1,300})`", r"<code>\1</code>", escaped))  # noqa: S308
