"""Helpers over the canonical trajectory format (OpenAI chat messages plus the tools list)."""

from typing import Any

from simia_web.core.json_input import json_parse


def tool_schemas(tools: list[dict]) -> dict[str, dict]:
    """{tool name: parameters schema} from an OpenAI tools list."""
    schemas = {}
    for tool in tools or []:
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(function, dict) and function.get("name"):
            schemas[function["name"]] = function.get("parameters") or {"type": "object", "properties": {}}
    return schemas


def parse_arguments(call: dict) -> tuple[Any, str | None]:
    """The call's arguments as an object, or an error when they are not a JSON object."""
    raw = (call.get("function") or {}).get("arguments", "{}")
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json_parse(raw or "{}")
    except (TypeError, ValueError) as exc:
        return None, f"arguments are not JSON: {exc}"
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def conversation_text(messages: list[dict]) -> str:
    """Plain text of the user and assistant turns, for near-duplicate detection and search."""
    return "\n".join(message_text(m) for m in messages if m.get("role") in {"user", "assistant"})
