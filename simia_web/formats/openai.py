"""OpenAI chat fine-tuning records (`messages` + `tools`) ⇄ the canonical format, and the record's rules.

The canonical format is the OpenAI chat format itself, so these converters only normalize:
arguments become JSON strings, content parts become text, tools get the function wrapper.
"""

import msgspec

from .conversation import (
    ROLES,
    AssistantMessage,
    CanonicalConversation,
    ToolResultMessage,
    arguments_object,
    canonical_conversation,
    messages_strict,
    parse_arguments,
    tool_call,
    tool_schemas,
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
    if conversation is not None and _conversation_clean(conversation):
        record = msgspec.to_builtins(conversation)
        return record, record["messages"], []
    strict = messages_strict(messages)
    record = strict_to_openai(strict, tools_list(tools))
    return record, strict, openai_problems(record)


def _conversation_clean(conversation: CanonicalConversation) -> bool:
    """True when openai_problems finds nothing in the conversation's record and it holds no tool result's `name`
    (which the record leaves out); False sends it the long way, which finds what is wrong."""
    names = {tool.function.name for tool in conversation.tools}
    open_calls: set[str] = set()
    assistant = False
    for message in conversation.messages:
        if isinstance(message, ToolResultMessage):
            if message.name is not msgspec.UNSET or message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AssistantMessage):
            assistant = True
            for call in message.tool_calls or ():
                function = call.function
                if function.name not in names or not arguments_object(function.arguments):
                    return False
                open_calls.add(call.id)
    return assistant and not open_calls


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
