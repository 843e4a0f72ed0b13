"""Whole RL episodes over HTTP against the scripted LLM server."""

import pytest

from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.environments.models import EnvSession
from simia_web.llm.models import LLMCall

from .conftest import CANCEL

URL = "/api/v1/envs/"


def create(client, **body):
    response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def step(client, env_id, message):
    response = client.post(f"{URL}{env_id}/step", {"message": message}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_reset_returns_opening_tools_and_policy(shop, script, curator):
    task = shop["tasks"][1]
    env = create(curator, task=task.pk)
    assert env["observation"] == [{"role": "user", "content": task.instruction}]
    assert sorted(t["function"]["name"] for t in env["tools"]) == ["cancel_order", "get_order"]
    assert "Only pending orders can be cancelled." in env["system"]
    assert env["task"] == task.pk and env["group"] is None
    assert env["limits"] == {"max_steps": 30, "max_errors": 5, "token_budget": 200000, "max_tool_calls_per_step": 16}


def test_whole_episode_with_tool_call_user_turn_and_reward(shop, script, curator, llm_stub):
    script.user_turns = ["Can you also confirm the new status?"]
    env = create(curator, task=shop["tasks"][0].pk, max_steps=10)

    first = step(curator, env["id"], CANCEL)
    assert first["done"] is False and first["reward"] is None and first["termination_reason"] is None
    [tool] = first["observation"]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert '"cancelled"' in tool["content"]
    session = EnvSession.objects.get(pk=env["id"])
    assert session.state["orders"]["W1"]["status"] == "cancelled"
    assert session.steps["3"]["patch"][0]["path"] == "/orders/W1/status"

    second = step(curator, env["id"], {"content": "Your order W1 is cancelled."})
    assert second["done"] is False
    assert second["observation"] == [{"role": "user", "content": "Can you also confirm the new status?"}]

    last = step(curator, env["id"], {"role": "assistant", "content": "Yes: W1 now has the status cancelled."})
    assert last["done"] is True
    assert last["termination_reason"] == "user_done"
    assert last["observation"] == []
    assert last["reward"] == pytest.approx(0.9)
    assert set(last["info"]["reward_breakdown"]) == {
        "task_completed",
        "tool_use_correct",
        "simulator_consistent",
        "policy_followed",
        "final_answer_grounded",
    }
    assert last["info"]["judge"]["passed"] is True
    assert last["info"]["violations"] == []

    trajectory = Trajectory.objects.get(pk=last["info"]["trajectory"])
    assert trajectory.kind == TrajectoryKind.RL
    assert trajectory.status == TrajectoryStatus.JUDGED_PASS
    assert trajectory.reward == pytest.approx(0.9)
    assert trajectory.termination_reason == "user_done"
    assert [m["role"] for m in trajectory.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert trajectory.final_state["orders"]["W1"]["status"] == "cancelled"
    assert trajectory.initial_state["orders"]["W1"]["status"] == "pending"
    assert trajectory.verdicts.get().score == pytest.approx(0.9)
    assert trajectory.provenance["env_session"] == env["id"]
    assert set(trajectory.provenance["llm_calls"]) == set(LLMCall.objects.values_list("pk", flat=True))

    state = curator.get(f"{URL}{env['id']}").json()
    assert state["done"] is True and state["reward"] == pytest.approx(0.9)
    assert state["messages"] == 7 and state["steps"] == 3 and state["trajectory"] == trajectory.pk
    assert state["tokens_used"] == sum(c.tokens_in + c.tokens_out for c in LLMCall.objects.exclude(stage="judge"))
    session.refresh_from_db()
    assert session.trajectory_id == trajectory.pk and session.reward == pytest.approx(0.9)


def test_text_only_episode_ends_when_user_is_done(shop, script, curator):
    env = create(curator, task=shop["tasks"][0].pk)
    result = step(curator, env["id"], {"content": [{"type": "text", "text": "I cannot help with that."}]})
    assert result["done"] is True and result["termination_reason"] == "user_done"
    assert Trajectory.objects.get(kind="rl").status == TrajectoryStatus.JUDGED_PASS


def test_failed_judge_gives_no_reward_but_keeps_the_trajectory(shop, script, curator, llm_stub):
    from tests.support.llm_stub import Reply

    llm_stub.inject(*[Reply(status=500, error_message="down")] * 10, stage="judge")
    env = create(curator, task=shop["tasks"][0].pk)
    result = step(curator, env["id"], {"content": "Done."})
    assert result["done"] is True and result["reward"] is None
    assert "error" in result["info"]["judge"]
    assert Trajectory.objects.get(kind="rl").status == TrajectoryStatus.GENERATED


def test_group_members_share_one_task_and_seeds_are_reproducible(shop, script, curator, api_for):
    members = [create(curator, domain="shop", group="grpo-7") for _ in range(4)]
    assert len({m["task"] for m in members}) == 1
    assert {m["group"] for m in members} == {"grpo-7"}
    # Other members may name the group alone, from another account too.
    admin_member = create(api_for("admin"), group="grpo-7")
    assert admin_member["task"] == members[0]["task"]
    # A group cannot be re-pointed at another task.
    other = next(t for t in shop["tasks"] if t.pk != members[0]["task"])
    response = curator.post(URL, {"group": "grpo-7", "task": other.pk}, format="json")
    assert response.status_code == 400 and "plays task" in response.json()["detail"]

    picks = {create(curator, domain="shop", seed=s)["task"] for s in range(12)}
    assert len(picks) > 1  # sampling spreads over the valid tasks
    assert picks <= {t.pk for t in shop["tasks"]}  # never the rejected one
    assert create(curator, domain="shop", seed=5)["task"] == create(curator, domain="shop", seed=5)["task"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, "give a task id"),
        ({"domain": "nowhere"}, "no domain"),
        ({"task": 999999}, "no task"),
        ({"group": "fresh"}, "needs a task or a domain"),
    ],
)
def test_create_rejects_what_cannot_be_played(shop, script, curator, body, detail):
    response = curator.post(URL, body, format="json")
    assert response.status_code == 400
    assert detail in response.json()["detail"]


def test_create_rejects_invalid_task_and_bad_limits(shop, script, curator):
    from simia_web.catalog.models import TaskStatus

    rejected = shop["domain"].tasks.get(status=TaskStatus.REJECTED)
    assert curator.post(URL, {"task": rejected.pk}, format="json").status_code == 400
    response = curator.post(URL, {"task": shop["tasks"][0].pk, "max_steps": 0}, format="json")
    assert response.status_code == 400 and "max_steps" in response.json()


def test_user_simulator_failure_ends_with_llm_error(shop, script, curator, llm_stub):
    from tests.support.llm_stub import Reply

    llm_stub.inject(*[Reply(status=500, error_message="down")] * 10, stage="user_simulator")
    env = create(curator, task=shop["tasks"][0].pk)
    result = step(curator, env["id"], {"content": "Is there anything else?"})
    assert result["done"] is True and result["termination_reason"] == "llm_error"
    assert result["reward"] == pytest.approx(0.9)  # the judge still scores what happened
    assert curator.get(f"{URL}{env['id']}").json()["termination_reason"] == "llm_error"


def test_a_domain_with_an_invalid_world_state_cannot_be_played(shop, script, curator):
    domain = shop["domain"]
    domain.state_errors = ["initial state breaks the state schema at orders: 'orders' is a required property"]
    domain.save()
    response = curator.post(URL, {"task": shop["tasks"][0].pk}, format="json")
    assert response.status_code == 400 and "invalid world state" in response.json()["detail"]


def test_a_simulator_without_an_answer_is_a_violation_and_the_judge_sees_the_state(shop, script, curator, llm_stub):
    from tests.support.llm_stub import Reply

    llm_stub.inject(*[Reply(content="not json")] * 10, stage="simulator")
    env = create(curator, task=shop["tasks"][0].pk)
    [tool] = step(curator, env["id"], CANCEL)["observation"]
    assert "temporarily unavailable" in tool["content"]
    result = step(curator, env["id"], {"content": "Your order W1 is cancelled."})
    assert result["done"] is True
    trajectory = Trajectory.objects.get(kind="rl")
    assert trajectory.status == TrajectoryStatus.RULES_FAILED
    assert [(v.code, v.message_index) for v in trajectory.violations.all()] == [("simulator_failed", 3)]
    evidence = llm_stub.stage_requests("judge")[0].user_payload()
    assert evidence["initial_state"] == shop["domain"].initial_state
    assert "simulator failed" in evidence["state_changes"]["3"]["errors"][0]
