"""How the trajectory page shows a conversation (messages with their tool calls, state changes and rule
violations, long texts cut) and its revisions side by side. All text stays plain: templates escape it."""

import json
from collections import defaultdict
from dataclasses import dataclass, field

from simia_web.core.clipping import clipped
from simia_web.core.display import pretty_json, state_diff
from simia_web.core.selectors import revision_list
from simia_web.curation.models import Trajectory
from simia_web.formats.comparison import messages_side_by_side
from simia_web.formats.conversation import message_text, parse_arguments

# A revision shows at most this many changed messages, each cut shorter than on the conversation (20 revisions).
REVISION_ROWS = 50
REVISION_TEXT_CHARS = 1000


@dataclass
class ChatItem:
    index: int
    role: str
    text: str
    name: str = ""
    tool_call_id: str = ""
    tool_calls: list = field(default_factory=list)  # [{"id", "name", "arguments", "error"}]
    patch: str = ""
    state_diff: list = field(default_factory=list)
    state_note: str = ""
    step_errors: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    cited: bool = False
    clipped: bool = False


def _content_text(message: dict) -> str:
    content = message.get("content")
    if content is None or isinstance(content, list):
        return message_text(message)
    if isinstance(content, str):
        # Tool results are often JSON: pretty-print them for reading.
        if message.get("role") == "tool":
            try:
                return pretty_json(json.loads(content))
            except ValueError:
                return content
        return content
    return pretty_json(content)


def _state_before(trajectory: Trajectory, index: int):
    """The environment state just before message `index`: the last recorded state after an earlier step."""
    steps = trajectory.steps or {}
    for earlier in range(index - 1, -1, -1):
        step = steps.get(str(earlier))
        if isinstance(step, dict) and isinstance(step.get("state_after"), dict):
            return step["state_after"]
    return trajectory.initial_state or {}


def chat_items(
    trajectory: Trajectory, cited: set[int], *, start: int = 0, stop: int | None = None, full: int | None = None
) -> list[ChatItem]:
    """Messages start..stop of the conversation ready for the template; all text stays plain and is escaped when
    rendered. Long texts are cut (ChatItem.clipped) except in message `full`, which is shown whole."""
    messages = trajectory.messages or []
    stop = len(messages) if stop is None else min(stop, len(messages))
    violations_by_index = defaultdict(list)
    for violation in trajectory.violations.all():
        if start <= (violation.message_index if violation.message_index is not None else -1) < stop:
            violations_by_index[violation.message_index].append(violation)
    state = _state_before(trajectory, start)
    items = []
    for index in range(start, stop):
        message = messages[index]
        if not isinstance(message, dict):
            message = {"role": "?", "content": str(message)}
        whole = index == full
        text, cut = clipped(_content_text(message), whole)
        calls = []
        for call in message.get("tool_calls") or []:
            arguments, error = parse_arguments(call)
            raw = (call.get("function") or {}).get("arguments", "")
            shown, cut_call = clipped(pretty_json(arguments) if error is None else str(raw), whole)
            cut = cut or cut_call
            calls.append(
                {
                    "id": call.get("id", ""),
                    "name": (call.get("function") or {}).get("name", ""),
                    "arguments": shown,
                    "error": clipped(error or "")[0],
                }
            )
        item = ChatItem(
            index=index,
            role=str(message.get("role", "")),
            text=text,
            name=str(message.get("name", "")),
            tool_call_id=str(message.get("tool_call_id", "")),
            tool_calls=calls,
            violations=violations_by_index.get(index, []),
            cited=index in cited,
        )
        step = (trajectory.steps or {}).get(str(index))
        if isinstance(step, dict):
            if step.get("patch"):
                item.patch, cut_patch = clipped(pretty_json(step["patch"]), whole)
                cut = cut or cut_patch
            if "state_after" in step and isinstance(step["state_after"], dict):
                item.state_diff, item.state_note = state_diff(state, step["state_after"])
                state = step["state_after"]
            item.step_errors = [clipped(str(e))[0] for e in (step.get("errors") or [])[:20]]
        item.clipped = cut
        items.append(item)
    return items


def _row_clipped(side):
    return (side[0], side[1], clipped(side[2], limit=REVISION_TEXT_CHARS)[0]) if side else None


def revision_history(trajectory: Trajectory, limit: int = 20) -> list[dict]:
    """The trajectory's versions, newest first, each with its changes beside the version before it (the first
    REVISION_ROWS changed messages, texts cut; `more_rows` counts the rest)."""
    revisions = list(revision_list(obj=trajectory)[: limit + 1])
    history = []
    for i, revision in enumerate(revisions[:limit]):
        previous = revisions[i + 1] if i + 1 < len(revisions) else None
        before = (previous.data or {}).get("messages", []) if previous else []
        rows = messages_side_by_side(before, revision.data.get("messages", [])) if previous else []
        history.append(
            {
                "revision": revision,
                "rows": [{"old": _row_clipped(r["old"]), "new": _row_clipped(r["new"])} for r in rows[:REVISION_ROWS]],
                "more_rows": max(len(rows) - REVISION_ROWS, 0),
                "current": revision.version == trajectory.text_version,
            }
        )
    return history
