"""RL environment sessions: reset (create), step, abandon, and the end of an episode (reward and stored trajectory).

A step rebuilds a synthesis Episode from the stored session, lets it answer the agent's message (tool
calls through the simulator with explicit state and JSON Patch, text through the user simulator) and
writes the result back while the session row is locked, so two steps on one session never interleave.
"""

import json
import random
import uuid

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.catalog.selectors import domain_unusable_reason
from simia_web.curation.models import TrajectoryKind
from simia_web.curation.services import trajectory_create
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.synthesis.episode import Episode
from simia_web.synthesis.judge import judge_run, world_evidence
from simia_web.synthesis.rollout import episode_start
from simia_web.synthesis.rules import rules_check, simulator_failures

from . import selectors
from .models import (
    DEFAULT_MAX_ERRORS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOKEN_BUDGET,
    EnvGroup,
    EnvSession,
    TerminationReason,
)

LIMIT_RANGES = {"max_steps": (1, 100), "max_errors": (1, 100), "token_budget": (1, 100_000_000)}


class EnvError(Exception):
    """A request the environment refuses; `status` and `code` become the HTTP answer."""

    status = 400
    code = "invalid_request"

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(detail)


class EnvInputError(EnvError):
    code = "invalid_message"


class EnvNotFound(EnvError):
    status = 404
    code = "not_found"


class EnvFinished(EnvError):
    status = 409
    code = "episode_finished"


class EnvConflict(EnvError):
    status = 409
    code = "concurrent_step"


# -- reset -----------------------------------------------------------------------------------------


def _limit(name: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    low, high = LIMIT_RANGES[name]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise EnvError(f"{name} must be a whole number from {low} to {high}")
    return value


def _task_pick(*, task_id: int | None, domain_name: str | None, seed: int | None) -> Task:
    if task_id is not None:
        task = Task.objects.select_related("domain").filter(pk=task_id).first()
        if task is None:
            raise EnvError(f"no task with id {task_id}")
        if task.status != TaskStatus.VALID:
            raise EnvError(f"task {task_id} is {task.status}, not valid")
        if domain_name and task.domain.name != domain_name:
            raise EnvError(f"task {task_id} belongs to domain {task.domain.name!r}, not {domain_name!r}")
        return task
    domain = Domain.objects.filter(name=domain_name or "").first()
    if domain is None:
        raise EnvError(f"no domain named {domain_name!r}")
    ids = selectors.playable_task_ids(domain=domain)
    if not ids:
        raise EnvError(f"domain {domain.name!r} has no valid tasks")
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    return Task.objects.select_related("domain").get(pk=rng.choice(ids))


def _group_join(*, key: str, task_id: int | None, domain_name: str | None, seed: int | None, actor) -> EnvGroup:
    """The group's task: the first create picks it (race-safe through the unique key), the rest reuse it."""
    group = EnvGroup.objects.select_related("task__domain").filter(key=key).first()
    if group is None:
        if task_id is None and not domain_name:
            raise EnvError(f"no group {key!r} yet: the first create of a group needs a task or a domain")
        task = _task_pick(task_id=task_id, domain_name=domain_name, seed=seed)
        try:
            with transaction.atomic():
                return EnvGroup.objects.create(key=key, domain=task.domain, task=task, created_by=actor)
        except IntegrityError:  # another member of the group was created first: use its task
            group = EnvGroup.objects.select_related("task__domain").get(key=key)
    if task_id is not None and task_id != group.task_id:
        raise EnvError(f"group {key!r} plays task {group.task_id}, not {task_id}")
    if domain_name and domain_name != group.task.domain.name:
        raise EnvError(f"group {key!r} plays domain {group.task.domain.name!r}, not {domain_name!r}")
    return group


@transaction.atomic
def env_create(
    *,
    actor,
    task_id: int | None = None,
    domain_name: str | None = None,
    seed: int | None = None,
    group_key: str = "",
    max_steps: int | None = None,
    max_errors: int | None = None,
    token_budget: int | None = None,
) -> EnvSession:
    """Start an episode: pick the task, snapshot tools and state, and open with the user's message."""
    limits = {
        "max_steps": _limit("max_steps", max_steps, DEFAULT_MAX_STEPS),
        "max_errors": _limit("max_errors", max_errors, DEFAULT_MAX_ERRORS),
        "token_budget": _limit("token_budget", token_budget, DEFAULT_TOKEN_BUDGET),
    }
    if task_id is None and not domain_name and not group_key:
        raise EnvError("give a task id, a domain name or a group key")
    group = None
    if group_key:
        group = _group_join(key=group_key, task_id=task_id, domain_name=domain_name, seed=seed, actor=actor)
        task = group.task
    else:
        task = _task_pick(task_id=task_id, domain_name=domain_name, seed=seed)
    domain = task.domain
    if reason := domain_unusable_reason(domain):
        raise EnvError(reason)
    apis = selectors.domain_apis(domain=domain)
    if not apis:
        raise EnvError(f"domain {domain.name!r} has no valid APIs")
    # The same opening as a rollout: system prompt with the policy, then the task instruction as the user.
    episode = episode_start(domain=domain, task=task, apis=apis, simulator=None)
    return EnvSession.objects.create(
        domain=domain,
        task=task,
        group=group,
        tools=episode.tools,
        api_specs=episode.apis,
        initial_state=episode.initial_state,
        state=episode.state,
        messages=episode.messages,
        created_by=actor,
        **limits,
    )


def session_opening(*, session: EnvSession) -> dict:
    """The reset answer: what an agent needs to start acting."""
    return {
        "id": str(session.pk),
        "observation": [m for m in session.messages if m["role"] == "user"][:1],
        "tools": session.tools,
        "system": session.messages[0]["content"],
        "task": session.task_id,
        "domain": session.domain.name,
        "group": session.group.key if session.group else None,
        "limits": session.limits,
    }


# -- step ------------------------------------------------------------------------------------------


def _has_nul(value) -> bool:
    """PostgreSQL JSON cannot store U+0000 in strings; such input is refused rather than crashing the write."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def message_clean(*, payload) -> dict:
    """The agent's assistant message in canonical form, or EnvInputError for a body of the wrong shape.

    Bad tool calls (unknown tool, arguments that are not a JSON object, schema violations) are not
    shape errors: the episode answers them with an error tool message the agent can learn from.
    """
    if not isinstance(payload, dict):
        raise EnvInputError('the body must be a JSON object {"message": {...}}')
    if "message" not in payload:
        raise EnvInputError('"message" is missing: send {"message": <assistant message>}')
    message = payload["message"]
    if not isinstance(message, dict):
        raise EnvInputError('"message" must be an object with "content" and/or "tool_calls"')
    if _has_nul(message):
        raise EnvInputError('"message" contains a NUL character (\\u0000), which cannot be stored')
    if message.get("role", "assistant") != "assistant":
        raise EnvInputError('"message.role" must be "assistant"')
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise EnvInputError('"message.content" must be a string, a list of content parts or null')
    if isinstance(content, list) and not all(isinstance(part, dict) for part in content):
        raise EnvInputError('"message.content" parts must be objects like {"type": "text", "text": ...}')
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise EnvInputError('"message.tool_calls" must be a list')
    calls = []
    for i, call in enumerate(raw_calls or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise EnvInputError(f'"message.tool_calls[{i}]" must be {{"id", "function": {{"name", "arguments"}}}}')
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            # Canonical arguments are a JSON string; a non-object still fails as a tool error later.
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def _episode_load(session: EnvSession) -> Episode:
    domain = session.domain
    episode = Episode(
        domain_name=domain.name,
        policy=domain.policy,
        task_text=session.task.instruction,
        apis=session.api_specs,
        tools=session.tools,
        state=session.state,
        state_schema=domain.state_schema,
        simulator=client_for_stage(Stage.SIMULATOR),
        messages=list(session.messages),
        steps=dict(session.steps),
        errors=session.error_count,
    )
    episode.initial_state = session.initial_state
    return episode


def _limit_hit(session: EnvSession) -> str:
    if session.error_count >= session.max_errors:
        return TerminationReason.MAX_ERRORS
    if session.tokens_used >= session.token_budget:
        return TerminationReason.TOKEN_BUDGET
    if session.step_count >= session.max_steps:
        return TerminationReason.MAX_STEPS
    return ""


def _usage_add(session: EnvSession, episode: Episode, counted: int) -> int:
    """Add the tokens of the calls made since `counted` ids were already counted; returns the new count."""
    usage = selectors.calls_usage(call_ids=episode.llm_call_ids[counted:])
    session.tokens_used += usage["tokens"]
    return len(episode.llm_call_ids)


def _trajectory_store(
    session: EnvSession,
    *,
    messages: list,
    tools: list,
    steps: dict,
    final_state: dict,
    violations: list,
    verdict: dict | None,
    llm_calls: list,
) -> None:
    """The ended episode as an rl trajectory, so it is reviewed and exported like any other."""
    session.trajectory = trajectory_create(
        violations=violations,
        verdict=verdict,
        kind=TrajectoryKind.RL,
        domain=session.domain,
        task=session.task,
        messages=messages,
        tools=tools,
        steps=steps,
        initial_state=session.initial_state,
        final_state=final_state,
        termination_reason=session.termination_reason,
        reward=session.reward,
        provenance={
            "stage": "rl",
            "env_session": str(session.pk),
            "group": session.group.key if session.group else None,
            "created_by": session.created_by_id,
            "limits": session.limits,
            "llm_calls": llm_calls,
        },
    )


def _episode_finish(session: EnvSession, episode: Episode) -> dict:
    """Rules, judge reward and the stored rl trajectory; returns the info to report."""
    task = session.task
    violations = rules_check(episode.messages, episode.tools) + simulator_failures(episode.steps)
    # Every episode that ends by itself is judged, truncated ones too: the trainer needs a reward for each.
    verdict = judge_run(
        client=client_for_stage(Stage.JUDGE),
        messages=episode.messages,
        tools=episode.tools,
        task=f"{task.instruction}\nExpected outcome: {task.expected_outcome}",
        policy=session.domain.policy,
        world=world_evidence(episode.initial_state, episode.steps),
    )
    if verdict.get("llm_call"):
        episode.llm_calls.append(verdict["llm_call"])
    session.reward = verdict["score"]
    session.reward_breakdown = verdict["scores"]
    _trajectory_store(
        session,
        messages=episode.messages,
        tools=episode.tools,
        steps=episode.steps,
        final_state=episode.state,
        violations=violations,
        verdict=verdict,
        llm_calls=session.llm_call_ids + episode.llm_call_ids,
    )
    return {
        "reward_breakdown": verdict["scores"],
        "judge": {
            "passed": verdict["passed"],
            "score": verdict["score"],
            "confidence": verdict["confidence"],
            "rationale": verdict["rationale"],
            **({"error": verdict["error"]} if verdict.get("error") else {}),
        },
        "violations": [v.as_dict() for v in violations],
        "trajectory": session.trajectory.pk,
    }


def _agent_turn(session: EnvSession, episode: Episode, message: dict) -> tuple[list[dict], str]:
    """Answer the agent's message; returns the observation and the termination reason ("" to go on)."""
    session.step_count += 1
    observation = episode.handle_assistant(message)
    session.error_count = episode.errors
    counted = _usage_add(session, episode, 0)
    reason = _limit_hit(session)
    if message.get("tool_calls") or reason:
        return observation, reason
    reply = episode.user_reply(client_for_stage(Stage.USER_SIMULATOR))
    # A successful answer always adds its call ids; none means the LLM failed after its retries.
    answered = len(episode.llm_call_ids) > counted
    _usage_add(session, episode, counted)
    if reply is None:
        return [], TerminationReason.USER_DONE if answered else TerminationReason.LLM_ERROR
    return [reply], TerminationReason.TOKEN_BUDGET if session.tokens_used >= session.token_budget else ""


def _session_for_change(*, session_id, actor, finished: str) -> EnvSession:
    """The caller's unfinished session, row-locked for the rest of the transaction."""
    session = selectors.session_for_step(session_id=session_id, actor=actor)
    if session is None:
        raise EnvNotFound(f"no environment session {session_id}")
    if session.done:
        raise EnvFinished(f"the episode has ended ({session.termination_reason}); {finished}")
    return session


def _session_save(session: EnvSession, *, version: int, **fields) -> None:
    """Compare-and-set on the version: a guard for databases without row locks (the other change won)."""
    updated = EnvSession.objects.filter(pk=session.pk, version=version).update(
        version=F("version") + 1, updated_at=timezone.now(), **fields
    )
    if not updated:
        raise EnvConflict("another step on this session was applied at the same time; retry")


def env_step(*, session_id, actor, payload) -> dict:
    """Apply one agent message; returns {"observation", "done", "reward", "termination_reason", "info"}."""
    message = message_clean(payload=payload)
    with transaction.atomic():
        session = _session_for_change(session_id=session_id, actor=actor, finished="create a new session")
        version = session.version
        episode = _episode_load(session)
        observation, reason = _agent_turn(session, episode, message)
        info = {
            "step": session.step_count,
            "errors": session.error_count,
            "tokens_used": session.tokens_used,
            "tool_errors": {
                index: episode.steps[index]["errors"]
                for index in episode.steps
                if index.isdigit() and int(index) >= len(session.messages) and episode.steps[index]["errors"]
            },
        }
        if reason:
            session.done = True
            session.termination_reason = reason
            session.finished_at = timezone.now()
            info.update(_episode_finish(session, episode))
        step_calls = episode.llm_call_ids
        info["llm"] = selectors.calls_usage(call_ids=step_calls)
        _session_save(
            session,
            version=version,
            state=episode.state,
            messages=episode.messages,
            steps=episode.steps,
            step_count=session.step_count,
            error_count=session.error_count,
            tokens_used=session.tokens_used,
            llm_call_ids=session.llm_call_ids + step_calls,
            done=session.done,
            termination_reason=session.termination_reason,
            reward=session.reward,
            reward_breakdown=session.reward_breakdown,
            trajectory=session.trajectory,
            finished_at=session.finished_at,
        )
    return {
        "observation": observation,
        "done": session.done,
        "reward": session.reward,
        "termination_reason": session.termination_reason or None,
        "info": info,
    }


# -- abandon ---------------------------------------------------------------------------------------


def env_abandon(*, session_id, actor) -> dict:
    """End an unfinished episode at the client's request; answers like a final step.

    The conversation so far is stored as an rl trajectory with its rule violations but is not judged:
    an abandoned episode has no outcome to score, so `reward` stays null and no LLM call is made.
    """
    with transaction.atomic():
        session = _session_for_change(session_id=session_id, actor=actor, finished="nothing to abandon")
        session.done = True
        session.termination_reason = TerminationReason.ABANDONED
        session.finished_at = timezone.now()
        violations = rules_check(session.messages, session.tools) + simulator_failures(session.steps)
        _trajectory_store(
            session,
            messages=session.messages,
            tools=session.tools,
            steps=session.steps,
            final_state=session.state,
            violations=violations,
            verdict=None,
            llm_calls=session.llm_call_ids,
        )
        _session_save(
            session,
            version=session.version,
            done=True,
            termination_reason=session.termination_reason,
            trajectory=session.trajectory,
            finished_at=session.finished_at,
        )
    return {
        "observation": [],
        "done": True,
        "reward": None,
        "termination_reason": session.termination_reason,
        "info": {
            "step": session.step_count,
            "errors": session.error_count,
            "tokens_used": session.tokens_used,
            "tool_errors": {},
            "reward_breakdown": {},
            "judge": None,
            "violations": [v.as_dict() for v in violations],
            "trajectory": session.trajectory.pk,
            "llm": selectors.calls_usage(call_ids=[]),
        },
    }
