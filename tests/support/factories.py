"""Rows for page tests: trajectories with judge verdicts and rule violations."""

import itertools
import json

from simia_web.catalog.services import domain_ensure
from simia_web.curation.services import trajectory_create
from simia_web.formats.conversation import Violation
from simia_web.jobs.models import Job, JobStatus

_counter = itertools.count(1)


def conversation(text: str = "Please cancel order W1.", answer: str = "Order W1 is cancelled.") -> list[dict]:
    return [
        {"role": "system", "content": "You are a retail agent."},
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "cancel_order", "arguments": json.dumps({"order_id": "W1"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"status": "cancelled"})},
        {"role": "assistant", "content": answer},
    ]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "cancel_order",
            "description": "Cancel an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]


CANCEL_PATCH = [{"op": "replace", "path": "/orders/W1/status", "value": "cancelled"}]


def verdict(passed=True, score=0.9, confidence=0.8, scores=None, cited=None, rationale="Looks right."):
    return {
        "passed": passed,
        "scores": scores or {"task_completed": score, "tool_use_correct": score},
        "score": score,
        "confidence": confidence,
        "rationale": rationale,
        "cited_messages": cited if cited is not None else [2],
        "model": "stub-model",
    }


def make_trajectory(domain="shop", *, judge=None, violations=(), messages=None, job=None, steps=None, **fields):
    d = domain_ensure(name=domain)
    initial = {"orders": {"W1": {"status": "pending"}}}
    after = {"orders": {"W1": {"status": "cancelled"}}}
    return trajectory_create(
        violations=[Violation(code, 2, f"{code} detail") for code in violations],
        verdict=judge,
        kind="rollout",
        domain=d,
        job=job,
        messages=messages or conversation(f"Please cancel order W1 ({next(_counter)})."),
        tools=TOOLS,
        initial_state=initial,
        final_state=after,
        steps=steps if steps is not None else {"3": {"patch": CANCEL_PATCH, "state_after": after}},
        **fields,
    )


def make_job(status=JobStatus.RUNNING, kind="rollout"):
    return Job.objects.create(kind=kind, status=status, params={"domain": "shop", "rollouts": 1}, stage="rollout")


def assign_to_vote(trajectory_ids, annotators, *, rule: str, overlap: int | None = None, workspace=None) -> dict:
    """Hand the items to the annotators (each to `overlap` of them, all by default) under a consensus `rule`, in
    `workspace` (the default one when None), as a curator's assignment batch does; returns its counts."""
    from simia_web.accounts.models import Workspace
    from simia_web.calibration.services import assignments_create

    return assignments_create(
        trajectory_ids=list(trajectory_ids),
        annotators=list(annotators),
        overlap=overlap or len(annotators),
        actor=None,
        selection={},
        workspace=workspace or Workspace.objects.get(slug="default"),
        consensus=rule,
    )
