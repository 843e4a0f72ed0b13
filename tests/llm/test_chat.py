"""Chat turns with tools: native tool calls, the prompt fallback and its failures."""

import json

import pytest

from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import LLMCall, ToolMode
from tests.support.llm_stub import Reply

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]
HISTORY = [
    {"role": "system", "content": "You are a shop agent."},
    {"role": "user", "content": "Where is order 7?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "7"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    {"role": "user", "content": "And order 8?"},
]


def chat(tools=TOOLS, messages=HISTORY):
    return client_for_stage("agent").chat(messages=messages, tools=tools)


def _assert_canonical_call(message, name, arguments):
    assert message["role"] == "assistant"
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == name
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == arguments


def test_native_tool_calls_become_canonical_messages(llm_stub):
    llm_stub.responder = lambda request: Reply(tool_calls=[{"name": "get_order", "arguments": {"order_id": "8"}}])
    reply = chat()
    _assert_canonical_call(reply.data, "get_order", {"order_id": "8"})
    body = llm_stub.requests[0].body
    assert body["tools"] == TOOLS and body["tool_choice"] == "auto"
    # Content beside tool calls is sent as "" (some servers answer null with a 500); nothing else changes.
    assert body["messages"][2]["content"] == "" and body["messages"][3:] == HISTORY[3:]
    assert body["messages"][:2] == HISTORY[:2] and body["messages"][2]["tool_calls"] == HISTORY[2]["tool_calls"]
    assert reply.last_call.mode == ToolMode.NATIVE and reply.last_call.ok


def test_native_ids_from_the_server_are_kept_and_several_calls_keep_order(llm_stub):
    llm_stub.responder = lambda request: Reply(
        content="Checking both.",
        tool_calls=[{"name": "get_order", "arguments": {"order_id": "8"}}, {"name": "get_order", "arguments": "{}"}],
    )
    message = chat().data
    assert message["content"] == "Checking both."
    ids = [c["id"] for c in message["tool_calls"]]
    stored = LLMCall.objects.get().response["message"]["tool_calls"]
    assert ids == [c["id"] for c in stored] and len(set(ids)) == 2
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"order_id": "8"}', "{}"]


def test_a_final_answer_has_no_tool_calls(llm_stub):
    llm_stub.responder = lambda request: Reply(content="Order 8 is on its way.")
    assert chat().data == {"role": "assistant", "content": "Order 8 is on its way."}


def test_chat_without_tools_sends_none(llm_stub):
    llm_stub.responder = lambda request: Reply(content="Hello.")
    reply = chat(tools=None, messages=[{"role": "user", "content": "Hi"}])
    assert reply.data["content"] == "Hello."
    assert "tools" not in llm_stub.requests[0].body


def _prompt_mode_responder(answer):
    return lambda request: Reply(content=answer)


def test_rejected_tools_fall_back_to_json_in_the_prompt(llm_stub):
    llm_stub.reject_tools = True
    llm_stub.responder = _prompt_mode_responder(
        {"content": None, "tool_calls": [{"name": "get_order", "arguments": {"order_id": "8"}}]}
    )
    reply = chat()
    _assert_canonical_call(reply.data, "get_order", {"order_id": "8"})
    assert [c.error_kind for c in reply.calls] == ["unsupported_mode", ""]
    assert [c.mode for c in reply.calls] == ["native", "prompt"]

    sent = llm_stub.requests[1].messages
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "user", "user"]  # the tool turn became plain text
    assert sent[0]["content"].startswith("You are a shop agent.") and '"get_order"' in sent[0]["content"]
    assert json.loads(sent[2]["content"]) == {
        "content": None,
        "tool_calls": [{"name": "get_order", "arguments": {"order_id": "7"}}],
    }
    assert "call_1" in sent[3]["content"] and "shipped" in sent[3]["content"]

    # Remembered: the next turn does not try native tools again.
    chat()
    assert "tools" not in llm_stub.requests[2].body and len(llm_stub.requests) == 3


def test_prompt_mode_final_answer_and_fenced_json(llm_stub):
    llm_stub.profile.tool_mode = ToolMode.PROMPT
    llm_stub.profile.save()
    llm_stub.responder = _prompt_mode_responder('```json\n{"content": "It shipped.", "tool_calls": []}\n```')
    assert chat().data == {"role": "assistant", "content": "It shipped."}
    assert "tools" not in llm_stub.requests[0].body


def test_prompt_mode_accepts_arguments_given_as_a_string(llm_stub):
    llm_stub.profile.tool_mode = ToolMode.PROMPT
    llm_stub.profile.save()
    llm_stub.responder = _prompt_mode_responder(
        {"content": "", "tool_calls": [{"name": "get_order", "arguments": '{"order_id": "9"}'}]}
    )
    _assert_canonical_call(chat().data, "get_order", {"order_id": "9"})


@pytest.mark.parametrize(
    "garbage",
    [
        "I would call get_order now.",
        ["not", "an", "object"],
        {"content": None, "tool_calls": [{"arguments": {}}]},
        {"content": None, "tool_calls": [{"name": "get_order", "arguments": [1, 2]}]},
        {"content": None, "tool_calls": [{"name": "get_order", "arguments": "{not json"}]},
        {"content": None, "tool_calls": {"name": "get_order"}},
        {"content": {"nested": True}},
    ],
)
def test_prompt_mode_garbage_is_an_error_and_recorded(llm_stub, garbage):
    llm_stub.profile.tool_mode = ToolMode.PROMPT
    llm_stub.profile.save()
    llm_stub.responder = _prompt_mode_responder(garbage)
    with pytest.raises(LLMError) as error:
        chat()
    assert error.value.kind == "invalid_output"
    call = LLMCall.objects.get()
    assert call.error_kind == "invalid_json" and call.error and call.response is not None


def test_forced_native_tools_are_not_downgraded(llm_stub):
    llm_stub.profile.tool_mode = ToolMode.NATIVE
    llm_stub.profile.save()
    llm_stub.reject_tools = True
    with pytest.raises(LLMError) as error:
        chat()
    assert error.value.kind == "unsupported"
    assert len(llm_stub.requests) == 1


@pytest.mark.parametrize("function", ["get_order", "get_unsupported_items"])
def test_a_bad_request_that_only_names_a_tool_does_not_downgrade_the_endpoint(llm_stub, function):
    """OpenAI answers an unusable tool schema with a 400 that names the function: a bad request, not a
    server without tool support, so the endpoint keeps native tools."""
    llm_stub.inject(
        Reply(status=400, error_message=f"Invalid schema for function '{function}': array schema missing items."),
        stage="agent",
    )
    with pytest.raises(LLMError) as error:
        chat()
    assert error.value.kind == "bad_request"
    chat()
    assert [bool(r.body.get("tools")) for r in llm_stub.requests] == [True, True]


def test_an_empty_turn_is_asked_for_once_more(llm_stub):
    llm_stub.inject(Reply(content=""))
    llm_stub.responder = lambda request: Reply(content="Your order is on its way.")
    reply = chat()
    assert reply.data["content"] == "Your order is on its way."
    assert [c.error_kind for c in reply.calls] == ["empty_answer", ""]
    llm_stub.responder = lambda request: Reply(content="")
    reply = chat()  # still empty: the turn is returned for the rules to name
    assert reply.data["content"] == "" and [c.error_kind for c in reply.calls] == ["empty_answer", ""]
