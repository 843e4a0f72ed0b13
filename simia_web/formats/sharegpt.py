"""LLaMA-Factory / APIGen-MT ShareGPT records ⇄ the canonical format, the record's rules and its repair.

A record is `{"conversations": [{"from": .., "value": ..}], "system": "..", "tools": "<json>"}` with
the tags human, gpt, function_call and observation. A function_call value is a JSON string
`{"name": .., "arguments": {..}}`, or a JSON list of them for parallel calls, whose results then
share one observation turn as a JSON list of strings. ShareGPT has no place for the text an
assistant writes next to its tool calls, so that text travels as a `thought` key on the first call
(LLaMA-Factory reads only `name` and `arguments` and ignores it).
"""

import json

from simia_web.core.json_input import json_parse

from .conversation import arguments_value, content_text, tool_call, tool_call_id, tool_result, tools_list
from .errors import FormatError

USER_SIDE = ("human", "observation")
ASSISTANT_SIDE = ("gpt", "function_call")
TAG_ALIASES = {"user": "human", "assistant": "gpt", "tool": "observation", "function": "function_call"}


def _turns(record: dict) -> tuple[str, list[tuple[str, str, str]]]:
    """(system text, [(tag, value, field)]) with a leading system turn lifted out."""
    if not isinstance(record, dict):
        raise FormatError("", "a record must be a JSON object")
    conversations = record.get("conversations")
    if conversations is None:
        raise FormatError("conversations", "is missing")
    if not isinstance(conversations, list):
        raise FormatError("conversations", "must be a list of turns")
    system = record.get("system") or ""
    if not isinstance(system, str):
        raise FormatError("system", "must be a string")
    turns = []
    for i, turn in enumerate(conversations):
        field = f"conversations[{i}]"
        if not isinstance(turn, dict):
            raise FormatError(field, "must be an object")
        tag = turn.get("from", turn.get("role"))
        if not isinstance(tag, str) or not tag:
            raise FormatError(f"{field}.from", "is missing")
        tag = TAG_ALIASES.get(tag, tag)
        value = turn.get("value", turn.get("content"))
        if value is None:
            raise FormatError(f"{field}.value", "is missing")
        if tag in {"function_call", "observation"} and not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False)
        turns.append((tag, content_text(value, f"{field}.value"), field))
    if turns and turns[0][0] == "system":
        system = system or turns[0][1]
        turns = turns[1:]
    return system, turns


def _function_call_problems(value: str, field: str) -> list[str]:
    """A function_call value LLaMA-Factory can train on: JSON naming each call, with arguments as an object (it
    writes them out with json.dumps, so arguments kept as text would be trained as a quoted string)."""
    try:
        parsed = json_parse(value)
    except ValueError as exc:
        return [f"{field}.value: function_call value is not JSON: {exc}"]
    problems = []
    for j, item in enumerate(parsed if isinstance(parsed, list) else [parsed]):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            problems.append(f"{field}.value: call {j} has no name")
        elif not isinstance(item.get("arguments"), dict):
            problems.append(f"{field}.value: call {j} arguments must be a JSON object")
    return problems


def sharegpt_problems(record: dict) -> list[str]:
    """What LLaMA-Factory would refuse or mistrain on: tags must alternate user-side (human, observation) and
    assistant-side (gpt, function_call), starting user-side, with an even number of turns; each function call
    needs a name and arguments that are an object."""
    try:
        _, turns = _turns(record)
    except FormatError as exc:
        return [str(exc)]
    problems = []
    if not turns:
        problems.append("conversations is empty")
    for i, (tag, _, field) in enumerate(turns):
        expected = USER_SIDE if i % 2 == 0 else ASSISTANT_SIDE
        if tag not in expected:
            problems.append(f"{field}: {tag!r} where one of {', '.join(expected)} is expected")
            break
    for tag, value, field in turns:
        if tag == "function_call":
            problems += _function_call_problems(value, field)
    if len(turns) % 2:
        problems.append(f"{len(turns)} turns: ShareGPT needs an even number (the last turn must be the assistant's)")
    return problems


def _calls(value: str, field: str, turn: int) -> tuple[list[dict], str]:
    try:
        parsed = json_parse(value)
    except ValueError as exc:
        raise FormatError(field, f"function_call value is not JSON: {exc}") from None
    items = parsed if isinstance(parsed, list) else [parsed]
    if not items:
        raise FormatError(field, "function_call holds no call")
    calls, thought = [], ""
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise FormatError(field, f"call {j} has no name")
        thought = thought or str(item.get("thought") or "")
        calls.append(tool_call(tool_call_id(turn, j), item["name"], item.get("arguments", {})))
    return calls, thought


def _results(value: str, count: int) -> list[str]:
    """Split one observation among `count` parallel calls: a JSON list of that length splits, else
    every call gets the whole text (nothing is lost)."""
    if count == 1:
        return [value]
    try:
        parsed = json_parse(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, list) and len(parsed) == count:
        return [item if isinstance(item, str) else json.dumps(item, ensure_ascii=False) for item in parsed]
    return [value] * count


def sharegpt_record_to_canonical(record: dict) -> tuple[list[dict], list[dict]]:
    """(messages, tools) of one ShareGPT record."""
    system, turns = _turns(record)
    if not turns:
        raise FormatError("conversations", "is empty")
    tools = tools_list(record.get("tools"))
    messages: list[dict] = [{"role": "system", "content": system}] if system else []
    open_calls: list[dict] = []
    for i, (tag, value, field) in enumerate(turns):
        if tag == "human":
            messages.append({"role": "user", "content": value})
        elif tag == "gpt":
            messages.append({"role": "assistant", "content": value})
        elif tag == "function_call":
            calls, thought = _calls(value, f"{field}.value", i)
            messages.append({"role": "assistant", "content": thought, "tool_calls": calls})
            open_calls = calls
        elif tag == "observation":
            if not open_calls:
                raise FormatError(f"{field}.from", "observation without a preceding function_call")
            for call, result in zip(open_calls, _results(value, len(open_calls)), strict=True):
                messages.append(tool_result(call["id"], result))
            open_calls = []
        elif tag == "system":
            messages.append({"role": "system", "content": value})
        else:
            raise FormatError(f"{field}.from", f"unknown tag {tag!r} (use human, gpt, function_call, observation)")
    return messages, tools


def canonical_to_sharegpt(messages: list[dict], tools: list[dict]) -> dict:
    """A ShareGPT record. Leading system messages become `system`; tool results of one assistant
    turn become one observation turn."""
    system_parts = []
    index = 0
    while index < len(messages) and messages[index].get("role") == "system":
        system_parts.append(messages[index].get("content") or "")
        index += 1
    conversations = []
    pending_results: list[str] = []

    def flush_results() -> None:
        if pending_results:
            value = pending_results[0] if len(pending_results) == 1 else json.dumps(pending_results, ensure_ascii=False)
            conversations.append({"from": "observation", "value": value})
            pending_results.clear()

    for message in messages[index:]:
        role = message.get("role")
        text = message.get("content") or ""
        if role == "tool":
            pending_results.append(text)
            continue
        flush_results()
        if role == "user":
            conversations.append({"from": "human", "value": text})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [
                {"name": c["function"]["name"], "arguments": arguments_value(c["function"].get("arguments"))}
                for c in message["tool_calls"]
            ]
            if text:
                calls[0] = {**calls[0], "thought": text}
            value = calls[0] if len(calls) == 1 else calls
            conversations.append({"from": "function_call", "value": json.dumps(value, ensure_ascii=False)})
        elif role == "assistant":
            conversations.append({"from": "gpt", "value": text})
        else:
            conversations.append({"from": role or "", "value": text})
    flush_results()
    record: dict[str, object] = {"conversations": conversations}
    if system_parts:
        record["system"] = "\n\n".join(system_parts)
    record["tools"] = json.dumps(tools_list(tools), ensure_ascii=False)
    return record


SHAREGPT_MERGEABLE = {"human", "gpt"}


def sharegpt_repair(record: dict) -> tuple[dict, list[str]]:
    """Merge back-to-back human or gpt turns, the one break LLaMA-Factory skips that can be mended
    without inventing or dropping content. Returns the record and what was repaired."""
    merged: list[dict] = []
    repairs = []
    for turn in record["conversations"]:
        previous = merged[-1] if merged else None
        if previous and previous["from"] == turn["from"] and turn["from"] in SHAREGPT_MERGEABLE:
            previous["value"] = "\n\n".join(v for v in (previous["value"], turn["value"]) if v)
            repairs.append(f"merged consecutive {turn['from']} turns at {len(merged) - 1}")
            continue
        merged.append(dict(turn))
    return {**record, "conversations": merged}, repairs


def sharegpt_dataset_info(name: str, file_name: str) -> dict:
    """LLaMA-Factory's dataset_info.json entry naming a file of these records."""
    return {
        name: {
            "file_name": file_name,
            "formatting": "sharegpt",
            "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
            "tags": {
                "role_tag": "from",
                "content_tag": "value",
                "user_tag": "human",
                "assistant_tag": "gpt",
                "observation_tag": "observation",
                "function_tag": "function_call",
                "system_tag": "system",
            },
        }
    }
