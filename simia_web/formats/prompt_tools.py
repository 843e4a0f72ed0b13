"""Tool calling for endpoints that take no `tools`: the tools are described in the system prompt, the
history's calls and results are written as plain text turns, and the answer is a JSON object
`{"content": <text or null>, "tool_calls": [{"name", "arguments"}]}` read back into a canonical message.
"""

from typing import Any

from simia_web.core.json_input import json_parse
from simia_web.core.jsonutil import compact_json

from .answers import parse_json_answer
from .conversation import arguments_value, messages_lenient


def prompt_tools_instruction(tools: list[dict]) -> str:
    """The system prompt's addition that describes the tools and the answer's shape."""
    return (
        "You can call these tools:\n"
        + compact_json(tools)
        + '\nAnswer with only a JSON object: {"content": <text or null>, "tool_calls": '
        '[{"name": <tool name>, "arguments": <object>}]}. Use an empty tool_calls list to reply to the user.'
    )


def prompt_tools_schema(tools: list[dict]) -> dict:
    """The answer's shape as a JSON Schema, for endpoints that hold an answer to one (a grammar): some text, and
    calls of the offered tools, their arguments an object."""
    names = [tool["function"]["name"] for tool in tools]
    call = {
        "type": "object",
        "properties": {"name": {"type": "string", "enum": names}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
    }
    return {
        "type": "object",
        # Text is asked for with the calls too: an answer of neither (valid JSON all the same) is no answer.
        "properties": {"content": {"type": "string", "minLength": 1}, "tool_calls": {"type": "array", "items": call}},
        "required": ["content", "tool_calls"],
    }


def prompt_tools_history(messages: list[dict]) -> list[dict]:
    """The conversation as such an endpoint takes it: tool calls and results become plain text turns."""
    return [_flattened(message) for message in messages]


def _flattened(message: dict) -> dict:
    if message.get("role") == "tool":
        return {
            "role": "user",
            "content": f"[tool result {message.get('tool_call_id', '')}] {message.get('content', '')}",
        }
    if message.get("role") == "assistant" and message.get("tool_calls"):
        calls = [
            {"name": c["function"]["name"], "arguments": arguments_value(c["function"]["arguments"])}
            for c in message["tool_calls"]
        ]
        return {"role": "assistant", "content": compact_json({"content": message.get("content"), "tool_calls": calls})}
    return message


def prompt_tools_message(text: str | None, index: int) -> dict:
    """The canonical assistant message (message `index` of its conversation) for an answer's text, or a
    ValueError saying what is wrong with it."""
    answer: Any = parse_json_answer(text)
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    content, calls = answer.get("content"), answer.get("tool_calls") or []
    if content is not None and not isinstance(content, str):
        raise ValueError("content must be text or null")
    if not isinstance(calls, list):
        raise ValueError("tool_calls must be a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise ValueError("every tool call needs a name")
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            arguments = json_parse(arguments or "{}", where=f"arguments of {call['name']}")
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments of {call['name']} must be an object")
    [message], _ = messages_lenient([{"role": "assistant", "content": content, "tool_calls": calls}], index)
    return message
