"""Budgets enforced before each LLM call, tool calls per step, live sessions per user and the idle timeout."""

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from simia_web.curation.models import Trajectory
from simia_web.environments.models import EnvSession
from simia_web.llm.models import LLMCall

from .conftest import tool_call

URL = "/api/v1/envs/"


def create(client, task, **limits):
    response = client.post(URL, {"task": task.pk, **limits}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def many_calls(count: int) -> dict:
    arguments = json.dumps({"order_id": "W1"})
    return {
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "get_order", "arguments": arguments}}
            for i in range(count)
        ]
    }


def test_more_tool_calls_than_the_step_limit_is_a_400_naming_it(shop, script, curator, llm_stub):
    env_id = create(curator, shop["tasks"][0])
    response = curator.post(f"{URL}{env_id}/step", {"message": many_calls(50)}, format="json")
    assert response.status_code == 400
    assert "max_tool_calls_per_step is 16" in response.json()["detail"]
    assert "50 tool calls" in response.json()["detail"]
    assert EnvSession.objects.get(pk=env_id).step_count == 0
    assert not llm_stub.stage_requests("simulator")


def test_a_step_of_50_tool_calls_spends_at_most_one_call_past_the_token_budget(shop, script, curator, llm_stub):
    env_id = create(curator, shop["tasks"][0], token_budget=1000, max_tool_calls_per_step=64)
    result = curator.post(f"{URL}{env_id}/step", {"message": many_calls(50)}, format="json").json()
    simulator_calls = LLMCall.objects.filter(stage="simulator")
    tokens = [call.tokens_in + call.tokens_out for call in simulator_calls.order_by("id")]
    # Every call but the last was made while the budget still had room.
    assert sum(tokens[:-1]) < 1000 <= sum(tokens)
    assert len(llm_stub.stage_requests("simulator")) == len(tokens) < 50
    assert result["done"] is True and result["termination_reason"] == "token_budget"
    assert result["info"]["tokens_used"] == sum(tokens)
    # Every call still has its result; the ones never run say why.
    assert len(result["observation"]) == 50
    assert "token_budget limit is reached" in result["observation"][-1]["content"]
    assert not llm_stub.stage_requests("user_simulator")


def test_errors_stop_the_simulator_within_the_step(shop, script, curator, llm_stub):
    env_id = create(curator, shop["tasks"][0], max_errors=1)
    message = many_calls(3)
    message["tool_calls"][0]["function"]["name"] = "teleport"
    result = curator.post(f"{URL}{env_id}/step", {"message": message}, format="json").json()
    assert result["termination_reason"] == "max_errors"
    assert "no tool named 'teleport'" in result["observation"][0]["content"]
    assert "max_errors limit is reached" in result["observation"][1]["content"]
    assert not llm_stub.stage_requests("simulator")


def test_a_spent_budget_does_not_ask_the_user_simulator(shop, script, curator, llm_stub):
    env_id = create(curator, shop["tasks"][0], token_budget=1)
    EnvSession.objects.filter(pk=env_id).update(tokens_used=1)
    result = curator.post(f"{URL}{env_id}/step", {"message": {"content": "Anything else?"}}, format="json").json()
    assert result["termination_reason"] == "token_budget"
    assert not llm_stub.stage_requests("user_simulator")
    assert result["reward"] is not None  # the judge still gives the trainer its reward


def test_live_sessions_per_user_are_capped(shop, script, curator, settings):
    settings.SIMIA_ENV_MAX_LIVE_SESSIONS = 2
    first = create(curator, shop["tasks"][0])
    create(curator, shop["tasks"][0])
    refused = curator.post(URL, {"task": shop["tasks"][0].pk}, format="json")
    assert refused.status_code == 429
    assert refused.json()["error"] == "session_limit" and "SIMIA_ENV_MAX_LIVE_SESSIONS" in refused.json()["detail"]
    assert curator.post(f"{URL}{first}/abandon").status_code == 200
    create(curator, shop["tasks"][0])


def test_an_idle_session_is_abandoned_when_next_touched(shop, script, curator, settings):
    settings.SIMIA_ENV_IDLE_MINUTES = 30
    env_id = create(curator, shop["tasks"][0])
    EnvSession.objects.filter(pk=env_id).update(updated_at=timezone.now() - timedelta(minutes=31))
    message = tool_call("get_order", {"order_id": "W1"})
    response = curator.post(f"{URL}{env_id}/step", {"message": message}, format="json")
    assert response.status_code == 409 and "idle_timeout" in response.json()["detail"]
    session = EnvSession.objects.get(pk=env_id)
    assert session.done and session.termination_reason == "idle_timeout" and session.reward is None
    assert Trajectory.objects.get(pk=session.trajectory_id).termination_reason == "idle_timeout"


def test_the_expire_command_abandons_forgotten_sessions_only(shop, script, curator, settings, capsys):
    settings.SIMIA_ENV_IDLE_MINUTES = 30
    old, fresh = create(curator, shop["tasks"][0]), create(curator, shop["tasks"][0])
    EnvSession.objects.filter(pk=old).update(updated_at=timezone.now() - timedelta(hours=2))
    call_command("expire_env_sessions")
    assert "1 idle session" in capsys.readouterr().out
    assert EnvSession.objects.get(pk=old).termination_reason == "idle_timeout"
    assert not EnvSession.objects.get(pk=fresh).done


@pytest.mark.parametrize("value", [0, 129])
def test_the_tool_call_limit_is_bounded(shop, script, curator, value):
    response = curator.post(URL, {"task": shop["tasks"][0].pk, "max_tool_calls_per_step": value}, format="json")
    assert response.status_code == 400
