"""Small canonical trajectories for API and export tests."""

from simia_web.catalog.models import Domain, Task
from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


def conversation(order: str = "W1", *, extra_assistant: bool = False) -> list[dict]:
    messages = [
        {"role": "system", "content": "You are a shop assistant."},
        {"role": "user", "content": f"Where is order {order}?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": f'{{"order_id": "{order}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": f"Order {order} has shipped."},
    ]
    if extra_assistant:
        messages.append({"role": "assistant", "content": "Anything else?"})
    return messages


def domain_make(name: str = "shop") -> Domain:
    return Domain.objects.get_or_create(name=name, defaults={"policy": "Be helpful."})[0]


def task_make(domain: Domain, external_id: str = "") -> Task:
    return Task.objects.create(
        domain=domain,
        external_id=external_id,
        instruction="Ask where order W1 is.",
        expected_outcome="The user learns W1 shipped.",
        expected_actions=[{"name": "get_order", "arguments": {"order_id": "W1"}}],
    )


def trajectory_make(
    domain: Domain, *, status=TrajectoryStatus.ACCEPTED, messages=None, task=None, score=0.9, **fields
) -> Trajectory:
    return Trajectory.objects.create(
        kind=fields.pop("kind", TrajectoryKind.ROLLOUT),
        status=status,
        domain=domain,
        task=task,
        messages=messages if messages is not None else conversation(),
        tools=TOOLS,
        judge_passed=None if score is None else score >= 0.5,
        judge_score=score,
        termination_reason="final_answer",
        **fields,
    )
