"""OpenAI chat fine-tuning records (`messages` + `tools`) ⇄ the canonical format.

The canonical format is the OpenAI chat format itself, so these converters only normalize:
arguments become JSON strings, content parts become text, tools get the function wrapper.
"""

from .common import arguments_text, content_text, tools_list
from .errors import FormatError

ROLES = {"system", "user", "assistant", "tool"}


def _call(call, field: str, fallback_id: str) -> dict:
    if not isinstance(call, dict):
        raise FormatError(field, "must be an object")
    function = call.get("function")
    if not isinstance(function, dict):
        raise FormatError(f"{field}.function", "is missing")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{field}.function.name", "is missing")
    return {
        "id": str(call.get("id") or fallback_id),
        "type": "function",
        "function": {"name": name, "arguments": arguments_text(function.get("arguments"))},
    }


def openai_messages_to_canonical(raw_messages, field: str = "messages") -> list[dict]:
    if not isinstance(raw_messages, list):
        raise FormatError(field, "must be a list of messages")
    if not raw_messages:
        raise FormatError(field, "is empty")
    messages = []
    for i, raw in enumerate(raw_messages):
        where = f"{field}[{i}]"
        if not isinstance(raw, dict):
            raise FormatError(where, "must be an object")
        role = raw.get("role")
        if role not in ROLES:
            raise FormatError(f"{where}.role", f"must be one of system, user, assistant, tool (got {role!r})")
        message = {"role": role, "content": content_text(raw.get("content"), f"{where}.content")}
        if role == "assistant" and raw.get("tool_calls"):
            if not isinstance(raw["tool_calls"], list):
                raise FormatError(f"{where}.tool_calls", "must be a list")
            message["tool_calls"] = [
                _call(call, f"{where}.tool_calls[{j}]", f"call_{i}_{j}") for j, call in enumerate(raw["tool_calls"])
            ]
        if role == "tool":
            call_id = raw.get("tool_call_id")
            if not call_id:
                raise FormatError(f"{where}.tool_call_id", "is missing")
            message["tool_call_id"] = str(call_id)
            if raw.get("name"):
                message["name"] = str(raw["name"])
        messages.append(message)
    return messages


def openai_record_to_canonical(record: dict) -> tuple[list[dict], list[dict]]:
    """(messages, tools) of one OpenAI chat record."""
    if not isinstance(record, dict):
        raise FormatError("", "a record must be a JSON object")
    if "messages" not in record:
        raise FormatError("messages", "is missing")
    return openai_messages_to_canonical(record["messages"]), tools_list(record.get("tools"))


def canonical_to_openai(messages: list[dict], tools: list[dict]) -> dict:
    """An OpenAI chat fine-tuning record; arguments are JSON strings, tool messages keep tool_call_id."""
    out = []
    for message in messages:
        item = {"role": message["role"], "content": message.get("content") or ""}
        if message.get("tool_calls"):
            item["tool_calls"] = [
                {
                    "id": call.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": arguments_text(call["function"].get("arguments")),
                    },
                }
                for call in message["tool_calls"]
            ]
        if message["role"] == "tool":
            item["tool_call_id"] = message.get("tool_call_id", "")
        out.append(item)
    return {"messages": out, "tools": tools_list(tools)}
