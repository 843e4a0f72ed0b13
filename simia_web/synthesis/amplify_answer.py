"""What an amplification call asks for, and how its answer becomes a conversation.

The request asks for turns (a user message, the tool calls made for it each with its result, the agent's
answer) rather than for chat messages: a conversation written as turns has its roles in order and every
call paired with its result, and with each call's arguments held to its tool's parameters, a server that
enforces the schema (llama.cpp) keeps even a small model to a well-formed conversation. Sizes are bounded so
that the longest answer fits the stage's 2,048 tokens. An answer in OpenAI messages, the seed's own format,
is read as well.
"""

from typing import Any

from simia_web.core.jsonutil import compact_json
from simia_web.formats.conversation import message_text, tool_call, tool_call_id, tool_result

MAX_TURNS = 3
MAX_CALLS_PER_TURN = 4
_TEXT = {"type": "string", "minLength": 1, "maxLength": 300}


def amplified_schema(tools: list[dict]) -> dict:
    functions = [t.get("function") or {} for t in tools]
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f.get("name")},
                "arguments": f.get("parameters") or {"type": "object", "properties": {}},
                "result": {"type": "string", "minLength": 1, "maxLength": 240},
            },
            "required": ["name", "arguments", "result"],
            "additionalProperties": False,
        }
        for f in functions
        if f.get("name")
    ]
    turn: dict[str, Any] = {
        "type": "object",
        "properties": {
            "user": _TEXT,
            "calls": {"type": "array", "items": {"anyOf": calls}, "maxItems": MAX_CALLS_PER_TURN},
            "answer": _TEXT,
        },
        "required": ["user", "calls", "answer"],
        "additionalProperties": False,
    }
    if not calls:
        turn["properties"]["calls"]["maxItems"] = 0
        turn["properties"]["calls"]["items"] = {"type": "object"}
    return {
        "type": "object",
        "properties": {"turns": {"type": "array", "items": turn, "minItems": 1, "maxItems": MAX_TURNS}},
        "required": ["turns"],
        "additionalProperties": False,
    }


_TURNS_ANSWER = {
    "type": "object",
    "properties": {
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "user": {"type": "string"},
                    "answer": {"type": "string"},
                    "calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "arguments": {"type": ["string", "object"]}},
                            "required": ["name", "arguments"],
                        },
                    },
                },
                "required": ["user", "answer"],
            },
        }
    },
    "required": ["turns"],
}
# Loose on purpose: a malformed conversation must reach the rules (which name the mistake) rather than be
# refused by the schema and retried away.
_MESSAGES_ANSWER = {
    "type": "object",
    "properties": {
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"type": "string"},
                    "content": {"type": ["string", "null"]},
                    "tool_calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "type": {"type": "string"},
                                "function": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string"},
                                        "arguments": {"type": ["string", "object"]},
                                    },
                                    "required": ["name", "arguments"],
                                },
                            },
                            "required": ["id", "function"],
                        },
                    },
                    "tool_call_id": {"type": "string"},
                },
                "required": ["role"],
            },
        }
    },
    "required": ["messages"],
}
AMPLIFIED_ANSWER = {"anyOf": [_TURNS_ANSWER, _MESSAGES_ANSWER]}


def amplified_messages(answer: dict, seed_messages: list[dict]) -> list:
    """The answer as chat messages (not yet normalised): turns are unrolled after the seed's system message,
    each call its own assistant turn followed by its result; messages are taken as they are."""
    if "turns" not in answer:
        return answer["messages"]
    system = [m for m in seed_messages[:1] if m.get("role") == "system" and message_text(m).strip()]
    messages: list[dict] = [{"role": "system", "content": message_text(m)} for m in system]
    for turn in answer["turns"]:
        messages.append({"role": "user", "content": turn["user"]})
        for call in turn.get("calls") or []:
            call_id = tool_call_id(len(messages), 0)
            call_message = tool_call(call_id, call["name"], call["arguments"])
            messages.append({"role": "assistant", "content": "", "tool_calls": [call_message]})
            result = call.get("result", "")
            messages.append(tool_result(call_id, result if isinstance(result, str) else compact_json(result)))
        messages.append({"role": "assistant", "content": turn["answer"]})
    return messages
