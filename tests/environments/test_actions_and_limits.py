"""Malformed actions, episode limits, finished episodes and authentication."""

import pytest

from simia_web.accounts.services import user_create, user_token
from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.environments.models import EnvSession
from tests.conftest import PASSWORD

from .conftest import CANCEL, tool_call

URL = "/api/v1/envs/"


def create(client, task, **limits):
    response = client.post(URL, {"task": task.pk, **limits}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def post_step(client, env_id, message):
    return client.post(f"{URL}{env_id}/step", {"message": message}, format="json")


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, '"message" is missing'),
        ([1, 2], "must be a JSON object"),
        ({"message": "hello"}, '"message" must be an object'),
        ({"message": None}, '"message" must be an object'),
        ({"message": {"role": "user", "content": "hi"}}, 'must be "assistant"'),
        ({"message": {"content": 42}}, '"message.content" must be'),
        ({"message": {"content": ["text"]}}, "parts must be objects"),
        ({"message": {"tool_calls": "cancel_order"}}, '"message.tool_calls" must be a list'),
        ({"message": {"tool_calls": [7]}}, '"message.tool_calls[0]" must be'),
        ({"message": {"tool_calls": [{"function": "cancel_order"}]}}, '"message.tool_calls[0].function" must be'),
        ({"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}, '"message.tool_calls[0].function.name" is'),
    ],
)
def test_wrong_shape_is_a_400_with_a_clear_error(shop, script, curator, body, detail):
    env_id = create(curator, shop["tasks"][0])
    response = curator.post(f"{URL}{env_id}/step", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_message"
    assert detail in response.json()["detail"]
    # Nothing was applied.
    assert EnvSession.objects.get(pk=env_id).step_count == 0


def test_a_nul_character_is_refused_with_the_body_before_the_step(shop, script, curator):
    env_id = create(curator, shop["tasks"][0])
    response = curator.post(f"{URL}{env_id}/step", {"message": {"content": "a\x00b"}}, format="json")
    assert response.status_code == 400 and "NUL character" in response.content.decode()
    assert EnvSession.objects.get(pk=env_id).step_count == 0


def test_body_that_is_not_json_is_a_400(shop, script, curator):
    env_id = create(curator, shop["tasks"][0])
    response = curator.post(f"{URL}{env_id}/step", "{not json", content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (tool_call("teleport", "{}"), "no tool named 'teleport'"),
        (tool_call("cancel_order", "{order_id: W1"), "arguments are not JSON"),
        (tool_call("cancel_order", "[1, 2]"), "arguments must be a JSON object"),
        (tool_call("cancel_order", {"order_id": 5, "reason": "x"}), "is not of type 'string'"),
        (tool_call("cancel_order", {"order_id": "W1"}), "'reason' is a required property"),
        (tool_call("get_order", 17), "arguments must be a JSON object"),
    ],
)
def test_bad_tool_calls_get_an_error_observation_without_the_simulator(
    shop, script, curator, llm_stub, message, expected
):
    env_id = create(curator, shop["tasks"][0])
    response = post_step(curator, env_id, message)
    assert response.status_code == 200
    result = response.json()
    [tool] = result["observation"]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_x"
    assert "invalid_tool_call" in tool["content"] and expected in tool["content"]
    assert result["done"] is False and result["info"]["errors"] == 1
    assert expected in result["info"]["tool_errors"]["3"][0]
    assert llm_stub.stage_requests("simulator") == []


def test_tool_call_without_id_gets_one(shop, script, curator):
    env_id = create(curator, shop["tasks"][0])
    message = {"tool_calls": [{"function": {"name": "get_order", "arguments": {"order_id": "W2"}}}]}
    result = post_step(curator, env_id, message).json()
    call_id = EnvSession.objects.get(pk=env_id).messages[2]["tool_calls"][0]["id"]
    assert call_id.startswith("call_") and result["observation"][0]["tool_call_id"] == call_id


def test_max_steps_ends_the_episode(shop, script, curator):
    env_id = create(curator, shop["tasks"][0], max_steps=2)
    assert post_step(curator, env_id, CANCEL).json()["done"] is False
    result = post_step(curator, env_id, {**CANCEL, "tool_calls": [{**CANCEL["tool_calls"][0], "id": "call_2"}]}).json()
    assert result["done"] is True and result["termination_reason"] == "max_steps"
    assert len(result["observation"]) == 1  # the last tool result is still delivered
    assert result["reward"] == pytest.approx(0.9)
    trajectory = Trajectory.objects.get(pk=result["info"]["trajectory"])
    # It ends on a tool result, so the rules flag it; the judge's reward is kept beside.
    assert trajectory.status == TrajectoryStatus.RULES_FAILED
    assert trajectory.violations.filter(code="no_final_answer").exists()
    assert trajectory.termination_reason == "max_steps" and trajectory.reward == pytest.approx(0.9)


def test_max_steps_on_a_text_turn_does_not_ask_the_user(shop, script, curator, llm_stub):
    env_id = create(curator, shop["tasks"][0], max_steps=1)
    result = post_step(curator, env_id, {"content": "Hello, how can I help?"}).json()
    assert result["termination_reason"] == "max_steps" and result["observation"] == []
    assert llm_stub.stage_requests("user_simulator") == []


def test_max_errors_ends_the_episode(shop, script, curator):
    env_id = create(curator, shop["tasks"][0], max_errors=2)
    assert post_step(curator, env_id, tool_call("teleport", "{}", "c1")).json()["done"] is False
    result = post_step(curator, env_id, tool_call("cancel_order", "oops", "c2")).json()
    assert result["done"] is True and result["termination_reason"] == "max_errors"
    assert result["info"]["errors"] == 2


def test_token_budget_ends_the_episode(shop, script, curator):
    env_id = create(curator, shop["tasks"][0], token_budget=150)
    first = post_step(curator, env_id, CANCEL).json()
    # The stub bills 100 prompt tokens plus a quarter of the answer's length per call.
    assert first["done"] is False and 100 < first["info"]["tokens_used"] < 150
    result = post_step(curator, env_id, {**CANCEL, "tool_calls": [{**CANCEL["tool_calls"][0], "id": "call_2"}]}).json()
    assert result["done"] is True and result["termination_reason"] == "token_budget"
    assert result["info"]["tokens_used"] >= 150
    assert Trajectory.objects.get(kind=TrajectoryKind.RL).termination_reason == "token_budget"


def test_stepping_a_finished_episode_is_a_409(shop, script, curator):
    env_id = create(curator, shop["tasks"][0])
    assert post_step(curator, env_id, {"content": "Done."}).json()["done"] is True
    response = post_step(curator, env_id, {"content": "Anything else?"})
    assert response.status_code == 409 and response.json()["error"] == "episode_finished"
    assert Trajectory.objects.filter(kind=TrajectoryKind.RL).count() == 1


def test_auth(shop, script, api_for, curator):
    env_id = create(curator, shop["tasks"][0])
    body = {"task": shop["tasks"][0].pk}
    anonymous, bad = api_for(), api_for(token="not-a-real-token")
    for client in (anonymous, bad):
        assert client.post(URL, body, format="json").status_code == 401
        assert post_step(client, env_id, {"content": "hi"}).status_code == 401
        assert client.get(f"{URL}{env_id}").status_code == 401
    annotator = api_for("annotator")
    assert annotator.post(URL, body, format="json").status_code == 403
    assert post_step(annotator, env_id, {"content": "hi"}).status_code == 403
    assert annotator.get(f"{URL}{env_id}").status_code == 403
    # Sessions are private to their creator; admins see all of them.
    assert api_for("admin").get(f"{URL}{env_id}").status_code == 200
    assert curator.get(f"{URL}00000000-0000-0000-0000-000000000000").status_code == 404
    assert EnvSession.objects.get(pk=env_id).step_count == 0


def test_sessions_of_other_curators_are_not_found(shop, script, curator, api_for):
    other = user_create(username="curator2", role="curator", password=PASSWORD)
    env_id = create(curator, shop["tasks"][0])
    other_client = api_for(token=user_token(user=other))
    assert other_client.get(f"{URL}{env_id}").status_code == 404
    assert post_step(other_client, env_id, {"content": "hi"}).status_code == 404
