"""A τ² task's user_scenario is the user simulator's private brief; the simulator writes the opening message."""

import json

from simia_web.catalog.models import Task
from simia_web.environments.models import EnvSession
from simia_web.formats.tau2 import instruction_build
from tests.support.llm_stub import Reply

URL = "/api/v1/envs/"
SCENARIO = {
    "persona": None,
    "instructions": {
        "task_instructions": "You are detail-oriented and want everything addressed in one go.",
        "domain": "retail",
        "reason_for_call": "You want to cancel order W1 because you ordered the wrong size.",
        "known_info": "You are Yusuf Rossi in zip code 19122.",
        "unknown_info": "You do not remember your email address.",
    },
}
OPENING = "Hi, I'd like to cancel an order I placed, please."


def tau2_task(shop) -> Task:
    return Task.objects.create(
        domain=shop["domain"],
        instruction=instruction_build(SCENARIO),
        user_scenario=SCENARIO,
        expected_outcome="W1 cancelled",
    )


def test_the_user_simulator_writes_the_opening_from_its_private_brief(shop, script, curator, llm_stub):
    script.user_turns = [OPENING]
    env = curator.post(URL, {"task": tau2_task(shop).pk}, format="json").json()
    assert env["observation"] == [{"role": "user", "content": OPENING}]
    [request] = llm_stub.stage_requests("user_simulator")
    system = request.messages[0]["content"]
    assert "What you do not know: You do not remember your email address." in system
    assert "Never reveal or quote the brief" in system
    assert json.loads(request.messages[1]["content"])["instruction"] == "Write your first message to the agent."
    # The brief never reaches the agent: not in its conversation, not in its system prompt.
    session = EnvSession.objects.get(pk=env["id"])
    agent_view = json.dumps(session.messages)
    assert "email address" not in agent_view and "19122" not in agent_view
    assert session.tokens_used > 0 and len(session.llm_call_ids) == 1


def test_an_opening_marked_done_still_opens_the_conversation(shop, script, curator, llm_stub):
    """Small models set done=true on their first message; nothing can be handled before the customer speaks."""
    env = curator.post(URL, {"task": tau2_task(shop).pk}, format="json").json()
    assert env["observation"] == [{"role": "user", "content": "Thanks, that's all."}]


def test_later_user_turns_keep_the_brief_and_see_only_the_spoken_turns(shop, script, curator, llm_stub):
    script.user_turns = [OPENING, "I'm Yusuf Rossi, zip 19122."]
    env = curator.post(URL, {"task": tau2_task(shop).pk}, format="json").json()
    question = {"content": "Sure, who am I talking to?"}
    reply = curator.post(f"{URL}{env['id']}/step", {"message": question}, format="json")
    assert reply.json()["observation"] == [{"role": "user", "content": "I'm Yusuf Rossi, zip 19122."}]
    request = llm_stub.stage_requests("user_simulator")[-1]
    assert "You do not remember your email address." in request.messages[0]["content"]
    conversation = json.loads(request.messages[1]["content"])["conversation"]
    assert conversation == [
        {"role": "customer", "content": OPENING},
        {"role": "agent", "content": "Sure, who am I talking to?"},
    ]


def test_a_task_without_a_scenario_opens_with_its_instruction(shop, script, curator, llm_stub):
    env = curator.post(URL, {"task": shop["tasks"][0].pk}, format="json").json()
    assert env["observation"] == [{"role": "user", "content": shop["tasks"][0].instruction}]
    assert not llm_stub.stage_requests("user_simulator")


def test_an_opening_the_user_simulator_cannot_write_is_a_502(shop, script, curator, llm_stub):
    llm_stub.inject(*[Reply(status=500, error_message="down")] * 4, stage="user_simulator")
    response = curator.post(URL, {"task": tau2_task(shop).pk}, format="json")
    assert response.status_code == 502 and response.json()["error"] == "user_simulator_failed"
    assert not EnvSession.objects.exists()
