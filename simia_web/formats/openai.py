"""OpenAI chat fine-tuning records (`messages` + `tools`) ⇄ the canonical format, and the record's rules.

The canonical format is the OpenAI chat format itself, so these converters only normalize:
arguments become JSON strings, content parts become text, tools get the function wrapper.
"""

import functools
import json
from typing import Annotated, NamedTuple

import msgspec
import orjson
from msgspec import Meta

from .conversation import (
    ROLES,
    AssistantMessage,
    ConversationMeasure,
    Message,
    ToolResultMessage,
    UserMessage,
    arguments_object,
    canonical_conversation,
    messages_strict,
    parse_arguments,
    tool_call,
    tool_schemas,
    tools_canonical,
    tools_list,
)
from .errors import FormatError


def openai_record_to_canonical(record: dict) -> tuple[list[dict], list[dict]]:
    """(messages, tools) of one OpenAI chat record."""
    if not isinstance(record, dict):
        raise FormatError("", "a record must be a JSON object")
    if "messages" not in record:
        raise FormatError("messages", "is missing")
    return messages_strict(record["messages"]), tools_list(record.get("tools"))


def canonical_to_openai(messages: list[dict], tools: list[dict]) -> dict:
    """An OpenAI chat fine-tuning record; arguments are JSON strings, tool messages keep tool_call_id."""
    out = []
    for message in messages:
        item = {"role": message["role"], "content": message.get("content") or ""}
        if message.get("tool_calls"):
            item["tool_calls"] = [
                tool_call(call.get("id", ""), call["function"]["name"], call["function"].get("arguments"))
                for call in message["tool_calls"]
            ]
        if message["role"] == "tool":
            item["tool_call_id"] = message.get("tool_call_id", "")
        out.append(item)
    return {"messages": out, "tools": tools_list(tools)}


def strict_to_openai(messages: list[dict], tools: list[dict]) -> dict:
    """canonical_to_openai of what the strict normaliser returned (messages_strict, tools_list), equal to it without
    building each message, call and tool again: those already have the record's shape, but for the `name` a tool
    result may keep, which the record leaves out. The record shares their dicts: neither is changed afterwards."""
    return {
        "messages": [{k: v for k, v in m.items() if k != "name"} if "name" in m else m for m in messages],
        "tools": tools,
    }


def openai_record_strict(messages: object, tools: object) -> tuple[dict, list[dict], list[str]]:
    """The gate of a stored conversation in one call: (the OpenAI record, the strict messages, openai_problems of
    the record), equal to strict_to_openai(messages_strict(messages), tools_list(tools)) and openai_problems of it,
    and raising the FormatError messages_strict or tools_list raises.

    A conversation in the canonical shape that the record's rules pass (every record a curated export holds) is
    decided and copied from msgspec Structs, with no walk over its dicts; any other goes the long way, which names
    what it refuses."""
    conversation = canonical_conversation(messages, tools)
    if conversation is not None:
        names = {tool.function.name for tool in conversation.tools}
        if _measure_when_clean(conversation.messages, names) is not None:
            record = msgspec.to_builtins(conversation)
            return record, record["messages"], []
    strict = messages_strict(messages)
    record = strict_to_openai(strict, tools_list(tools))
    return record, strict, openai_problems(record)


class GatedRecord(NamedTuple):
    """An OpenAI record the gate passed: its line (the record's compact JSON, the bytes orjson.dumps writes of it),
    its messages (msgspec Structs or the strict normaliser's dicts), its tools and the dataset card's measure."""

    line: bytes
    messages: list
    tools: list[dict]
    measure: ConversationMeasure

    def record(self) -> dict:
        return {"messages": msgspec.to_builtins(self.messages), "tools": self.tools}


_MESSAGES = msgspec.json.Decoder(Annotated[list[Message], Meta(min_length=1)])


def openai_record_from_text(messages_text: str, tools_text: str) -> GatedRecord | None:
    """The gate of a conversation stored as JSON text (its messages and its tools), decoded straight into msgspec
    Structs and encoded from them: the record when the conversation is in the canonical shape and the record's rules
    pass (every record a curated export holds), byte for byte what openai_record_strict gives of the parsed text;
    None for any other, which the caller takes the long way (openai_record_strict), naming what it refuses."""
    tools = _stored_tools(tools_text)
    if tools is None:
        return None
    try:
        messages = _MESSAGES.decode(messages_text)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    measure = _measure_when_clean(messages, tools.names)
    if measure is None:
        return None
    # The messages hold strings only, which msgspec and orjson write alike (numbers, in the tools, they write apart).
    line = b'{"messages":' + msgspec.json.encode(messages) + b',"tools":' + tools.line + b"}"
    return GatedRecord(line, messages, tools.tools, measure)


class _StoredTools(NamedTuple):
    line: bytes  # the tools as the record's line holds them
    tools: list[dict]
    names: frozenset[str]


@functools.lru_cache(maxsize=64)
def _stored_tools(text: str) -> _StoredTools | None:
    """A stored tools list (its JSON text), read as a JSONField reads it, when it is in the canonical shape; once per
    distinct text, since the records of a domain share theirs. None when it is not canonical, or holds an integer
    beyond 64 bits, which the record's JSON cannot."""
    try:
        tools = tools_canonical(json.loads(text))
        if tools is None:
            return None
        return _StoredTools(orjson.dumps(tools), tools, frozenset(tool["function"]["name"] for tool in tools))
    except (ValueError, TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None


def _measure_when_clean(messages: list[Message], names: set[str] | frozenset[str]) -> ConversationMeasure | None:
    """The dataset card's measure of the messages when openai_problems finds nothing in their record and they hold no
    tool result's `name` (which the record leaves out); None sends them the long way, which finds what is wrong."""
    open_calls: set[str] = set()
    assistant = False
    turns, call_names, parts = 0, [], []
    for message in messages:
        parts.append(message.content)
        if isinstance(message, ToolResultMessage):
            call_id = message.tool_call_id
            if call_id not in open_calls or message.name is not msgspec.UNSET:
                return None
            open_calls.remove(call_id)
            continue
        if open_calls:
            return None
        if isinstance(message, AssistantMessage):
            assistant = True
            turns += 1
            for call in message.tool_calls or ():
                function = call.function
                name, arguments = function.name, function.arguments
                if name not in names or not arguments_object(arguments):
                    return None
                open_calls.add(call.id)
                call_names.append(name)
                parts += (name, arguments)
        elif isinstance(message, UserMessage):
            turns += 1
    if not assistant or open_calls:
        return None
    return ConversationMeasure(turns, call_names, parts)


def _call_problems(call: dict, where: str, names: set[str]) -> list[str]:
    problems = []
    name = call["function"]["name"]
    if not call.get("id"):
        problems.append(f"{where}.id: is missing")
    if name not in names:
        problems.append(f"{where}: tool {name!r} is not in tools")
    arguments = call["function"].get("arguments")
    if not isinstance(arguments, str):
        problems.append(f"{where}.arguments: must be a JSON string")
    elif not (arguments and arguments_object(arguments)):
        error = parse_arguments(call)[1]
        if error:
            problems.append(f"{where}.arguments: {error}")
    return problems


def openai_problems(record: dict) -> list[str]:
    """What the OpenAI fine-tuning format refuses: unknown roles, calls to undeclared tools,
    arguments that are not a JSON object string, tool results without their call (and the reverse)."""
    problems = []
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: is empty"]
    names = set(tool_schemas(record.get("tools") or []))
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{i}]"
        if role not in ROLES:
            problems.append(f"{where}.role: unknown role {role!r}")
            continue
        if role != "tool" and open_calls:
            problems.append(f"{where}: tool call(s) {', '.join(sorted(open_calls))} have no result")
            open_calls.clear()
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                problems.append(f"{where}.tool_call_id: no open call {message.get('tool_call_id')!r}")
            open_calls.discard(message.get("tool_call_id"))
        for j, call in enumerate(message.get("tool_calls") or []):
            problems.extend(_call_problems(call, f"{where}.tool_calls[{j}]", names))
            open_calls.add(call.get("id"))
    if open_calls:
        problems.append(f"tool call(s) {', '.join(sorted(open_calls))} have no result")
    if not any(m.get("role") == "assistant" for m in messages):
        problems.append("messages: no assistant message to train on")
    return problems
