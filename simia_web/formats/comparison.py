"""Two versions of a conversation compared: the changed messages side by side, as the revision history shows them."""

import difflib

from simia_web.formats.conversation import message_text


def _message_line(message: dict) -> str:
    """One message as text for a side-by-side comparison: its words, then each tool call."""
    parts = [message_text(message)] if message_text(message) else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(f"→ {function.get('name', '')}({function.get('arguments', '')})")
    if message.get("tool_call_id"):
        parts.insert(0, f"[result of {message['tool_call_id']}]")
    return "\n".join(parts)


def messages_side_by_side(before: list[dict], after: list[dict]) -> list[dict]:
    """Changed messages of two versions aligned as rows: {"old": (index, role, text) or None, "new": ...}."""
    old = [(m.get("role", ""), _message_line(m)) for m in before or []]
    new = [(m.get("role", ""), _message_line(m)) for m in after or []]
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            rows.append(
                {
                    "old": (i, *old[i]) if i < i2 else None,
                    "new": (j, *new[j]) if j < j2 else None,
                }
            )
    return rows
