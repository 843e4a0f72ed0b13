"""Scripted LLM behaviour for a whole domain-first job: valid APIs, tasks, agent turns, simulator, judge."""

import json

from simia_web.synthesis.generation import domain_design

from .llm_stub import Reply, Request

# The API-synthesis answer, in the lists the request asks for; SHOP is what the catalog makes of it.
APIS = {
    "apis": [
        {
            "name": "get_order",
            "description": "Look up an order by id.",
            "kind": "read",
            "parameters": [{"name": "order_id", "type": "string", "description": "The order's id.", "required": True}],
            "returns": [{"name": "status", "type": "string", "description": "The order's status."}],
            "touches": ["orders"],
        },
        {
            "name": "cancel_order",
            "description": "Cancel a pending order.",
            "kind": "write",
            "parameters": [
                {"name": "order_id", "type": "string", "description": "The order's id.", "required": True},
                {"name": "reason", "type": "string", "description": "Why it is cancelled.", "required": True},
            ],
            "returns": [{"name": "status", "type": "string", "description": "The order's new status."}],
            "touches": ["orders"],
        },
        {
            "name": "BadName",
            "description": "An invalid API the validator must reject.",
            "kind": "read",
            "parameters": [],
        },
    ],
    "collections": [{"name": "orders", "description": "Orders by id."}],
    "records": [
        {"collection": "orders", "id": "W1", "fields": [{"name": "status", "value": "pending"}]},
        {"collection": "orders", "id": "W2", "fields": [{"name": "status", "value": "delivered"}]},
    ],
}
SHOP = domain_design(APIS)


def tasks_answer(count: int) -> dict:
    tasks = [
        {
            "instruction": f"Please cancel my order W1, reason number {i}: I ordered the wrong size by mistake {i}.",
            "apis_needed": ["get_order", "cancel_order"],
            "expected_outcome": "W1 is cancelled",
            "difficulty": "easy",
        }
        for i in range(count)
    ]
    tasks.append(
        {
            "instruction": "Teleport my parcel.",
            "apis_needed": ["teleport"],
            "expected_outcome": "-",
            "difficulty": "hard",
        }
    )
    return {"tasks": tasks}


JUDGE_PASS = {
    "scores": {
        c: 0.9
        for c in (
            "task_completed",
            "tool_use_correct",
            "simulator_consistent",
            "policy_followed",
            "final_answer_grounded",
        )
    },
    "passed": True,
    "confidence": 0.8,
    "rationale": "Cancelled as asked.",
    "cited_messages": [2, 4],
}


def agent_reply(request: Request) -> Reply:
    last = request.messages[-1]
    if last.get("role") == "tool" or (last.get("role") == "user" and "[tool result" in (last.get("content") or "")):
        return Reply(content="Your order W1 has been cancelled.")
    return Reply(tool_calls=[{"name": "cancel_order", "arguments": {"order_id": "W1", "reason": "wrong size"}}])


def simulator_reply(request: Request) -> Reply:
    payload = request.user_payload()
    if isinstance(payload, dict) and (payload.get("api") or {}).get("kind") == "read":
        return Reply(content={"response": {"order_id": "W1", "status": "pending"}, "patch": []})
    return Reply(
        content={
            "response": {"order_id": "W1", "status": "cancelled"},
            "patch": [{"op": "replace", "path": "/orders/W1/status", "value": "cancelled"}],
        }
    )


def probe_reply(request: Request) -> Reply:
    """What a capable model answers the capability probe: the weather tool called, the probe's schema followed."""
    if request.body.get("tools"):
        return Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
    if '"colour"' in json.dumps(request.body):
        return Reply(content={"colour": "teal", "count": 1})
    return Reply(status=500, error_message="no script for this request")


def pipeline_responder():
    def respond(request: Request) -> Reply:
        stage = request.stage
        if stage == "api_synthesis":
            return Reply(content=APIS)
        if stage == "task_synthesis":
            return Reply(content=tasks_answer(request.user_payload()["number_of_tasks"]))
        if stage == "agent":
            return agent_reply(request)
        if stage == "simulator":
            return simulator_reply(request)
        if stage == "judge":
            return Reply(content=JUDGE_PASS)
        if stage == "user_simulator":
            return Reply(content={"message": "Thanks, that's all.", "done": True})
        if not stage:  # the capability probe ("Test" on the LLM endpoints page) names no stage
            return probe_reply(request)
        return Reply(status=500, error_message=f"no script for stage {stage!r}")

    return respond
