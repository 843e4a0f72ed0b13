"""Structured output against the loopback endpoint: modes, fallbacks, validation and repair."""

import pytest

from simia_web.llm.client import LLMError
from simia_web.llm.models import EndpointProfile, LLMCall, StructuredMode
from tests.support.llm_stub import Reply

from .conftest import ANSWER_SCHEMA, ask


def _response_format_types(stub):
    return [(r.body.get("response_format") or {}).get("type") for r in stub.requests]


def _system_text(request):
    return "\n".join(m["content"] for m in request.messages if m["role"] == "system")


def test_json_schema_answer_is_parsed_and_the_schema_is_sent(stub):
    reply = ask()
    assert reply.data == {"answer": 42}
    body = stub.requests[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "answer"
    assert body["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA
    assert body["model"] == "stub-model"
    assert reply.last_call.mode == "json_schema" and reply.last_call.ok


def test_schema_name_is_made_acceptable_to_openai(stub):
    from simia_web.llm.client import client_for_stage

    client_for_stage("judge").structured(
        messages=[{"role": "user", "content": "x"}], schema=ANSWER_SCHEMA, schema_name="judge verdict/v2"
    )
    assert stub.requests[0].schema_name == "judge_verdict_v2"


def test_rejected_json_schema_falls_back_to_json_object_and_is_remembered(stub):
    stub.reject_json_schema = True
    reply = ask()
    assert reply.data == {"answer": 42}
    assert _response_format_types(stub) == ["json_schema", "json_object"]
    assert [c.error_kind for c in reply.calls] == ["unsupported_mode", ""]
    assert "answer" in _system_text(stub.requests[1])  # the schema travels in the prompt
    # The next call goes straight to the mode that worked.
    ask()
    assert _response_format_types(stub)[2:] == ["json_object"]


def test_rejected_json_object_too_falls_back_to_the_prompt(stub):
    stub.reject_json_schema = stub.reject_json_object = True
    reply = ask()
    assert reply.data == {"answer": 42}
    assert _response_format_types(stub) == ["json_schema", "json_object", "json_object", None]
    assert [c.mode for c in reply.calls] == ["json_schema", "json_object_schema", "json_object", "prompt"]
    assert '"required":["answer"]' in _system_text(stub.requests[3])  # compact JSON
    ask()
    assert _response_format_types(stub)[4:] == [None]


def test_learned_fallback_belongs_to_one_profile(stub):
    stub.reject_json_schema = True
    ask()
    other = EndpointProfile.objects.create(name="other", base_url=stub.url, model="stub-model")
    stub.requests.clear()
    from simia_web.llm.client import client_for_stage

    client_for_stage("judge", profile_id=other.pk).structured(
        messages=[{"role": "user", "content": "x"}], schema=ANSWER_SCHEMA, schema_name="answer"
    )
    assert _response_format_types(stub) == ["json_schema", "json_object"]


@pytest.mark.parametrize("mode, sent", [(StructuredMode.JSON_OBJECT, "json_object"), (StructuredMode.PROMPT, None)])
def test_forced_mode_is_what_the_request_carries(stub, mode, sent):
    stub.profile.structured_mode = mode
    stub.profile.save()
    reply = ask(messages=[{"role": "system", "content": "You are exact."}, {"role": "user", "content": "6*7?"}])
    assert reply.data == {"answer": 42}
    assert _response_format_types(stub) == [sent]
    messages = stub.requests[0].messages
    # One system message, first, holding both the caller's text and the schema.
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("You are exact.") and "JSON Schema" in messages[0]["content"]
    assert reply.last_call.mode == mode


def test_forced_json_schema_is_not_downgraded(stub):
    stub.profile.structured_mode = StructuredMode.JSON_SCHEMA
    stub.profile.save()
    stub.reject_json_schema = True
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "unsupported"
    assert _response_format_types(stub) == ["json_schema"]
    assert LLMCall.objects.get().error_kind == "unsupported_mode"


def test_invalid_json_gets_one_repair_that_quotes_the_error(stub):
    stub.inject(Reply(content="six times seven is 42"))
    reply = ask()
    assert reply.data == {"answer": 42}
    assert len(stub.requests) == 2
    repair = stub.requests[1].messages
    assert repair[-2] == {"role": "assistant", "content": "six times seven is 42"}
    assert repair[-1]["role"] == "user" and "not valid JSON" in repair[-1]["content"]
    assert [c.error_kind for c in reply.calls] == ["invalid_json", ""]
    assert LLMCall.objects.get(pk=reply.call_ids[0]).error_kind == "invalid_json"


def test_schema_violation_gets_a_repair_naming_the_field(stub):
    stub.inject(Reply(content={"answer": "forty-two"}))
    reply = ask()
    assert reply.data == {"answer": 42}
    last_user = stub.requests[1].messages[-1]["content"]
    assert "at answer" in last_user and "'forty-two' is not of type 'integer'" in last_user
    assert reply.calls[0].error_kind == "schema_invalid"


def test_invalid_twice_is_an_error_and_both_calls_say_why(stub):
    stub.inject(Reply(content="nope"), Reply(content={"answer": "still no"}))
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "invalid_output"
    assert "is not of type 'integer'" in error.value.detail
    assert list(LLMCall.objects.order_by("id").values_list("error_kind", flat=True)) == [
        "invalid_json",
        "schema_invalid",
    ]
    assert all(LLMCall.objects.values_list("error", flat=True))


def test_code_fenced_json_is_accepted(stub):
    stub.inject(Reply(content='Here it is:\n```json\n{"answer": 42}\n```'))
    reply = ask()
    assert reply.data == {"answer": 42}
    assert len(stub.requests) == 1 and reply.last_call.ok
