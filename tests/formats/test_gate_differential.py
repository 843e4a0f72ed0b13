"""The compiled gate against the Python normaliser it replaced on the export path: for conversations valid and
hostile, both give the same verdict, the same reason and the same record; and the gate from a conversation's stored
JSON text decides exactly what the compiled gate decides on its parsed value, giving the same bytes.

The reference is the normaliser walked in Python (messages_normalised, tools_normalised), the record built by
strict_to_openai and openai_problems with every argument parsed by parse_arguments (the msgspec shortcut off)."""

import json
from unittest import mock

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simia_web.formats import FormatError
from simia_web.formats import openai as openai_format
from simia_web.formats.conversation import (
    canonical_conversation,
    conversation_measure,
    messages_normalised,
    messages_strict,
    tools_list,
    tools_normalised,
)
from simia_web.formats.openai import openai_problems, openai_record_from_text, openai_record_strict, strict_to_openai

SETTINGS = settings(
    max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "ok", "é😀", "\x00", "\ud800", " ", "call_0_0", "get_order"]
)
json_scalar = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=12,
)


def _deep(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


arguments_text = (
    st.sampled_from(
        [
            '{"order_id": "W1"}',
            "{}",
            "",
            "[]",
            "1",
            "null",
            "{bad",
            '{"a": NaN}',
            '{"a": 1,}',
            " {} ",
            "\u00a0{}",
            '{"a": "\\ud800"}',
            '{"a": 1e999}',
            '{"a": 123456789012345678901234}',
            '{"a":1}{"b":2}',
            _deep(63),
            _deep(64),
            _deep(65),
            "[" * 70 + "]" * 70,
            '{"k": "' + "x" * 200 + '"}',
        ]
    )
    | st.builds(lambda v: json.dumps(v), json_value)
    | text
)
names = st.sampled_from(["get_order", "cancel", "", "missing"])
call_ids = st.sampled_from(["call_1", "call_2", "", None, 7])


@st.composite
def calls(draw):
    call = {
        "id": draw(call_ids),
        "type": draw(st.sampled_from(["function", "function", "other"])),
        "function": {"name": draw(names), "arguments": draw(arguments_text | json_value)},
    }
    return _hostile(draw, call)


def _hostile(draw, value: dict):
    """Sometimes a key dropped, a key added or a value swapped for any JSON value."""
    mutation = draw(st.integers(0, 9))
    if mutation == 0 and value:
        value.pop(draw(st.sampled_from(sorted(value, key=str))))
    elif mutation == 1:
        value[draw(text)] = draw(json_value)
    elif mutation == 2 and value:
        value[draw(st.sampled_from(sorted(value, key=str)))] = draw(json_value)
    elif mutation == 3:
        return draw(json_value)
    return value


@st.composite
def messages(draw):
    role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool", "bot", None]))
    message = {
        "role": role,
        "content": draw(
            text | st.none() | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=2)
        ),
    }
    if role == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(st.lists(calls(), max_size=3))
    if role == "tool":
        message["tool_call_id"] = draw(call_ids)
        if draw(st.integers(0, 4)) == 0:
            message["name"] = draw(text | json_value)
    if draw(st.booleans()):  # the key order the database gives back
        message = dict(sorted(message.items(), key=lambda item: (len(str(item[0])), str(item[0]))))
    return _hostile(draw, message)


@st.composite
def tools(draw):
    tool = {
        "type": "function",
        "function": {
            "name": draw(names),
            "description": draw(text | st.none()),
            "parameters": draw(
                st.just({"type": "object", "properties": {"order_id": {"type": "string"}}}) | json_value
            ),
        },
    }
    if draw(st.booleans()):
        tool["function"] = dict(sorted(tool["function"].items(), key=lambda item: (len(item[0]), item[0])))
    return _hostile(draw, tool)


@st.composite
def valid_conversations(draw):
    """Canonical conversations the rules pass: what the compiled path decides on its own."""
    tool_names = ["get_order", "cancel"]
    out = [{"role": "system", "content": draw(text)}, {"role": "user", "content": draw(text)}]
    for i in range(draw(st.integers(0, 3))):
        ids = [f"call_{i}_{j}" for j in range(draw(st.integers(1, 2)))]
        arguments = [
            draw(st.builds(lambda v: json.dumps(v), st.dictionaries(text, json_value, max_size=3))) for _ in ids
        ]
        out.append(
            {
                "role": "assistant",
                "content": draw(text),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": draw(st.sampled_from(tool_names)), "arguments": a},
                    }
                    for call_id, a in zip(ids, arguments, strict=True)
                ],
            }
        )
        out += [{"role": "tool", "content": draw(text), "tool_call_id": call_id} for call_id in ids]
    out.append({"role": "assistant", "content": draw(text)})
    tool_list = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": draw(text),
                "parameters": draw(st.dictionaries(text, json_value, max_size=3)),
            },
        }
        for name in tool_names
    ]
    return out, tool_list


conversations = st.tuples(
    st.lists(messages(), max_size=6) | json_value,
    st.lists(tools(), max_size=3) | json_value | st.just('[{"name": "get_order"}]'),
)


def _outcome(call, *args):
    try:
        return "ok", call(*args)
    except FormatError as exc:
        return "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - a crash must be the same crash
        return type(exc).__name__, str(exc)


def _reference_gate(messages, tools):
    strict = messages_normalised(messages)
    record = strict_to_openai(strict, tools_normalised(tools))
    return record, strict, openai_problems(record)


def _compare(messages, tools):
    assert _outcome(messages_strict, messages) == _outcome(messages_normalised, messages)
    assert _outcome(tools_list, tools) == _outcome(tools_normalised, tools)
    compiled = _outcome(openai_record_strict, messages, tools)
    with mock.patch.object(openai_format, "arguments_object", lambda text: False):
        reference = _outcome(_reference_gate, messages, tools)
    assert compiled == reference
    if compiled[0] == "ok":  # the same bytes out, key order included
        assert [list(m) for m in compiled[1][0]["messages"]] == [list(m) for m in reference[1][0]["messages"]]
        assert repr(compiled[1][0]["tools"]) == repr(reference[1][0]["tools"])


@SETTINGS
@given(conversation=conversations)
def test_hostile_conversations_get_the_same_verdict_and_reason(conversation):
    _compare(*conversation)


@SETTINGS
@given(conversation=valid_conversations())
def test_valid_conversations_give_the_same_record(conversation):
    _compare(*conversation)


@SETTINGS
@given(text=arguments_text)
def test_arguments_shortcut_never_accepts_what_the_parser_refuses(text):
    if openai_format.arguments_object(text):
        assert openai_format.parse_arguments({"function": {"arguments": text}}) == (
            json.loads(text),
            None,
        )


def test_a_canonical_record_is_returned_in_the_normaliser_key_order():
    messages = [
        {"content": "hi", "role": "user"},
        {
            "content": "",
            "role": "assistant",
            "tool_calls": [{"function": {"arguments": "{}", "name": "get_order"}, "id": "c1", "type": "function"}],
        },
        {"content": "{}", "role": "tool", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done"},
    ]
    tool = {"type": "function", "function": {"parameters": {}, "name": "get_order", "description": ""}}
    record, strict, problems = openai_record_strict(messages, [tool])
    assert problems == []
    assert list(record["messages"][0]) == ["role", "content"]
    assert list(record["messages"][1]["tool_calls"][0]) == ["id", "type", "function"]
    assert list(record["tools"][0]["function"]) == ["name", "description", "parameters"]


# -- the gate from the stored text ------------------------------------------------------------------------------

# The texts a database gives back: PostgreSQL's jsonb spaced, SQLite's as Django wrote it, ASCII-escaped or not.
stored_texts = st.sampled_from(
    [
        lambda value: json.dumps(value),
        lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False),
    ]
)


def _decided_on_dicts(messages, tools) -> bool:
    """Whether openai_record_strict decides the parsed conversation from its Structs (no walk over its dicts) and
    it can be written as a record's JSON (orjson refuses a lone surrogate and an integer beyond 64 bits, which the
    export's long way then meets as it always has)."""
    conversation = canonical_conversation(messages, tools)
    if conversation is None:
        return False
    names = {tool.function.name for tool in conversation.tools}
    if openai_format._measure_when_clean(conversation.messages, names) is None:
        return False
    try:
        orjson.dumps([messages, tools])
    except TypeError:
        return False
    return True


def _compare_text(messages, tools, dumps):
    try:
        messages_text, tools_text = dumps(messages), dumps(tools)
        messages_text.encode(), tools_text.encode()
    except (TypeError, ValueError):  # what no database holds: a lone surrogate unescaped, a NaN
        return
    parsed = json.loads(messages_text), json.loads(tools_text)
    gated = openai_record_from_text(messages_text, tools_text)
    assert (gated is not None) == _decided_on_dicts(*parsed)
    if gated is None:  # the export then takes openai_record_strict over the parsed values, as _compare holds
        return
    record, strict, problems = openai_record_strict(*parsed)
    assert problems == []
    assert gated.line == orjson.dumps(record)  # the same bytes, key order and numbers' spelling included
    assert gated.measure == conversation_measure(strict)
    assert orjson.dumps(gated.record()) == gated.line


@SETTINGS
@given(conversation=conversations, dumps=stored_texts)
def test_hostile_stored_text_is_decided_as_its_parsed_value(conversation, dumps):
    _compare_text(*conversation, dumps)


@SETTINGS
@given(conversation=valid_conversations(), dumps=stored_texts)
def test_valid_stored_text_gives_the_record_the_parsed_value_gives(conversation, dumps):
    _compare_text(*conversation, dumps)


def test_stored_text_with_numbers_in_the_tools_keeps_orjson_spelling():
    tool = {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "",
            "parameters": {"minimum": 1e16, "maximum": 2.5e-7, "default": 12345678901234567, "big": 2**64 - 1},
        },
    }
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    gated = openai_record_from_text(json.dumps(messages), json.dumps([tool]))
    assert gated is not None
    assert gated.line == orjson.dumps({"messages": messages, "tools": [tool]})
    assert b'"minimum":1e+16' in gated.line  # msgspec would write 1e16
    assert openai_record_from_text(json.dumps(messages), json.dumps([{**tool, "x": 2**64}])) is None
