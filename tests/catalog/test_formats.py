"""Converters between ShareGPT / OpenAI chat records and the canonical format."""

import json

import pytest

from simia_web.formats import FormatError
from simia_web.formats.openai import canonical_to_openai, openai_record_to_canonical
from simia_web.formats.sharegpt import canonical_to_sharegpt, sharegpt_problems, sharegpt_record_to_canonical

TOOLS = [
    {
        "name": "get_order",
        "description": "Look up an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    }
]

SHAREGPT = {
    "conversations": [
        {"from": "human", "value": "Where is order W1?"},
        {"from": "function_call", "value": json.dumps({"name": "get_order", "arguments": {"order_id": "W1"}})},
        {"from": "observation", "value": '{"status": "shipped"}'},
        {"from": "gpt", "value": "Order W1 has shipped."},
        {"from": "human", "value": "And W2 and W3?"},
        {
            "from": "function_call",
            "value": json.dumps(
                [
                    {"name": "get_order", "arguments": {"order_id": "W2"}},
                    {"name": "get_order", "arguments": {"order_id": "W3"}},
                ]
            ),
        },
        {"from": "observation", "value": json.dumps(['{"status": "pending"}', '{"status": "cancelled"}'])},
        {"from": "gpt", "value": "W2 is pending and W3 was cancelled."},
    ],
    "system": "You are a retail agent.",
    "tools": json.dumps(TOOLS),
}

OPENAI = {
    "messages": [
        {"role": "system", "content": "You are a retail agent."},
        {"role": "user", "content": "Where is order W1?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W1"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Order W1 has shipped."},
    ],
    "tools": [{"type": "function", "function": TOOLS[0]}],
}


def test_sharegpt_to_canonical():
    messages, tools = sharegpt_record_to_canonical(SHAREGPT)
    assert [m["role"] for m in messages] == [
        "system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool", "assistant"
    ]  # fmt: skip
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "W1"}
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]
    parallel = messages[6]["tool_calls"]
    assert [m["tool_call_id"] for m in messages[7:9]] == [c["id"] for c in parallel]
    assert messages[8]["content"] == '{"status": "cancelled"}'
    assert tools[0]["function"]["name"] == "get_order" and tools[0]["type"] == "function"


def test_sharegpt_round_trip_keeps_content():
    messages, tools = sharegpt_record_to_canonical(SHAREGPT)
    back = canonical_to_sharegpt(messages, tools)
    assert back["system"] == SHAREGPT["system"]
    assert [t["from"] for t in back["conversations"]] == [t["from"] for t in SHAREGPT["conversations"]]
    for mine, theirs in zip(back["conversations"], SHAREGPT["conversations"], strict=True):
        if mine["from"] in {"function_call", "observation"}:
            assert json.loads(mine["value"]) == json.loads(theirs["value"])
        else:
            assert mine["value"] == theirs["value"]
    assert json.loads(back["tools"])[0]["function"] == TOOLS[0]
    assert sharegpt_problems(back) == []
    # And once more through the canonical form: identical.
    assert sharegpt_record_to_canonical(back) == (messages, tools)


def test_openai_round_trip_keeps_content():
    messages, tools = openai_record_to_canonical(OPENAI)
    assert canonical_to_openai(messages, tools) == OPENAI


def test_openai_object_arguments_become_strings():
    record = json.loads(json.dumps(OPENAI))
    record["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"order_id": "W1"}
    messages, _ = openai_record_to_canonical(record)
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "W1"}


def test_canonical_text_beside_calls_survives_sharegpt():
    messages, tools = openai_record_to_canonical(OPENAI)
    record = canonical_to_sharegpt(messages, tools)
    again, _ = sharegpt_record_to_canonical(record)
    assert again[2]["content"] == "Let me check."


def test_sharegpt_problems_follow_llama_factory_rules():
    assert sharegpt_problems({"conversations": [{"from": "gpt", "value": "hi"}]})
    assert sharegpt_problems({"conversations": [{"from": "human", "value": "hi"}]})  # odd count
    bad_order = {"conversations": [{"from": "human", "value": "a"}, {"from": "human", "value": "b"}]}
    assert "conversations[1]" in sharegpt_problems(bad_order)[0]
    ok = {
        "conversations": [
            {"from": "system", "value": "s"},
            {"from": "human", "value": "a"},
            {"from": "gpt", "value": "b"},
        ]
    }
    assert sharegpt_problems(ok) == []


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({}, "conversations"),
        ({"conversations": [{"value": "x"}]}, "conversations[0].from"),
        ({"conversations": [{"from": "human"}]}, "conversations[0].value"),
        (
            {"conversations": [{"from": "human", "value": "a"}, {"from": "function_call", "value": "{"}]},
            "conversations[1].value",
        ),
        ({"conversations": [{"from": "human", "value": "a"}], "tools": "[oops"}, "tools"),
        ({"conversations": [{"from": "observation", "value": "a"}]}, "conversations[0].from"),
    ],
)
def test_sharegpt_malformed_names_the_field(record, field):
    with pytest.raises(FormatError) as caught:
        sharegpt_record_to_canonical(record)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]},
            "messages[0].tool_calls[0].function.name",
        ),
    ],
)
def test_openai_malformed_names_the_field(record, field):
    with pytest.raises(FormatError) as caught:
        openai_record_to_canonical(record)
    assert caught.value.field == field
