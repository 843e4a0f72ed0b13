"""The LLM judge: per-criterion scores, pass/fail, rationale and the messages it relied on."""

import json

from simia_web.llm.client import LLMClient, LLMError
from simia_web.llm.models import Stage

PROMPT_VERSION = "judge-v2"  # v2: the world state and its changes are part of the evidence
CRITERIA = ("task_completed", "tool_use_correct", "simulator_consistent", "policy_followed", "final_answer_grounded")
PASS_THRESHOLD = 0.7

SCHEMA = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "object",
            "properties": {c: {"type": "number", "minimum": 0, "maximum": 1} for c in CRITERIA},
            "required": list(CRITERIA),
        },
        "passed": {"type": "boolean"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "rationale": {"type": "string"},
        "cited_messages": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    },
    "required": ["scores", "passed", "confidence", "rationale", "cited_messages"],
}


# Larger evidence is left out of the prompt, so that the conversation itself always fits.
STATE_CHARS_SHOWN = 20_000
CHANGES_CHARS_SHOWN = 20_000


def world_evidence(initial_state: dict, steps: dict[str, dict]) -> dict:
    """The explicit world state the simulator worked on: the state it started from and, per tool message
    (by index), the JSON Patch its answer made and any error applying it. Calls refused before reaching
    the simulator are left out: their tool message already says why."""
    shown = json.dumps(initial_state, ensure_ascii=False)
    changes, size = {}, 0
    for index, step in steps.items():
        if not isinstance(step, dict) or step.get("rejected") or not (step.get("patch") or step.get("errors")):
            continue
        change = {"patch": step.get("patch") or [], **({"errors": step["errors"]} if step.get("errors") else {})}
        size += len(json.dumps(change, ensure_ascii=False))
        if size > CHANGES_CHARS_SHOWN:
            changes[index] = "(this and later changes not shown: too large)"
            break
        changes[index] = change
    return {
        "initial_state": initial_state if len(shown) <= STATE_CHARS_SHOWN else f"(not shown: {len(shown)} characters)",
        "state_changes": changes,
    }


def judge_messages(
    *, messages: list[dict], tools: list[dict], task: str, policy: str, world: dict | None = None
) -> list[dict]:
    numbered = [{"index": i, **m} for i, m in enumerate(messages)]
    evidence = {"task": task, "policy": policy[:6000], "tools": tools, "conversation": numbered, **(world or {})}
    return [
        {
            "role": "system",
            "content": "You are a strict reviewer of tool-calling agent conversations used as training data. "
            "Score each criterion from 0 to 1: " + ", ".join(CRITERIA) + ". A conversation passes only if the "
            "task was completed correctly, tools were used with valid arguments, tool results are consistent with "
            "each other and with the world state (when given: the initial state and each tool message's state "
            "changes, with any error applying them), the policy was followed and the final answer is grounded in "
            "tool results. Cite the indices of the messages that decided your verdict.",
        },
        {"role": "user", "content": json.dumps(evidence, ensure_ascii=False)},
    ]


def judge_run(
    *, client: LLMClient, messages: list[dict], tools: list[dict], task: str, policy: str, world: dict | None = None
) -> dict:
    """A verdict dict for curation.services.trajectory_create; an LLM failure becomes a verdict with `error`.

    `world` (see world_evidence) lets the judge check the simulator against the explicit state."""
    assert client.stage == Stage.JUDGE
    try:
        reply = client.structured(
            messages=judge_messages(messages=messages, tools=tools, task=task, policy=policy, world=world),
            schema=SCHEMA,
            schema_name="judge_verdict",
            prompt_version=PROMPT_VERSION,
        )
    except LLMError as exc:
        return {
            "passed": None,
            "scores": {},
            "score": None,
            "confidence": None,
            "rationale": "",
            "cited_messages": [],
            "error": str(exc)[:2000],
            "profile": client.profile,
            "model": client.profile.model,
        }
    answer = reply.data
    scores = answer["scores"]
    score = sum(scores[c] for c in CRITERIA) / len(CRITERIA)
    cited = [i for i in answer["cited_messages"] if i < len(messages)]
    return {
        # The judge's own flag is overruled by a low average: both must agree to pass.
        "passed": bool(answer["passed"]) and score >= PASS_THRESHOLD,
        "scores": scores,
        "score": round(score, 4),
        "confidence": answer["confidence"],
        "rationale": answer["rationale"],
        "cited_messages": cited,
        "profile": client.profile,
        "model": client.profile.model,
        "llm_call": reply.last_call,
    }
