"""The LLM judge: per-criterion scores, pass/fail, rationale and the messages it relied on."""

import json
import math

from simia_web.core.errors import ValidationFailed
from simia_web.core.jsonutil import compact_json
from simia_web.llm.client import LLMClient, LLMError
from simia_web.llm.models import Stage

from .prompt_fit import json_size, messages_fit, text_clip, tools_fit

PROMPT_VERSION = "judge-v4"  # v4: scores asked on a grid of tenths, texts and lists bounded
# The same prompt with a rubric per criterion, so a calibration run can show whether spelling them out helps.
RUBRIC_PROMPT_VERSION = "judge-v4-rubric"
CRITERIA = ("task_completed", "tool_use_correct", "simulator_consistent", "policy_followed", "final_answer_grounded")
PASS_THRESHOLD = 0.7
# The scale of every criterion, for the judge and for people rating by hand: tenths from 0 to 1.
GRADES = tuple(tenth / 10 for tenth in range(11))
# What each criterion asks; shown to annotators beside their ratings and, in the rubric prompt, to the judge.
CRITERION_QUESTIONS = {
    "task_completed": "Did the conversation achieve the task's expected outcome?",
    "tool_use_correct": "Were the right tools called, with arguments valid for their schemas and the request?",
    "simulator_consistent": "Are the tool results consistent with each other and with the world state?",
    "policy_followed": "Did the agent follow the domain policy (confirmations, refusals, limits)?",
    "final_answer_grounded": "Is the final answer supported by the tool results, with nothing invented?",
}

# What an answer must be.
ANSWER = {
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
        "cited_messages": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["scores", "passed", "confidence", "rationale", "cited_messages"],
}
# What the server is asked for: scores on a grid of tenths and bounded texts and lists, which a grammar
# (llama.cpp) can hold a model to; it cannot hold a number between a minimum and a maximum.
_GRADE = {"type": "number", "enum": list(GRADES)}
SCHEMA = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "object",
            "properties": dict.fromkeys(CRITERIA, _GRADE),
            "required": list(CRITERIA),
            "additionalProperties": False,
        },
        "passed": {"type": "boolean"},
        "confidence": _GRADE,
        "rationale": {"type": "string", "minLength": 1, "maxLength": 1000},
        "cited_messages": {"type": "array", "items": {"type": "integer"}, "maxItems": 20},
    },
    "required": ["scores", "passed", "confidence", "rationale", "cited_messages"],
    "additionalProperties": False,
}


def grades_clean(scores: object, *, field: str = "scores") -> dict[str, float]:
    """People's {criterion: grade} on the judge's scale, each grade a float of GRADES; a criterion given no value
    (None or "") is left out, so the result may be empty. A refusal names the criterion at fault."""
    if not isinstance(scores, dict):
        raise ValidationFailed("an object of {criterion: grade}", field)
    unknown = sorted(f"{c!s:.40}" for c in scores if c not in CRITERIA)[:5]
    if unknown:
        raise ValidationFailed(f"no criterion named {', '.join(unknown)}; criteria: {', '.join(CRITERIA)}", field)
    clean = {}
    for criterion, value in scores.items():
        if value is None or value == "":
            continue
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        grade = round(number, 1) if math.isfinite(number) and not isinstance(value, bool) else math.nan
        if grade not in GRADES or abs(grade - number) > 1e-9:
            raise ValidationFailed(f"{criterion}: a number from 0 to 1 in tenths, not {value!r:.40}", field)
        clean[criterion] = grade
    return clean


SYSTEM = (
    "You are a strict reviewer of tool-calling agent conversations used as training data. Score each criterion "
    "from 0 to 1: " + ", ".join(CRITERIA) + ". A conversation passes only if the task was completed correctly, "
    "tools were used with valid arguments, tool results are consistent with each other and with the world state "
    "(when given: the initial state and each tool message's state changes, with any error applying them), the "
    "policy was followed and the final answer is grounded in tool results. Cite the indices of the messages that "
    "decided your verdict. Parts listed under `cut` were left out for length: do not penalise what you cannot see."
)
RUBRIC = (
    " Criteria: "
    + " ".join(f"{name}: {question}" for name, question in CRITERION_QUESTIONS.items())
    + (" 1 means fully, 0.5 partly, 0 not at all.")
)
# The judge's instructions per prompt version.
PROMPTS = {PROMPT_VERSION: SYSTEM, RUBRIC_PROMPT_VERSION: SYSTEM + RUBRIC}

# Larger evidence is left out of the prompt, so that the conversation itself always fits.
STATE_CHARS_SHOWN = 20_000
CHANGES_CHARS_SHOWN = 20_000


def world_evidence(initial_state: dict, steps: dict[str, dict]) -> dict:
    """The explicit world state the simulator worked on: the state it started from and, per tool message
    (by index), the JSON Patch its answer made and any error applying it. Calls refused before reaching
    the simulator are left out: their tool message already says why."""
    shown = json.dumps(initial_state, ensure_ascii=False)
    changes: dict[str, object] = {}
    size = 0
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


def _world_fit(world: dict, room: int, cut: list[str]) -> dict:
    """The world evidence within `room` characters: the state changes first, then the initial state."""
    changes: dict[str, object] = {}
    shown = 0
    for index, change in (world.get("state_changes") or {}).items():
        size = json_size(change) + 10
        if shown + size > room:
            cut.append(f"state changes from tool message {index} on left out")
            break
        changes[index], shown = change, shown + size
    fitted: dict[str, object] = {"state_changes": changes}
    initial = world.get("initial_state")
    if json_size(initial) <= room - shown:
        fitted["initial_state"] = initial
    else:
        cut.append("initial state left out")
        fitted["initial_state"] = f"(not shown: {json_size(initial)} characters)"
    return fitted


def judge_messages(
    *,
    messages: list[dict],
    tools: list[dict],
    task: str,
    policy: str,
    world: dict | None = None,
    budget: int,
    prompt_version: str = PROMPT_VERSION,
) -> list[dict]:
    """The judge's prompt within `budget` characters; what had to be cut is listed in its `cut` field.

    The conversation comes first (half the budget, its opening and its latest turns kept); the task, the
    policy and the tools an eighth each (tools shown as names and descriptions when their schemas do not
    fit); the world evidence what is left."""
    cut: list[str] = []
    tools = tools_fit(tools, budget // 8, cut)
    # The agent's system prompt repeats the policy, which is given once below.
    conversation = [
        {"role": "system", "content": "(the agent's instructions and the policy below)"}
        if i == 0 and m.get("role") == "system"
        else m
        for i, m in enumerate(messages)
    ]
    numbered, conversation_cut = messages_fit(conversation, budget // 2, keep_first=2)
    evidence = {
        "task": text_clip(task, budget // 8),
        "policy": text_clip(policy, budget // 8),
        "tools": tools,
        "conversation": numbered,
    }
    cut += conversation_cut
    system = PROMPTS[prompt_version]
    if world:
        evidence.update(_world_fit(world, budget - json_size(evidence) - len(system) - 300, cut))
    if cut:
        evidence["cut"] = cut
    return [{"role": "system", "content": system}, {"role": "user", "content": compact_json(evidence)}]


def judge_run(
    *,
    client: LLMClient,
    messages: list[dict],
    tools: list[dict],
    task: str,
    policy: str,
    world: dict | None = None,
    prompt_version: str = PROMPT_VERSION,
) -> dict:
    """A verdict dict for curation.services.trajectory_create; an LLM failure becomes a verdict with `error`.

    `world` (see world_evidence) lets the judge check the simulator against the explicit state; `prompt_version`
    (a key of PROMPTS) picks its instructions."""
    assert client.stage == Stage.JUDGE
    try:
        reply = client.structured(
            messages=judge_messages(
                messages=messages,
                tools=tools,
                task=task,
                policy=policy,
                world=world,
                budget=client.prompt_chars_available(SCHEMA),
                prompt_version=prompt_version,
            ),
            schema=SCHEMA,
            schema_name="judge_verdict",
            accept=ANSWER,
            prompt_version=prompt_version,
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
    cited = [i for i in answer["cited_messages"] if 0 <= i < len(messages)]
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
