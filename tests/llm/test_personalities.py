"""The client against the behaviours of real servers: each personality in each client mode, and the probe."""

import json

import pytest

from simia_web.llm import client as llm_client
from simia_web.llm.capabilities import endpoint_check
from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.llm.selectors import profile_cache_clear
from tests.support.llm_stub import Reply
from tests.support.personalities import VLLM, LlamaCppPython, Ollama, OpenAI

from .conftest import ANSWER_SCHEMA, ask
from .test_chat import HISTORY, TOOLS


def model(request):
    """A model that follows whatever reaches it: tools it may call, a schema in its prompt or its grammar."""
    body = request.body
    text = json.dumps(body)
    name = "get_order" if "get_order" in text else "get_weather"
    if body.get("tools"):
        return Reply(tool_calls=[{"name": name, "arguments": {"order_id": "8"} if name == "get_order" else {}}])
    if "You can call these tools" in text:
        return Reply(content={"content": None, "tool_calls": [{"name": name, "arguments": {"order_id": "8"}}]})
    if '"colour"' in text:
        return Reply(content={"colour": "teal", "count": 1})
    return Reply(content={"answer": 42})


@pytest.fixture
def server(llm_stub):
    llm_stub.responder = model
    return llm_stub


def _formats(stub):
    return [(r.body.get("response_format") or {}).get("type") for r in stub.requests]


def _no_null_content(stub):
    return all(m.get("content") is not None for r in stub.requests for m in r.messages)


# -- structured calls -------------------------------------------------------------------------

STRUCTURED = [
    # personality, request formats of the first call, modes of its calls, error kinds of its calls
    (LlamaCppPython, ["json_schema", "json_object"], ["json_schema", "json_object_schema"], ["unsupported_mode", ""]),
    (VLLM, ["json_schema"], ["json_schema"], [""]),
    (Ollama, ["json_schema", "json_object"], ["json_schema", "json_object_schema"], ["invalid_json", ""]),
    (OpenAI, ["json_schema"], ["json_schema"], [""]),
]


@pytest.mark.parametrize("personality, formats, modes, kinds", STRUCTURED, ids=lambda p: getattr(p, "name", ""))
def test_structured_call_gets_through_each_server(server, personality, formats, modes, kinds):
    server.personality = personality()
    reply = ask()
    assert reply.data == {"answer": 42}
    assert _formats(server) == formats
    assert [c.mode for c in reply.calls] == modes and [c.error_kind for c in reply.calls] == kinds
    if len(formats) > 1:  # the fallback is taken once, then remembered, on the profile too
        assert server.requests[-1].body["response_format"].get("schema") == ANSWER_SCHEMA
        ask()
        assert _formats(server)[len(formats) :] == ["json_object"]
        assert EndpointProfile.objects.get(pk=server.profile.pk).capabilities["structured"] == "json_object_schema"


def test_a_fallback_learned_by_one_process_is_where_the_next_starts(server):
    server.personality = LlamaCppPython()
    ask()
    llm_client._downgrades.clear()  # another worker: nothing learned in memory
    profile_cache_clear()
    server.requests.clear()
    ask()
    assert _formats(server) == ["json_object"] and len(server.requests) == 1


def test_llama_cpp_python_json_schema_refusal_is_not_retried_as_transient(server, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 4
    server.personality = LlamaCppPython()
    server.profile.structured_mode = "json_schema"
    server.profile.save()
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "unsupported"
    assert len(server.requests) == 1


def test_a_validation_error_in_a_500_is_not_retried(server, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 4
    body = {
        "error": {
            "message": "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages'), "
            "'msg': 'Field required'}",
            "type": "internal_server_error",
        }
    }
    server.inject(Reply(status=500, raw_body=json.dumps(body)))
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "bad_request"
    assert len(server.requests) == 1


def test_json_object_without_its_schema_would_get_free_form_json(server):
    """Why the schema travels inside json_object mode: llama-cpp-python enforces only what it is given."""
    server.personality = LlamaCppPython()
    server.profile.structured_mode = "json_object"
    server.profile.save()
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "invalid_output"
    server.profile.structured_mode = "json_object_schema"
    server.profile.save()
    assert ask().data == {"answer": 42}


# -- chat with tools --------------------------------------------------------------------------

CHAT = [
    (LlamaCppPython, ["native"]),
    (VLLM, ["native", "prompt"]),  # "auto" tool choice needs a server flag
    (Ollama, ["native"]),
    (OpenAI, ["native"]),
]


@pytest.mark.parametrize("personality, modes", CHAT, ids=lambda p: getattr(p, "name", ""))
def test_agent_turn_with_tools_gets_through_each_server(server, personality, modes):
    server.personality = personality()
    reply = client_for_stage("agent").chat(messages=HISTORY, tools=TOOLS)
    (call,) = reply.data["tool_calls"]
    assert call["function"]["name"] == "get_order" and json.loads(call["function"]["arguments"]) == {"order_id": "8"}
    assert [c.mode for c in reply.calls] == modes
    assert all(r.body.get("tool_choice") == "auto" for r in server.requests if r.body.get("tools"))
    assert _no_null_content(server)


def test_vllm_with_auto_tool_choice_keeps_native_tools(server):
    server.personality = VLLM(auto_tool_choice=True)
    reply = client_for_stage("agent").chat(messages=HISTORY, tools=TOOLS)
    assert reply.data["tool_calls"] and [c.mode for c in reply.calls] == ["native"]


def test_openai_rate_limit_waits_as_told(server, sleeps):
    server.personality = OpenAI(rate_limited=1)
    assert ask().data == {"answer": 42}
    assert sleeps == [1.0]
    assert [c.error_kind for c in LLMCall.objects.order_by("id")] == ["rate_limited", ""]


# -- the probe ----------------------------------------------------------------------------------

PROBED = [
    (LlamaCppPython, "json_object_schema", "prompt", None, "not reported"),  # answers with tools run past max_tokens
    (VLLM, "json_schema", "prompt", 8192, "/v1/models max_model_len"),
    (Ollama, "json_object", "native", 8192, "Ollama /api/show"),
    (OpenAI, "json_schema", "native", None, "not reported"),
]


@pytest.mark.parametrize("personality, structured, tools, window, source", PROBED, ids=lambda p: getattr(p, "name", ""))
def test_probe_finds_what_each_server_takes(server, personality, structured, tools, window, source):
    server.personality = personality()
    found = endpoint_check(profile=server.profile)
    assert (found["structured"], found["tools"], found["context_window"]) == (structured, tools, window)
    assert found["context_window_source"] == source
    profile = EndpointProfile.objects.get(pk=server.profile.pk)
    assert profile.capabilities["structured"] == structured and profile.context_window == window
    assert all({"name", "status", "verdict", "detail"} <= set(p) for p in profile.capabilities["evidence"])
    # The client starts from what was found: no refused or ignored mode is tried first.
    llm_client._downgrades.clear()
    profile_cache_clear()
    server.requests.clear()
    assert ask().data == {"answer": 42} and len(server.requests) == 1


def test_probe_evidence_shows_llama_cpp_python_ignoring_tools_without_tool_choice(server):
    server.personality = LlamaCppPython()
    evidence = {p["name"]: p for p in endpoint_check(profile=server.profile)["evidence"]}
    assert evidence["json_schema"]["status"] == 500 and evidence["json_schema"]["verdict"] == "refused"
    assert evidence["tools without tool_choice"]["verdict"] == "ignored"
    assert evidence["tools, tool_choice named"]["verdict"] == "honoured"


def test_check_endpoint_command_prints_and_records(server, capsys):
    from django.core.management import call_command

    server.personality = VLLM()
    call_command("check_endpoint", server.profile.name)
    out = capsys.readouterr().out
    assert "structured output: json_schema" in out and "context window: 8192 (/v1/models max_model_len)" in out
    assert EndpointProfile.objects.get(pk=server.profile.pk).capabilities["tools"] == "prompt"


def test_admin_test_endpoint_action(server, client, settings):
    from django.contrib.auth import get_user_model

    settings.CELERY_TASK_ALWAYS_EAGER = True  # the probe runs in a worker: here, within the request
    server.personality = Ollama()
    admin_user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-admin-9")
    client.force_login(admin_user)
    response = client.post(
        "/admin/llm/endpointprofile/",
        {"action": "test_endpoint", "_selected_action": [server.profile.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert f"Testing {server.profile.name} in the background" in response.content.decode()
    page = client.get(f"/admin/llm/endpointprofile/{server.profile.pk}/change/").content.decode()
    assert "Ollama /api/show" in page and "honoured" in page


def test_the_window_is_looked_up_once_on_first_use(server):
    server.personality = VLLM(context_window=4096)
    client = client_for_stage("judge")
    assert client.context_window() == 4096
    assert EndpointProfile.objects.get(pk=server.profile.pk).context_window == 4096


def test_findings_about_another_endpoint_are_not_used(server):
    server.personality = LlamaCppPython()
    endpoint_check(profile=server.profile)
    EndpointProfile.objects.filter(pk=server.profile.pk).update(model="another-model")  # the environment moved on
    llm_client._downgrades.clear()
    profile_cache_clear()
    server.requests.clear()
    server.personality = VLLM()
    ask()
    assert _formats(server) == ["json_schema"]  # not llama-cpp-python's json_object_schema
    assert EndpointProfile.objects.get(pk=server.profile.pk).context_window == 8192  # looked up again


def test_openai_refusing_the_schema_inside_json_object_falls_back_to_json_object(server):
    from simia_web.llm.selectors import profile_endpoint

    server.personality = OpenAI()
    server.profile.capabilities = {"endpoint": profile_endpoint(server.profile), "structured": "json_object_schema"}
    server.profile.save()
    reply = ask()
    assert reply.data == {"answer": 42}
    assert [c.mode for c in reply.calls] == ["json_object_schema", "json_object"]
    assert reply.calls[0].error_kind == "unsupported_mode" and "response_format.schema" in reply.calls[0].error


def test_the_probe_over_rest_is_for_admins_and_fills_capabilities(server, settings):
    from rest_framework.test import APIClient

    from simia_web.accounts.services import user_create

    settings.CELERY_TASK_ALWAYS_EAGER = True
    server.personality = VLLM(context_window=4096)
    clients = {}
    for role in ("curator", "admin"):
        clients[role] = APIClient()
        clients[role].force_authenticate(user_create(username=role, password="pw-for-tests-9", role=role))
    url = f"/api/v1/llm/profiles/{server.profile.pk}/check/"
    assert clients["curator"].post(url).status_code == 403
    assert clients["admin"].post(url).status_code == 202
    profile = clients["admin"].get(f"/api/v1/llm/profiles/{server.profile.pk}/").json()
    assert profile["context_window"] == 4096 and profile["capabilities"]["structured"] == "json_schema"
    assert profile["capabilities"]["evidence"]  # what each probe request got


def test_probe_sees_llama_cpp_python_write_past_max_tokens_with_tools_and_puts_tools_in_the_prompt(server):
    """Its function-calling chat format sets no limit on an answer with tool_choice "auto": a small model then runs to
    the end of its context, minutes a call. Tools in the prompt go through its plain chat path, which keeps to it."""
    server.personality = LlamaCppPython()
    found = endpoint_check(profile=server.profile)
    evidence = {p["name"]: p for p in found["evidence"]}
    bounded = evidence["tools, tool_choice auto, max_tokens=8"]
    assert bounded["verdict"] == "ignored" and bounded["detail"] == "32 answer tokens"
    assert found["tools"] == "prompt"
    for honest in (VLLM(auto_tool_choice=True), Ollama(), OpenAI()):
        server.personality = honest
        found = endpoint_check(profile=server.profile)
        assert found["tools"] == "native", honest.name
        evidence = {p["name"]: p for p in found["evidence"]}
        assert evidence["tools, tool_choice auto, max_tokens=8"]["verdict"] == "honoured"


def test_an_answer_past_max_tokens_with_tools_sends_tools_in_the_prompt_from_then_on(server):
    """An endpoint never probed learns it from the first such answer: that answer is kept, the next turn carries no
    `tools` (they are in its prompt) and its max_tokens holds."""
    server.personality = LlamaCppPython()
    agent = client_for_stage("agent")
    first = agent.chat(messages=HISTORY, tools=TOOLS)
    assert first.data["tool_calls"] and [c.mode for c in first.calls] == ["native"]
    profile = EndpointProfile.objects.get(pk=server.profile.pk)
    assert profile.capabilities["tools"] == "prompt"
    assert profile.capabilities["learned"][-1]["evidence"].endswith("with max_tokens=" + str(agent.max_tokens))
    second = client_for_stage("agent").chat(messages=HISTORY, tools=TOOLS)
    assert second.data["tool_calls"] and [c.mode for c in second.calls] == ["prompt"]
    assert "tools" not in server.requests[-1].body


def test_tools_in_the_prompt_are_answered_to_a_schema_where_the_endpoint_holds_answers_to_one(server):
    """llama-cpp-python enforces a json_object schema as a grammar (and keeps to max_tokens there): the tool-call
    answer is held to its shape, with the offered tools' names, so a small model writes valid JSON."""
    server.personality = LlamaCppPython()
    endpoint_check(profile=server.profile)
    llm_client._downgrades.clear()
    profile_cache_clear()
    server.requests.clear()
    reply = client_for_stage("agent").chat(messages=HISTORY, tools=TOOLS)
    assert reply.data["tool_calls"] and [c.mode for c in reply.calls] == ["prompt"]
    (sent,) = server.requests
    assert "tools" not in sent.body and sent.body["response_format"]["type"] == "json_object"
    call = sent.body["response_format"]["schema"]["properties"]["tool_calls"]["items"]
    assert call["properties"]["name"]["enum"] == [tool["function"]["name"] for tool in TOOLS]
