"""Bounds for pages that show stored conversations (seeds, trajectories): a window of messages, long texts cut with
a link to the whole of one message, and no in-browser editing of a document too large to send as a form."""

from django.core.paginator import Paginator

from simia_web.core.jsonutil import canonical_bytes

PAGE_MESSAGES = 50
TEXT_CHARS = 4000
EDIT_MAX_BYTES = 512 * 1024


def clipped(text: str, full: bool = False, limit: int = TEXT_CHARS) -> tuple[str, bool]:
    """The text as a page shows it and whether it was cut: the whole text when asked for in full or short enough."""
    if full or len(text) <= limit:
        return text, False
    return text[:limit], True


def message_page(request, messages: list):
    """The page of messages a request asks for (`?page=`), PAGE_MESSAGES at a time."""
    return Paginator(messages, PAGE_MESSAGES).get_page(request.GET.get("page"))


def shown_in_full(request) -> int | None:
    """The index of the one message a request asks to see in full (`?full=`), if any."""
    value = request.GET.get("full", "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else None


def message_href(query: str, index: int) -> str:
    """A link to message `index` on whichever page holds it, keeping the page's other parameters (`query`)."""
    return f"?{query}{'&' if query else ''}page={index // PAGE_MESSAGES + 1}#m{index}"


def too_large_to_edit(messages, tools) -> bool:
    """An edit form (and a revision diff) repeats the whole document, so large ones are edited as files instead.
    Measured message by message, stopping at the limit, so a huge document is never serialized whole."""
    size = len(canonical_bytes(tools))
    for message in messages:
        if size > EDIT_MAX_BYTES:
            break
        size += len(canonical_bytes(message))
    return size > EDIT_MAX_BYTES
