"""The context budget: answer sizes per stage, prompts fitted to the window, overflow and cut-off answers."""

import json

import pytest

from simia_web.llm.budget import STAGE_MAX_TOKENS, messages_fit, prompt_token_room, stage_max_tokens
from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.llm.selectors import profile_cache_clear
from tests.support.llm_stub import Reply
from tests.support.personalities import LlamaCppPython

from .conftest import ask
from .test_chat import TOOLS


def _call(index: int, result_chars: int = 100) -> list[dict]:
    call_id = f"call_{index}"
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "get_order", "arguments": '{"order_id":"1"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "x" * result_chars},
    ]


def _long_history(turns: int, result_chars: int = 100) -> list[dict]:
    history = [{"role": "system", "content": "You are a shop agent."}, {"role": "user", "content": "Find order 1."}]
    for index in range(turns):
        history += _call(index, result_chars)
    return history + [{"role": "user", "content": "And now?"}]


def _set(profile, **fields):
    EndpointProfile.objects.filter(pk=profile.pk).update(**fields)
    for name, value in fields.items():
        setattr(profile, name, value)
    profile_cache_clear()  # clients read the profile afresh


# -- sizes ----------------------------------------------------------------------------------------


def test_each_stage_asks_for_its_own_answer_size(stub):
    llm_stub = stub
    profile = llm_stub.profile
    assert stage_max_tokens(profile, "user_simulator") == STAGE_MAX_TOKENS["user_simulator"] < 512
    assert stage_max_tokens(profile, "judge") == 512
    _set(profile, stage_max_tokens={"judge": 300}, max_tokens=1000)
    assert stage_max_tokens(profile, "judge") == 300
    assert stage_max_tokens(profile, "api_synthesis") == 1000  # the profile's cap
    ask(stage="judge")
    assert llm_stub.requests[-1].body["max_tokens"] == 300


def test_prompt_chars_available_follows_window_stage_and_ratio(llm_stub):
    _set(llm_stub.profile, context_window=8192, chars_per_token=2.0)
    judge, user = client_for_stage("judge"), client_for_stage("user_simulator")
    assert 0 < judge.prompt_chars_available() < user.prompt_chars_available() < 8192 * 2.0
    _set(llm_stub.profile, chars_per_token=1.6)
    denser = client_for_stage("judge").prompt_chars_available()
    assert denser == pytest.approx(judge.prompt_chars_available() * 0.8, rel=0.01)
    _set(llm_stub.profile, chars_per_token=4.0)  # a stage starts no lighter than the conservative ratio
    assert client_for_stage("judge").prompt_chars_available() == judge.prompt_chars_available()
    _set(llm_stub.profile, context_window=16384)
    assert client_for_stage("judge").prompt_chars_available() > 2 * judge.prompt_chars_available()


def test_the_ratio_is_learned_from_usage(stub):
    llm_stub = stub
    llm_stub.personality = LlamaCppPython()  # counts a token per 3 characters of the request
    _set(llm_stub.profile, chars_per_token=2.5)
    for _ in range(3):
        ask(messages=[{"role": "user", "content": "Six times seven? " * 40}])
    learned = EndpointProfile.objects.get(pk=llm_stub.profile.pk).chars_per_token
    assert 2.75 < learned < 3.5


# -- fitting ----------------------------------------------------------------------------------------


def test_history_keeps_opening_and_recent_turns_with_pairs_intact():
    history = _long_history(turns=30)
    fitted = messages_fit(history, available=2000)
    assert fitted.fits(2000)
    kept = fitted.messages
    assert kept[:2] == history[:2] and kept[-1] == history[-1]
    for index, message in enumerate(kept):  # every tool result follows its call
        if message["role"] == "tool":
            previous = kept[index - 1]
            assert previous.get("tool_calls") and previous["tool_calls"][0]["id"] == message["tool_call_id"]
    assert kept[2]["role"] == "assistant"
    (cut,) = fitted.cuts
    assert cut["what"] == "turns" and cut["index"] == 2 and cut["count"] == len(history) - len(kept)


def test_huge_tool_results_are_shortened_before_turns_are_dropped():
    history = _long_history(turns=2, result_chars=50_000)
    fitted = messages_fit(history, available=20_000)
    assert fitted.fits(20_000) and len(fitted.messages) == len(history)
    assert [c["what"] for c in fitted.cuts] == ["tool_result", "tool_result"]
    result = fitted.messages[3]["content"]
    assert "characters cut" in result and result.startswith("xxx") and result.endswith("xxx")


def test_a_prompt_that_fits_is_untouched():
    history = _long_history(turns=2)
    fitted = messages_fit(history, available=100_000)
    assert fitted.messages == history and fitted.cuts == []


def test_a_single_huge_message_is_cut_in_the_middle():
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "a" * 30_000 + "END"}]
    fitted = messages_fit(messages, available=10_000)
    assert fitted.fits(10_000) and fitted.messages[1]["content"].endswith("END")
    assert [c["what"] for c in fitted.cuts] == ["content"]


def test_a_chat_call_is_trimmed_to_the_window_and_the_cut_recorded(llm_stub):
    _set(llm_stub.profile, context_window=2048)
    llm_stub.responder = lambda request: Reply(content="Done.")
    history = _long_history(turns=40, result_chars=300)
    client = client_for_stage("agent")
    reply = client.chat(messages=history, tools=TOOLS)
    sent = llm_stub.requests[0].body["messages"]
    assert len(sent) < len(history) and sent[:2] == history[:2] and sent[-1] == history[-1]
    size = sum(len(m["content"]) + len(json.dumps(m.get("tool_calls", ""))) for m in sent) + len(json.dumps(TOOLS))
    assert size <= client.prompt_chars_available() * 1.2
    (cut,) = reply.last_call.trimmed
    assert cut["what"] == "turns" and LLMCall.objects.get().trimmed == [cut]


# -- overflow and cut-off answers ---------------------------------------------------------------------


def test_an_overflow_refusal_teaches_the_window_and_the_call_is_refitted_once(llm_stub):
    llm_stub.personality = LlamaCppPython(context_window=1024)
    llm_stub.responder = lambda request: Reply(content="Done.")
    reply = client_for_stage("agent").chat(messages=_long_history(turns=20, result_chars=200), tools=TOOLS)
    assert reply.data["content"] == "Done."
    assert [c.error_kind for c in reply.calls] == ["context_exceeded", ""]
    assert EndpointProfile.objects.get(pk=llm_stub.profile.pk).context_window == 1024
    assert reply.calls[1].trimmed and len(llm_stub.requests) == 2


def test_an_overflow_that_cannot_be_fitted_is_an_error_not_a_retry_loop(llm_stub, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 4
    llm_stub.personality = LlamaCppPython(context_window=100)  # smaller than the tools alone
    with pytest.raises(LLMError) as error:
        client_for_stage("agent").chat(messages=[{"role": "user", "content": "Hi"}], tools=TOOLS * 20)
    assert error.value.kind == "context_exceeded"
    assert len(llm_stub.requests) == 2  # the first, and one refitted with what the refusal taught


def test_a_cut_off_answer_is_retried_once_with_more_room(stub):
    llm_stub = stub
    _set(llm_stub.profile, context_window=8192)
    llm_stub.inject(Reply(content='{"answer": 4', finish_reason="length"))
    reply = ask(stage="judge")
    assert reply.data == {"answer": 42}
    assert [r.body["max_tokens"] for r in llm_stub.requests] == [512, 1024]
    assert [c.error_kind for c in reply.calls] == ["truncated", ""]


def test_cut_off_twice_is_truncated_not_resent(stub, settings):
    llm_stub = stub
    settings.SIMIA_LLM_MAX_ATTEMPTS = 4
    _set(llm_stub.profile, context_window=8192)
    llm_stub.responder = lambda request: Reply(content='{"answer": 4', finish_reason="length")
    with pytest.raises(LLMError) as error:
        ask(stage="judge")
    assert error.value.kind == "truncated"
    assert [r.body["max_tokens"] for r in llm_stub.requests] == [512, 1024]


def test_a_cut_off_answer_without_room_for_more_is_truncated_at_once(stub):
    llm_stub = stub
    _set(llm_stub.profile, context_window=700)  # 100 prompt tokens + 512 leave no room to grow
    llm_stub.inject(Reply(content='{"answer": 4', finish_reason="length"))
    with pytest.raises(LLMError) as error:
        ask(stage="judge")
    assert error.value.kind == "truncated" and len(llm_stub.requests) == 1
    assert LLMCall.objects.get().error_kind == "truncated"


def test_a_timed_out_request_is_retried_with_more_time(stub):
    _set(stub.profile, timeout_seconds=0.3)
    stub.inject(Reply(content={"answer": 42}, delay=0.5), Reply(content={"answer": 42}, delay=0.5))
    reply = ask()
    assert reply.data == {"answer": 42}
    assert [c.error_kind for c in reply.calls] == ["timeout", ""]  # the second waited 0.6 s for its 0.5 s answer


def test_a_slow_endpoint_s_rate_is_kept_for_the_next_process(stub, monkeypatch):
    from simia_web.llm import client as client_module

    _set(stub.profile, timeout_seconds=1, max_tokens=1000)
    stub.inject(Reply(content={"answer": "x" * 400}, delay=0.5))  # about 100 tokens in 0.5 s
    ask()
    stored = EndpointProfile.objects.get(pk=stub.profile.pk).tokens_per_second
    assert 150 < stored < 250
    monkeypatch.setattr(client_module, "_rates", {})  # a new process knows only what the profile keeps
    profile_cache_clear()
    client = client_for_stage("api_synthesis")
    assert client._timeout(300) == pytest.approx(2 * 300 / stored)  # more than the 1 s that would cut the answer


def test_a_megabyte_prompt_is_cut_to_fit_without_a_refusal(stub):
    stub.personality = LlamaCppPython(context_window=8192)
    _set(stub.profile, structured_mode="json_object_schema")
    order = {"status": "pending", "items": ["keyboard", "thermostat"]}
    state = {"orders": {f"#W{n:07d}": order for n in range(20_000)}}
    document = json.dumps(state)
    assert len(document) > 1_000_000
    reply = client_for_stage("simulator").structured(
        messages=[{"role": "system", "content": "Simulate the API."}, {"role": "user", "content": document}],
        schema={"type": "object"},
        schema_name="answer",
    )
    assert reply.data == {"answer": 42}
    assert [c.error_kind for c in reply.calls] == [""] and len(stub.requests) == 1
    (cut,) = reply.last_call.trimmed
    assert cut["what"] == "content" and cut["index"] == 1 and cut["chars"] > 1_000_000


def test_each_stage_keeps_its_own_ratio(stub):
    stub.personality = LlamaCppPython()  # a token per 3 characters of the request
    _set(stub.profile, chars_per_token=2.5, context_window=8192)
    before = client_for_stage("judge").prompt_chars_available()
    ask(stage="judge", messages=[{"role": "user", "content": "Six times seven? " * 40}])
    judge, simulator = client_for_stage("judge"), client_for_stage("simulator")
    assert judge.prompt_chars_available() > before  # learned from the judge's own prompts
    # A stage without samples of its own starts from the conservative ratio, not the judge's lighter prose.
    assert simulator.prompt_chars_available() == int(prompt_token_room(8192, simulator.max_tokens) * 2.0 * 0.9)


def test_the_schema_counts_against_the_prompt_where_the_mode_writes_it_there(llm_stub):
    schema = {"type": "object", "properties": {"x": {"type": "string", "description": "y" * 3000}}}
    EndpointProfile.objects.filter(pk=llm_stub.profile.pk).update(structured_mode="json_schema")
    profile_cache_clear()
    client = client_for_stage("judge")
    assert client.prompt_chars_available(schema) == client.prompt_chars_available()  # sent as response_format
    EndpointProfile.objects.filter(pk=llm_stub.profile.pk).update(structured_mode="json_object_schema")
    profile_cache_clear()
    client = client_for_stage("judge")
    assert client.prompt_chars_available() - client.prompt_chars_available(schema) > 3000  # in the system prompt


def test_a_probed_slow_server_gets_the_time_its_pace_says_whatever_the_profiles_timeout(stub):
    """A small CPU server's answer of max_tokens takes minutes: giving up at the profile's timeout (or its cap of four
    times it) would leave the server writing an answer nobody reads, and the retry waiting behind it."""
    from simia_web.llm.selectors import profile_endpoint

    pace = {"prompt_tokens_per_second": 60.0, "answer_tokens_per_second": 10.0}
    capabilities = {"endpoint": profile_endpoint(stub.profile), "concurrency": pace}
    _set(stub.profile, timeout_seconds=60, capabilities=capabilities)
    client = client_for_stage("api_synthesis")
    prompt_chars = 3000 * client._chars_per_token()  # 3,000 tokens: 50 s to read
    assert client._timeout(2048, prompt_chars) == pytest.approx(2 * (50 + 204.8))
    assert client._timeout(2048, prompt_chars) > 4 * 60
    _set(stub.profile, capabilities={})  # unprobed: the profile's timeout, as before
    assert client_for_stage("api_synthesis")._timeout(16) == 60
