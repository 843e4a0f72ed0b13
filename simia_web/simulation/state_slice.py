"""The slice of the world state that one tool call touches, for a simulator prompt that fits its model.

A state that fits the budget is shown whole. A larger one (τ² retail's is 1.3 MB) is shown as the
records the call's arguments name, each keyed by its JSON Pointer in the full state, so a JSON Patch
the simulator writes against the slice applies to the full state unchanged. A record is named when one
of its keys equals an argument value (an order id keying `/orders`) or when its fields hold argument
values (a user found by name and zip); records naming more of the arguments come first. Values found
in very many records (a status, a country) pick nothing. Each collection is summarised (type, size, a
sample key) so a new record can be added at a valid path. What did not fit is listed in `cut`.
"""

from collections import defaultdict
from typing import Any

from .prompt_fit import json_size

MAX_RECORDS_PER_VALUE = 20  # a value found in more records than this says little about which one is meant
RECORD_DEPTH = 2  # /collection/record: the record that holds a matching field
NOTES_ROOM = 500  # kept for the notes of what was cut (each note is bounded)
NOTE = (
    "Only the records this call names are shown, keyed by their JSON Pointer in the full world state; the rest "
    "of the state exists but is not shown. Write patch paths against the full state (these pointers)."
)


def pointer(path: tuple) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _needles(value: object, found: set[str]) -> set[str]:
    """The argument values worth looking up: strings of 2+ characters and whole numbers of 3+ digits."""
    if isinstance(value, dict):
        for item in value.values():
            _needles(item, found)
    elif isinstance(value, list):
        for item in value:
            _needles(item, found)
    elif isinstance(value, str) and len(value.strip()) >= 2:
        found.add(value.strip())
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 100:
        found.add(str(value))
    return found


def _hits(state: object, needles: set[str]) -> dict[str, dict[tuple, int]]:
    """needle -> {record path: weight}; a key match (weight 2) names the value under the key itself."""
    hits: dict[str, dict[tuple, int]] = defaultdict(dict)
    stack: list[tuple[tuple, object]] = [((), state)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                child = (*path, key)
                if key in needles:
                    hits[key][child] = 2
                stack.append((child, value))
        elif isinstance(node, list):
            stack.extend(((*path, i), value) for i, value in enumerate(node))
        elif isinstance(node, str | int) and not isinstance(node, bool):
            text = node if isinstance(node, str) else str(node)
            if text in needles:
                hits[text].setdefault(path[:RECORD_DEPTH], 1)
    return hits


def _shallow(value: object) -> object:
    """A record too large to show: its scalar fields, and the size of each nested part."""
    if not isinstance(value, dict):
        return f"({type(value).__name__} of {len(value)} items, not shown)" if isinstance(value, list) else value
    return {
        key: item if not isinstance(item, dict | list) else f"({type(item).__name__} of {len(item)} items, not shown)"
        for key, item in value.items()
    }


def _lookup(state: Any, path: tuple) -> Any:
    for part in path:
        state = state[part]
    return state


def _collections(state: dict) -> dict[str, str]:
    summary = {}
    for key, value in state.items():
        if isinstance(value, dict):
            sample = next(iter(value), None)
            summary[pointer((key,))] = f"object of {len(value)} records" + (f", keys like {sample!r}" if sample else "")
        elif isinstance(value, list):
            summary[pointer((key,))] = f"array of {len(value)} items (append with {pointer((key, '-'))})"
        else:
            summary[pointer((key,))] = type(value).__name__
    return summary


def _path_scores(state: dict, arguments: dict) -> tuple[dict[tuple, int], str | None]:
    """How strongly the call's arguments name each record, and a note of values too common to pick by."""
    scores: dict[tuple, int] = defaultdict(int)
    common = []
    for needle, records in _hits(state, _needles(arguments, set())).items():
        if len(records) > MAX_RECORDS_PER_VALUE:
            common.append(f"{needle[:40]!r} is found in {len(records)} records")
            continue
        for path, weight in records.items():
            scores[path] += weight
    if not common:
        return scores, None
    return scores, f"not used to pick records: {'; '.join(common[:3])}{' and more' if len(common) > 3 else ''}"


def _records_within(state: dict, scores: dict[tuple, int], room: int, cut: list[str]) -> dict[str, object]:
    """The best-scored records that fit `room`, a record too large shown without its nested parts."""
    records: dict[str, object] = {}
    shown: list[tuple] = []
    left_out: list[str] = []
    for path in sorted(scores, key=lambda p: (-scores[p], len(p), pointer(p))):
        if any(path[: len(parent)] == parent for parent in shown):
            continue  # already inside a record shown
        value = _lookup(state, path)
        size = json_size(value) + len(pointer(path)) + 6
        if size > room:
            value = _shallow(value)
            size = json_size(value) + len(pointer(path)) + 6
            if size > room:
                left_out.append(pointer(path))
                continue
            if len(cut) < 4:
                cut.append(f"{pointer(path)[:80]} shown without its nested parts: too large")
        records[pointer(path)] = value
        shown.append(path)
        room -= size
    if left_out:
        cut.append(f"{len(left_out)} more named records not shown for lack of room, e.g. {left_out[:2]}")
    return records


def state_view(state: dict, arguments: dict, budget: int) -> tuple[dict, list[str]]:
    """({"state": whole} or {"state_slice": {...}}, notes of what was cut) within `budget` characters."""
    if json_size(state) <= budget:
        return {"state": state}, []
    collections = _collections(state) if isinstance(state, dict) else {}
    room = budget - json_size(collections) - len(NOTE) - NOTES_ROOM
    scores, common = _path_scores(state, arguments)
    cut = [common] if common else []
    records = _records_within(state, scores, room, cut)
    if not scores:
        cut.append("no record of the state is named by the call's arguments")
    return {"state_slice": {"note": NOTE, "records": records, "collections": collections}}, cut
