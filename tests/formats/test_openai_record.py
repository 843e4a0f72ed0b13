"""The OpenAI record made from what the strict normaliser returned is the record canonical_to_openai builds from it."""

import orjson
import pytest

from simia_web.formats.conversation import messages_strict, tools_list
from simia_web.formats.openai import canonical_to_openai, strict_to_openai

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}},
    {"name": "bare_spec", "description": "a function without its wrapper"},
]


@pytest.mark.parametrize(
    "messages,tools",
    [
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], TOOLS),
        (
            [
                {"role": "system", "content": None},
                {"role": "user", "content": [{"type": "text", "text": "héllo "}, {"type": "text", "text": "🙂"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"function": {"name": "get_order", "arguments": {"id": 1}}},
                        {"id": "c2", "type": "function", "function": {"name": "bare_spec", "arguments": ""}},
                    ],
                },
                {"role": "tool", "tool_call_id": "call_2_0", "name": "get_order", "content": "{}"},
                {"role": "tool", "tool_call_id": "c2", "content": "done"},
                {"role": "assistant", "content": "ok", "tool_calls": []},
            ],
            [],
        ),
        ([{"role": "assistant", "content": "", "tool_calls": None}], None),
    ],
    ids=["plain", "calls-results-and-parts", "no-tools"],
)
def test_strict_to_openai_is_canonical_to_openai_of_the_strict_conversation(messages, tools):
    strict = messages_strict(messages), tools_list(tools)
    record = strict_to_openai(*strict)
    expected = canonical_to_openai(*strict)
    assert orjson.dumps(record) == orjson.dumps(expected)  # the same keys in the same order: the same bytes
    assert all("name" not in message for message in record["messages"])
    assert [m.get("name") for m in strict[0]] == [m.get("name") for m in messages_strict(messages)]  # left as they were
