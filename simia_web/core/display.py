"""What pages show of JSON documents and conversations: pretty JSON, line diffs of two JSON values (capped for
states), and the changed messages of two versions of a conversation side by side."""

import difflib
import json

from simia_web.core.clipping import clipped
from simia_web.formats.conversation import message_text

# A state diff is computed only between states this small (as pretty JSON) and shows at most this many lines.
STATE_DIFF_MAX_CHARS = 200_000
STATE_DIFF_LINES = 200


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def json_diff(before, after) -> list[tuple[str, str]]:
    """Line diff of two JSON values as (kind, text) with kind in {"add", "del", "ctx", "hunk"}."""
    lines = []
    a, b = pretty_json(before).splitlines(), pretty_json(after).splitlines()
    for line in difflib.unified_diff(a, b, lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


def state_diff(before, after) -> tuple[list[tuple[str, str]], str]:
    """The diff a page shows between two states, capped, and a note saying what was left out."""
    a, b = pretty_json(before), pretty_json(after)
    if len(a) > STATE_DIFF_MAX_CHARS or len(b) > STATE_DIFF_MAX_CHARS:
        return [], f"The state is too large to compare here ({max(len(a), len(b)):,} characters as JSON)."
    lines = json_diff(before, after)
    shown = [(kind, clipped(line, limit=500)[0]) for kind, line in lines[:STATE_DIFF_LINES]]
    omitted = len(lines) - len(shown)
    return shown, f"… and {omitted:,} more lines." if omitted else ""


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
