"""Hostile JSON on the step path, in a step body or in a tool call's arguments string: a clean refusal (400, or
an invalid-tool-call observation) that changes nothing but the error count."""

import pytest

from simia_web.environments.models import EnvSession

from .conftest import tool_call
from .test_actions_and_limits import URL, create, post_step

HOSTILE = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "deep object": '{"a": ' * 600 + "1" + "}" * 600,
    "digits": '{"order_id": ' + "1" * 5000 + "}",
    "2**70": '{"order_id": ' + str(2**70) + "}",
    "nan": '{"order_id": NaN}',
    "inf": '{"order_id": -1e999}',
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_step_body_is_a_400(shop, script, curator, text):
    env_id = create(curator, shop["tasks"][0])
    body = '{"message": {"content": "hi", "extra": ' + text + "}}"
    response = curator.post(f"{URL}{env_id}/step", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert EnvSession.objects.get(pk=env_id).step_count == 0


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_tool_arguments_get_an_error_observation(shop, script, curator, llm_stub, text):
    env_id = create(curator, shop["tasks"][0])
    response = post_step(curator, env_id, tool_call("cancel_order", text))
    assert response.status_code == 200, response.content
    [tool] = response.json()["observation"]
    assert "invalid_tool_call" in tool["content"] and "arguments are not JSON" in tool["content"]
    assert llm_stub.stage_requests("simulator") == []
