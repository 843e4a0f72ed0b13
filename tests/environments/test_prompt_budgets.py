"""Judge and user-simulator prompts fit the prompt budget, and say what was cut."""

import json

from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.simulation.judge import judge_messages, world_evidence
from simia_web.simulation.user_simulator import user_turn
from tests.support.llm_stub import Reply

BUDGET = 14_000


def long_conversation(turns: int = 150) -> list[dict]:
    messages = [{"role": "system", "content": "policy " * 2000}, {"role": "user", "content": "Help me with W1."}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "detail " * 300})
        messages.append({"role": "user", "content": f"Question {i}?"})
    return messages


def test_the_judge_prompt_fits_keeps_the_opening_and_the_end_and_lists_the_cuts():
    messages = long_conversation()
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "x" * 500}} for i in range(40)]
    state = {"orders": {f"W{i}": {"status": "pending"} for i in range(3000)}}
    world = world_evidence(state, {"3": {"patch": [{"op": "replace", "path": "/orders/W1/status", "value": "x"}]}})
    policy = "p" * 50_000
    prompt = judge_messages(messages=messages, tools=tools, task="W1", policy=policy, world=world, budget=BUDGET)
    assert sum(len(m["content"]) for m in prompt) <= BUDGET
    evidence = json.loads(prompt[1]["content"])
    indices = [m["index"] for m in evidence["conversation"]]
    assert indices[:2] == [0, 1] and indices[-1] == len(messages) - 1
    assert any("left out" in note for note in evidence["cut"])
    assert "tools shown by name only (40 of 40)" in evidence["cut"]


def test_the_user_simulator_prompt_fits_its_budget(llm_stub):
    llm_stub.responder = lambda request: Reply(content={"message": "ok", "done": False})
    client = client_for_stage(Stage.USER_SIMULATOR)
    user_turn(client=client, brief="You want W1 cancelled. " * 500, messages=long_conversation())
    [request] = llm_stub.requests
    sent = request.body["messages"]
    assert sum(len(m["content"]) for m in sent) <= client.prompt_chars_available()
    transcript = json.loads(sent[-1]["content"])
    assert transcript["cut"] and transcript["conversation"][-1]["content"].startswith("Question 149")
