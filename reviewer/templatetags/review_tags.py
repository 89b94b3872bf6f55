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
