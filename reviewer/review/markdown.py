"""Reviewers' notes: Markdown rendered to HTML, then sanitised (nh3) before it reaches a page."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

# CommonMark without raw HTML; nh3 then removes anything unsafe that slipped through
# (javascript: links, event attributes), whatever the renderer did.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "a", "h1", "h2",
    "h3", "h4", "hr", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


def render_markdown(text: str) -> str:
    """Safe HTML for a note."""
    html = _md.render(text or "")
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
