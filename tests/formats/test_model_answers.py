"""What a model writes: JSON answers wrapped in prose or fences, and tool calls written as JSON in the prompt's
format for endpoints without native tools, read through the JSON gate."""

import json

import pytest

from simia_web.core.json_input import JsonRefused
from simia_web.formats.answers import parse_json_answer
from simia_web.formats.prompt_tools import prompt_tools_history, prompt_tools_instruction, prompt_tools_message

TOOLS = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('<think>the user wants {a}</think>\n{"a": 1}', {"a": 1}),
        ('Sure! {"a": {"b": 2}} Hope this helps.', {"a": {"b": 2}}),
        ('{"a": "two\nlines\tand a tab"}', {"a": "two\nlines\tand a tab"}),  # raw control characters
    ],
)
def test_parse_json_answer_tolerates_wrapping(text, expected):
    assert parse_json_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "   ", "no json here", "{broken", "<think>{}</think>"])
def test_parse_json_answer_rejects_non_json(text):
    with pytest.raises(ValueError):
        parse_json_answer(text)


def test_the_instruction_describes_the_tools_compactly_and_the_answers_shape():
    instruction = prompt_tools_instruction(TOOLS)
    assert json.dumps(TOOLS, separators=(",", ":")) in instruction
    assert '{"content": <text or null>, "tool_calls": [{"name": <tool name>, "arguments": <object>}]}' in instruction


def test_the_history_writes_calls_and_results_as_text_turns():
    history = [
        {"role": "user", "content": "Where is order 7?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": "7"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    ]
    user, call, result = prompt_tools_history(history)
    assert user == history[0]
    assert call == {
        "role": "assistant",
        "content": '{"content":"","tool_calls":[{"name":"get_order","arguments":{"id":"7"}}]}',
    }
    assert result == {"role": "user", "content": '[tool result call_1] {"status": "shipped"}'}


@pytest.mark.parametrize("arguments", [{"order_id": "9"}, '{"order_id": "9"}'])
def test_an_answer_becomes_the_canonical_message_with_the_conversations_call_ids(arguments):
    text = json.dumps({"content": None, "tool_calls": [{"name": "get_order", "arguments": arguments}]})
    message = prompt_tools_message(f"```json\n{text}\n```", 4)
    assert message == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_4_0", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "9"}'}}
        ],
    }
    assert prompt_tools_message('{"content": "It shipped.", "tool_calls": []}', 4) == {
        "role": "assistant",
        "content": "It shipped.",
    }


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("I would call get_order now.", "invalid JSON"),
        (["not", "an", "object"], "the answer is not a JSON object"),
        ({"content": {"nested": True}}, "content must be text or null"),
        ({"tool_calls": {"name": "get_order"}}, "tool_calls must be a list"),
        ({"tool_calls": [{"arguments": {}}]}, "every tool call needs a name"),
        ({"tool_calls": [{"name": "get_order", "arguments": [1, 2]}]}, "arguments of get_order must be an object"),
        ({"tool_calls": [{"name": "get_order", "arguments": "{not json"}]}, "arguments of get_order: invalid JSON"),
        ({"tool_calls": [{"name": "get_order", "arguments": "[1, 2]"}]}, "arguments of get_order must be an object"),
    ],
)
def test_a_malformed_answer_is_refused_saying_why(answer, reason):
    text = answer if isinstance(answer, str) else json.dumps(answer)
    with pytest.raises(ValueError, match=reason):
        prompt_tools_message(text, 1)


@pytest.mark.parametrize(
    "arguments, limit",
    [
        ('{"n": 123456789012345678901234567890}', "does not fit in 64 bits"),
        ('{"n": NaN}', "NaN is not a JSON number"),
        ("[" * 100 + "]" * 100, "nested deeper than"),
    ],
)
def test_arguments_given_as_text_pass_the_json_gate(arguments, limit):
    text = json.dumps({"content": None, "tool_calls": [{"name": "get_order", "arguments": arguments}]})
    with pytest.raises(JsonRefused, match=limit) as refused:
        prompt_tools_message(text, 1)
    assert refused.value.where == "arguments of get_order"
