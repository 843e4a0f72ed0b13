"""Markdown people or models wrote, rendered for a page without letting it carry markup of its own.

CommonMark with tables, raw HTML off: any HTML in the text is shown as text, and link targets with schemes such as
`javascript:` are not made links (markdown-it's own link check). A YAML front matter block (a dataset card's header)
is left out of the rendering.
"""

import re

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_FRONT_MATTER = re.compile(r"\A---\r?\n.*?\r?\n---\r?\n", re.DOTALL)


def markdown_html(text: str) -> SafeString:
    """The text as HTML that holds only what Markdown itself makes."""
    # Safe by construction: raw HTML is off, so the output holds only what Markdown makes.
    return mark_safe(_RENDERER.render(_FRONT_MATTER.sub("", text or "", count=1)))
