"""The conversation's two normalisers: strict for input (raises naming the field), lenient for LLM output
(keeps what it can, returns the violations), and the one id scheme both use for calls that come without one."""

import json

import pytest

from simia_web.formats import FormatError
from simia_web.formats.conversation import message_strict, messages_lenient, messages_strict, tool_call_id
from simia_web.formats.rules import amplified_check, assistant_turns_merge

CALL = {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W1"}'}}
GOOD = [
    {"role": "system", "content": "You are a shop agent."},
    {"role": "user", "content": [{"type": "text", "text": "Where is "}, {"type": "text", "text": "W1?"}]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}', "name": "get_order"},
    {"role": "assistant", "content": "It has shipped."},
]


def test_strict_gives_canonical_messages():
    messages = messages_strict(GOOD)
    assert messages[1] == {"role": "user", "content": "Where is W1?"}
    assert messages[2] == {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert messages[3] == {**GOOD[3], "content": '{"status": "shipped"}'}


def test_strict_fills_missing_ids_and_serialises_arguments():
    raw = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}] * 2}]
    calls = messages_strict(raw)[1]["tool_calls"]
    assert [c["id"] for c in calls] == [tool_call_id(1, 0), tool_call_id(1, 1)] == ["call_1_0", "call_1_1"]
    assert calls[0]["function"] == {"name": "f", "arguments": "{}"}
    raw_call = {"function": {"name": "f", "arguments": {"x": "é"}}}
    (call,) = message_strict({"role": "assistant", "tool_calls": [raw_call]}, "m", 7)["tool_calls"]
    assert call == {"id": "call_7_0", "type": "function", "function": {"name": "f", "arguments": '{"x": "é"}'}}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"role": "assistant", "content": 42}, "messages[3].content"),
        ({"role": "assistant", "content": ["text"]}, "messages[3].content"),
        ({"role": "robot", "content": "hi"}, "messages[3].role"),
        ({"role": "assistant", "tool_calls": {"name": "f"}}, "messages[3].tool_calls"),
        ({"role": "assistant", "tool_calls": [CALL, 7]}, "messages[3].tool_calls[1]"),
        ({"role": "assistant", "tool_calls": [{"function": "f"}]}, "messages[3].tool_calls[0].function"),
        ({"role": "assistant", "tool_calls": [{"function": {}}]}, "messages[3].tool_calls[0].function.name"),
        ({"role": "tool", "content": "{}"}, "messages[3].tool_call_id"),
        ("hello", "messages[3]"),
    ],
)
def test_strict_raises_naming_the_field(raw, field):
    with pytest.raises(FormatError) as error:
        messages_strict([*GOOD[:3], raw])
    assert error.value.field == field and str(error.value).startswith(f"{field}: ")


@pytest.mark.parametrize(("raw", "message"), [({"role": "user"}, "must be a list of messages"), ([], "is empty")])
def test_strict_refuses_what_is_not_a_conversation(raw, message):
    with pytest.raises(FormatError, match=message):
        messages_strict(raw, field="record.messages")


def test_lenient_keeps_what_it_can_and_returns_violations():
    raw = [
        {"role": "user", "content": "Where is W1?"},
        "not a message",
        {"role": "assistant", "content": None, "tool_calls": {"name": "get_order", "arguments": {"order_id": "W1"}}},
        {"role": "tool", "content": {"status": "shipped"}},
        {"role": "assistant", "tool_calls": [{"id": "k", "function": {"name": "f", "arguments": "{not json"}}, 3]},
    ]
    messages, violations = messages_lenient(raw, start=10)
    assert [(v.code, v.message_index) for v in violations] == [("malformed_output", 11)]
    assert len(messages) == 4
    assert messages[1]["content"] == "" and messages[1]["tool_calls"] == [
        {"id": "call_12_0", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W1"}'}}
    ]
    assert messages[2] == {"role": "tool", "content": json.dumps({"status": "shipped"}), "tool_call_id": ""}
    kept, empty = messages[3]["tool_calls"]
    assert kept["id"] == "k" and kept["function"]["arguments"] == "{not json"  # left for the rules to name
    assert empty == {"id": "call_14_1", "type": "function", "function": {"name": "", "arguments": "{}"}}


def test_lenient_escapes_raw_control_characters_in_arguments_and_keeps_other_text():
    def call(arguments):
        return {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": arguments}}]}

    (raw_newline, garbage), _ = messages_lenient([call('{"note": "line one\nline\ttwo"}'), call("{not json")])
    arguments = raw_newline["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"note": "line one\nline\ttwo"}  # SmolLM2 wrote them unescaped
    assert garbage["tool_calls"][0]["function"]["arguments"] == "{not json"  # left for the rules to name


def test_lenient_answer_that_is_not_a_list():
    messages, violations = messages_lenient({"role": "user"})
    assert messages == [] and [(v.code, v.message_index, v.detail) for v in violations] == [
        ("malformed_output", None, "messages is a dict, not a list")
    ]


def test_assistant_turns_merge_records_each_merge_at_its_final_index():
    text = {"role": "assistant", "content": "Let me look."}
    calls = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "{}"}
    messages = [{"role": "user", "content": "hi"}, text, calls, result, text, {"role": "assistant", "content": "Done."}]
    merged, fixes = assistant_turns_merge(messages)
    assert [m["role"] for m in merged] == ["user", "assistant", "tool", "assistant"]
    assert merged[1] == {**calls, "content": "Let me look."} and merged[3]["content"] == "Let me look.\n\nDone."
    assert [(f.message_index, f.fixed) for f in fixes] == [(1, True), (3, True)]
    assert messages[4] == text  # the input is not changed


def test_amplified_check_leaves_bad_calls_to_the_rules():
    tools = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}]
    raw = [
        {"role": "user", "content": "Where is W1?"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "get_order", "arguments": "{x"}}, {"name": "nope"}]},
        {"role": "tool", "tool_call_id": "call_1_0", "content": "{}"},
        {"role": "tool", "tool_call_id": "call_1_1", "content": "{}"},
        {"role": "assistant", "content": "Shipped."},
    ]
    messages, found = amplified_check(raw, tools, seed_label="seed 1", seed_messages=[])
    assert len(messages) == 5
    assert {(v.code, v.message_index) for v in found} == {("arguments_not_json", 1), ("unknown_tool", 1)}
