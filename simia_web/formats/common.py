"""Small helpers shared by the converters."""

import json
from typing import Any

from simia_web.core.json_input import json_parse

from .errors import FormatError


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the JSON string the canonical format keeps (strings pass unchanged)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def arguments_value(arguments: Any) -> Any:
    """Tool-call arguments as an object when they parse; otherwise the raw text is kept."""
    if isinstance(arguments, str):
        try:
            return json_parse(arguments or "{}")
        except ValueError:
            return arguments
    return arguments if arguments is not None else {}


def tools_list(value: Any, field: str = "tools") -> list[dict]:
    """A tools list from a JSON string or a list; bare function specs are wrapped as OpenAI tools."""
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        try:
            value = json_parse(value)
        except ValueError as exc:
            raise FormatError(field, f"is not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise FormatError(field, "must be a list of tool definitions")
    tools = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise FormatError(f"{field}[{i}]", "must be an object")
        function = tool.get("function") if tool.get("type") == "function" or "function" in tool else tool
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise FormatError(f"{field}[{i}].name", "is missing")
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise FormatError(f"{field}[{i}].parameters", "must be a JSON Schema object")
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": function.get("description") or "",
                    "parameters": parameters,
                },
            }
        )
    return tools


def content_text(value: Any, field: str) -> str:
    """Message content as text: strings as they are, OpenAI content parts joined, null as empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(part.get("text", "") for part in value if isinstance(part, dict))
    raise FormatError(field, "must be a string")
