"""What pages show of JSON documents: pretty JSON and line diffs of two JSON values (capped for states)."""

import difflib
import json

from simia_web.core.clipping import clipped

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
