"""The canonical conversation: OpenAI chat messages (`system`, `user`, `assistant` with `tool_calls`
whose `arguments` is a JSON string, `tool` with `tool_call_id`) plus the tools list.

This module owns its shape: the constructors, the one tool-call id scheme, the read helpers every
other module uses, and the two normalisers: `messages_strict` for input people give us (it raises a
FormatError naming the field) and `messages_lenient` for what an LLM wrote (it keeps what it can and
returns the violations). Pure functions over dicts: no database.

The strict normaliser is compiled for the shape it returns: input already in the canonical shape (every record an
export reads, since every writer stores that shape) is checked and copied by msgspec Structs in C, in one call
(`messages_strict`, `tools_list`). Only input that is not canonical (content parts, calls without ids, bare
function specs, a refused field) is walked by the Python normaliser (`messages_normalised`, `tools_normalised`),
which makes the canonical shape or names the field it refuses; so the verdict, the reason and the result are the
normaliser's, whichever path took the input (tests/formats/test_gate_differential.py holds this).
"""

import json
import re
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from simia_web.core.json_input import JsonLimits, json_parse

from .errors import FormatError

ROLES = {"system", "user", "assistant", "tool"}


@dataclass(frozen=True)
class Violation:
    """A finding about a conversation: a stable code, the message index it concerns and a detail."""

    code: str
    message_index: int | None
    detail: str
    fixed: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


# -- construction -----------------------------------------------------------------------------------


def tool_call_id(message_index: int | str, position: int | str) -> str:
    """The id of a call that came without one: its message's place in the conversation and its own."""
    return f"call_{message_index}_{position}"


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the JSON string the canonical format keeps (strings pass unchanged)."""
    if isinstance(arguments, str):
        return arguments or "{}"
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def tool_call(call_id: str, name: str, arguments: Any) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments_text(arguments)}}


def tool_result(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# -- reading ----------------------------------------------------------------------------------------


def _parts_text(parts: list) -> str:
    """OpenAI content parts joined as text."""
    return "".join(part.get("text", "") for part in parts if isinstance(part, dict))


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return _parts_text(content)
    return content or ""


def conversation_text(messages: list[dict]) -> str:
    """Plain text of the user and assistant turns, for near-duplicate detection and search."""
    return "\n".join(message_text(m) for m in messages if m.get("role") in {"user", "assistant"})


def tool_schemas(tools: list[dict]) -> dict[str, dict]:
    """{tool name: parameters schema} from an OpenAI tools list."""
    schemas = {}
    for tool in tools or []:
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(function, dict) and function.get("name"):
            schemas[function["name"]] = function.get("parameters") or {"type": "object", "properties": {}}
    return schemas


class ConversationMeasure(NamedTuple):
    """What a dataset card counts of one conversation: its user and assistant turns, the names of the tools it
    calls (in order, once per call) and the parts of its text (every message's content and every call's name and
    arguments, in order; not the tools list nor a chat template's markup, which depend on the model trained)."""

    turns: int
    call_names: list[str]
    text_parts: list[str]


def conversation_measure(messages: list[dict]) -> ConversationMeasure:
    """The measure of canonical messages (as the strict normaliser returns them)."""
    names, parts, turns = [], [], 0
    for message in messages:
        parts.append(message["content"])
        if message["role"] in ("user", "assistant"):
            turns += 1
        for call in message.get("tool_calls") or ():
            function = call["function"]
            names.append(function["name"])
            parts += (function["name"], function["arguments"])
    return ConversationMeasure(turns, names, parts)


# ASCII digits only: JSON spells numbers in no others (and this form is searched three times faster).
_NUMBER_AT_RISK = re.compile(r"[0-9](?:[eE]|[0-9]{18})")


def arguments_object(text: str) -> bool:
    """True when `text` is certainly a JSON object that json_parse accepts within the limits (decoded by msgspec,
    with every limit bounded from above by counting brackets and commas); False when that is not certain, and
    parse_arguments must say. A text with an escape (json_parse refuses `\u0000`), a number of 19 digits (an
    integer past 64 bits) or an exponent (a number out of range) goes the long way."""
    if "\\" in text or _NUMBER_AT_RISK.search(text):
        return False
    limits = JsonLimits.from_settings()
    size = len(text)
    if size > limits.length_within:
        if size * 4 > limits.max_bytes or size > limits.max_string:
            return False
        brackets = text.count("{") + text.count("[")
        commas = text.count(",") + 1
        if brackets > limits.max_depth or commas > min(limits.max_items, limits.max_keys, limits.max_values - brackets):
            return False
    try:
        return isinstance(msgspec.json.decode(text), dict)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return False


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


def arguments_value(arguments: Any) -> Any:
    """Tool-call arguments as an object when they parse; otherwise the raw text is kept."""
    if isinstance(arguments, str):
        try:
            return json_parse(arguments or "{}")
        except ValueError:
            return arguments
    return arguments if arguments is not None else {}


# -- the strict normaliser (input) -------------------------------------------------------------------

# The canonical shape as the normaliser returns it, field for field and in its key order: input that converts to
# these Structs is returned as msgspec.to_builtins gives it back, which is what the normaliser would have built.
# The messages' Structs are left out of the cyclic collector (gc=False): they form trees, never cycles, and an
# export makes millions of them.
NonEmpty = Annotated[str, Meta(min_length=1)]


class _CallFunction(Struct, gc=False, forbid_unknown_fields=True):
    name: NonEmpty
    arguments: NonEmpty


class _Call(Struct, gc=False, forbid_unknown_fields=True):
    id: NonEmpty
    type: Literal["function"]
    function: _CallFunction


class _System(Struct, gc=False, tag_field="role", tag="system", forbid_unknown_fields=True):
    content: str


class UserMessage(Struct, gc=False, tag_field="role", tag="user", forbid_unknown_fields=True):
    content: str


class AssistantMessage(Struct, gc=False, tag_field="role", tag="assistant", forbid_unknown_fields=True):
    content: str
    tool_calls: Annotated[list[_Call], Meta(min_length=1)] | UnsetType = UNSET


class ToolResultMessage(Struct, gc=False, tag_field="role", tag="tool", forbid_unknown_fields=True):
    content: str
    tool_call_id: NonEmpty
    name: NonEmpty | UnsetType = UNSET


class _ToolFunction(Struct, forbid_unknown_fields=True):
    name: NonEmpty
    description: str
    parameters: dict[str, Any]


class _Tool(Struct, forbid_unknown_fields=True):
    type: Literal["function"]
    function: _ToolFunction


Message = _System | UserMessage | AssistantMessage | ToolResultMessage


# Each shape is a Struct's field: msgspec compiles a Struct's field types once, a bare list or union at every call.
class CanonicalMessages(Struct):
    messages: Annotated[list[Message], Meta(min_length=1)]


class CanonicalTools(Struct):
    tools: list[_Tool]


class CanonicalConversation(Struct):
    messages: Annotated[list[Message], Meta(min_length=1)]
    tools: list[_Tool]


def canonical_conversation(messages: Any, tools: Any) -> CanonicalConversation | None:
    """The conversation as Structs when both parts are already in the canonical shape, else None."""
    try:
        return msgspec.convert({"messages": messages, "tools": tools}, CanonicalConversation)
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError):  # a lone surrogate: UnicodeError
        return None


def _canonical(value: Any, shape: type[CanonicalMessages] | type[CanonicalTools], name: str) -> list[dict] | None:
    """`value` checked against and copied from the canonical shape, or None when it is not in it."""
    try:
        checked: list[dict] = msgspec.to_builtins(getattr(msgspec.convert({name: value}, shape), name))
        return checked
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError):  # a lone surrogate: UnicodeError
        return None


def tools_canonical(value: Any) -> list[dict] | None:
    """The tools list checked against and copied from the canonical shape, or None when it is not in it."""
    return _canonical(value, CanonicalTools, "tools")


def tools_list(value: Any, field: str = "tools") -> list[dict]:
    """A tools list from a JSON string or a list; bare function specs are wrapped as OpenAI tools."""
    canonical = tools_canonical(value)
    return tools_normalised(value, field) if canonical is None else canonical


def tools_normalised(value: Any, field: str = "tools") -> list[dict]:
    """tools_list walked in Python: any shape it takes, and the field it refuses."""
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
        if not all(isinstance(part, dict) for part in value):
            raise FormatError(field, 'parts must be objects like {"type": "text", "text": ...}')
        return _parts_text(value)
    raise FormatError(field, "must be a string, a list of content parts or null")


def _call_strict(call: object, field: str, fallback_id: str) -> dict:
    if not isinstance(call, dict):
        raise FormatError(field, 'must be an object {"id", "function": {"name", "arguments"}}')
    function = call.get("function")
    if not isinstance(function, dict):
        raise FormatError(f"{field}.function", 'must be an object {"name", "arguments"}')
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{field}.function.name", "is missing")
    return tool_call(str(call.get("id") or fallback_id), name, function.get("arguments"))


def message_strict(raw: object, where: str, index: int) -> dict:
    """One canonical message from input at position `index`; FormatError names the field that is wrong."""
    if not isinstance(raw, dict):
        raise FormatError(where, "must be an object")
    role = raw.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise FormatError(f"{where}.role", f"must be one of system, user, assistant, tool (got {role!r})")
    message: dict[str, Any] = {"role": role, "content": content_text(raw.get("content"), f"{where}.content")}
    if role == "assistant" and raw.get("tool_calls") is not None:
        if not isinstance(raw["tool_calls"], list):
            raise FormatError(f"{where}.tool_calls", "must be a list")
        calls = [
            _call_strict(call, f"{where}.tool_calls[{j}]", tool_call_id(index, j))
            for j, call in enumerate(raw["tool_calls"])
        ]
        if calls:
            message["tool_calls"] = calls
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not call_id:
            raise FormatError(f"{where}.tool_call_id", "is missing")
        message["tool_call_id"] = str(call_id)
        if raw.get("name"):
            message["name"] = str(raw["name"])
    return message


def messages_strict(raw_messages: object, field: str = "messages") -> list[dict]:
    """Canonical messages from input, or a FormatError naming the field (`messages[3].tool_calls[0].function`)."""
    canonical = _canonical(raw_messages, CanonicalMessages, "messages")
    return messages_normalised(raw_messages, field) if canonical is None else canonical


def messages_normalised(raw_messages: object, field: str = "messages") -> list[dict]:
    """messages_strict walked in Python: any shape it takes, and the field it refuses."""
    if not isinstance(raw_messages, list):
        raise FormatError(field, "must be a list of messages")
    if not raw_messages:
        raise FormatError(field, "is empty")
    return [message_strict(raw, f"{field}[{i}]", i) for i, raw in enumerate(raw_messages)]


# -- the lenient normaliser (LLM output) -------------------------------------------------------------


def _call_lenient(call: Any, fallback_id: str) -> dict:
    """A call whatever its shape: nested `function` or flat {name, arguments}; arguments that are not
    JSON stay text so the rules can name them."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = _arguments_lenient(function.get("arguments"))
    return tool_call(str(call.get("id") or fallback_id), str(function.get("name") or ""), arguments)


def _arguments_lenient(arguments: object) -> Any:
    """Arguments JSON whose strings hold raw newlines or tabs (small models write them unescaped) is
    written again with them escaped: the same value, now JSON. Other text is kept as it came."""
    if not isinstance(arguments, str):
        return arguments
    try:
        json_parse(arguments or "{}")
        return arguments
    except ValueError:
        pass
    try:
        return json_parse(arguments, strict=False)
    except ValueError:
        return arguments


def _content_lenient(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _parts_text(content)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)  # e.g. a tool result given as an object


def messages_lenient(raw_messages: object, start: int = 0) -> tuple[list[dict], list[Violation]]:
    """Canonical messages from an LLM answer that begins at message `start` of its conversation, and the
    violations: anything that cannot be a message is dropped and named, mistakes inside one are kept."""
    if not isinstance(raw_messages, list):
        return [], [Violation("malformed_output", None, f"messages is a {type(raw_messages).__name__}, not a list")]
    messages, found = [], []
    for offset, raw in enumerate(raw_messages):
        index = start + offset
        if not isinstance(raw, dict):
            found.append(Violation("malformed_output", index, f"message {index} is not an object; dropped"))
            continue
        message = {
            "role": raw.get("role") if isinstance(raw.get("role"), str) else "",
            "content": _content_lenient(raw.get("content")),
        }
        calls = raw.get("tool_calls")
        if calls:
            message["tool_calls"] = [
                _call_lenient(call, tool_call_id(index, j))
                for j, call in enumerate(calls if isinstance(calls, list) else [calls])
            ]
        if message["role"] == "tool":
            message["tool_call_id"] = str(raw.get("tool_call_id") or "")
        messages.append(message)
    return messages, found
