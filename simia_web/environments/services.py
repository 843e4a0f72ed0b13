"""RL environment sessions: reset (create), step, abandon, and the end of an episode (reward and stored trajectory).

Every session belongs to the workspace of its domain: it is created on a task of the caller's workspaces, and a
session of another workspace is not found (404) to read, step or abandon. Writes need the curator role in the
session's workspace.

A session is the episode engine's state (simia_web.simulation) kept between HTTP requests. A step loads the session,
gives its database connection back, runs the engine (the simulator for tool calls, the user simulator
for text, the judge at the end) with no transaction open, writes the calls' LLMCall rows whatever
happens, and then stores the new state with a compare-and-set on `version`: of two steps racing on one
session the second to write gets 409 and nothing of it is kept but its LLM-call rows.
"""

import random
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from simia_web.accounts.models import User
from simia_web.accounts.scoping import has_role_in, member_workspace_ids
from simia_web.catalog.models import Task, TaskStatus
from simia_web.catalog.selectors import domain_unusable_reason
from simia_web.core.errors import ApplicationError, Conflict, Forbidden, NotFound, TooManyRequests, UpstreamFailed
from simia_web.curation.models import TrajectoryKind
from simia_web.curation.services import trajectory_create
from simia_web.formats import FormatError
from simia_web.formats.conversation import message_strict
from simia_web.llm.client import LLMError
from simia_web.llm.models import LLMCall, Stage
from simia_web.llm.services import llm_calls_held, llm_calls_write
from simia_web.simulation.episode import (
    JUDGE_ALWAYS,
    JUDGE_NEVER,
    Episode,
    EpisodeLimits,
    StageClients,
    episode_conclude,
    episode_start,
)

from . import selectors
from .models import (
    DEFAULT_MAX_ERRORS,
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOOL_CALLS_PER_STEP,
    DEFAULT_TOKEN_BUDGET,
    EnvGroup,
    EnvSession,
    TerminationReason,
)

LIMIT_RANGES = {
    "max_steps": (1, 100),
    "max_errors": (1, 100),
    "token_budget": (1, 100_000_000),
    "max_tool_calls_per_step": (1, 128),
}


class EnvError(ApplicationError):
    """A request the environment refuses, answered `{"error": code, "detail": ...}` with the status of the kind of
    refusal each subclass also is (400 unless it says otherwise)."""

    code = "invalid_request"

    def body(self) -> dict:
        return {"error": self.code, "detail": self.detail}


class EnvInputError(EnvError):
    code = "invalid_message"


class EnvNotFound(EnvError, NotFound):
    code = "not_found"


class EnvForbidden(EnvError, Forbidden):
    code = "forbidden"


class EnvFinished(EnvError, Conflict):
    code = "episode_finished"


class EnvConflict(EnvError, Conflict):
    code = "concurrent_step"


class EnvSessionLimit(EnvError, TooManyRequests):
    code = "session_limit"


class EnvUpstreamError(EnvError, UpstreamFailed):
    code = "user_simulator_failed"


# -- reset -----------------------------------------------------------------------------------------


def _curator_check(actor, workspace_id: int | None) -> None:
    """Sessions are run by curators: the actor needs the role in the workspace of the session's domain."""
    if workspace_id is None or not has_role_in(actor, workspace_id, "curator"):
        raise EnvForbidden("RL sessions need the curator role in the domain's workspace")


def _limit(name: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    low, high = LIMIT_RANGES[name]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise EnvError(f"{name} must be a whole number from {low} to {high}")
    return value


def _task_pick(*, task_id: int | None, domain_name: str | None, seed: int | None, workspace_ids) -> Task:
    """The task to play, of a domain of the workspaces: another workspace's task or domain is refused as a
    missing one."""
    if task_id is not None:
        task = selectors.task_in(task_id=task_id, workspace_ids=workspace_ids)
        if task is None:
            raise EnvError(f"no task with id {task_id}")
        if task.status != TaskStatus.VALID:
            raise EnvError(f"task {task_id} is {task.status}, not valid")
        if domain_name and task.domain.name != domain_name:
            raise EnvError(f"task {task_id} belongs to domain {task.domain.name!r}, not {domain_name!r}")
        return task
    domain = selectors.domain_in(name=domain_name or "", workspace_ids=workspace_ids)
    if domain is None:
        raise EnvError(f"no domain named {domain_name!r}")
    ids = selectors.playable_task_ids(domain=domain)
    if not ids:
        raise EnvError(f"domain {domain.name!r} has no valid tasks")
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    return Task.objects.select_related("domain").get(pk=rng.choice(ids))


def _group_join(
    *, key: str, task_id: int | None, domain_name: str | None, seed: int | None, actor, workspace_ids
) -> EnvGroup:
    """The group's task: the first create picks it (race-safe through the unique key), the rest reuse it. Keys are
    unique across workspaces: a key another workspace's group has is refused, saying no more than that."""
    group = selectors.group_keyed(key)
    if group is None:
        if task_id is None and not domain_name:
            raise EnvError(f"no group {key!r} yet: the first create of a group needs a task or a domain")
        task = _task_pick(task_id=task_id, domain_name=domain_name, seed=seed, workspace_ids=workspace_ids)
        try:
            with transaction.atomic():
                return EnvGroup.objects.create(key=key, domain=task.domain, task=task, created_by=actor)
        except IntegrityError:  # another member of the group was created first: use its task
            group = EnvGroup.objects.select_related("task__domain").get(key=key)
    if group.task.domain.workspace_id not in workspace_ids:
        raise EnvError(f"the group key {key!r} is taken: choose another")
    if task_id is not None and task_id != group.task_id:
        raise EnvError(f"group {key!r} plays task {group.task_id}, not {task_id}")
    if domain_name and domain_name != group.task.domain.name:
        raise EnvError(f"group {key!r} plays domain {group.task.domain.name!r}, not {domain_name!r}")
    return group


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
    max_tool_calls_per_step: int | None = None,
    workspace_ids: Iterable[int] | None = None,
) -> EnvSession:
    """Start an episode: pick the task, snapshot tools and state, and open with the customer's message.

    The task (or domain, or group) is one of the workspaces `workspace_ids` (by default every one the actor belongs
    to), and the actor needs the curator role in its workspace.

    A τ² task's opening is written by the user simulator, so this may call an LLM (outside any transaction)."""
    workspace_ids = list(member_workspace_ids(actor) if workspace_ids is None else workspace_ids)
    limits = {
        "max_steps": _limit("max_steps", max_steps, DEFAULT_MAX_STEPS),
        "max_errors": _limit("max_errors", max_errors, DEFAULT_MAX_ERRORS),
        "token_budget": _limit("token_budget", token_budget, DEFAULT_TOKEN_BUDGET),
        "max_tool_calls_per_step": _limit(
            "max_tool_calls_per_step", max_tool_calls_per_step, DEFAULT_MAX_TOOL_CALLS_PER_STEP
        ),
    }
    if task_id is None and not domain_name and not group_key:
        raise EnvError("give a task id, a domain name or a group key")
    env_sessions_expire(actor=actor)
    _live_sessions_check(actor)
    group = None
    if group_key:
        group = _group_join(
            key=group_key, task_id=task_id, domain_name=domain_name, seed=seed, actor=actor, workspace_ids=workspace_ids
        )
        task = group.task
    else:
        task = _task_pick(task_id=task_id, domain_name=domain_name, seed=seed, workspace_ids=workspace_ids)
    domain = task.domain
    _curator_check(actor, domain.workspace_id)
    if reason := domain_unusable_reason(domain):
        raise EnvError(reason)
    apis = selectors.domain_apis(domain=domain)
    if not apis:
        raise EnvError(f"domain {domain.name!r} has no valid APIs")
    _connection_release()
    with llm_calls_held() as calls:
        try:
            episode = episode_start(
                domain=domain, task=task, apis=apis, clients=StageClients(), limits=_episode_limits(limits)
            )
        except LLMError as exc:
            episode, failure = None, exc
    llm_calls_write(calls)
    if episode is None:
        raise EnvUpstreamError(f"the user simulator could not write the customer's opening message: {failure}")
    # Written on its own, alongside other creates (megabytes of world state each), then admitted under the cap.
    session = EnvSession.objects.create(
        domain=domain,
        task=task,
        group=group,
        tools=episode.tools,
        api_specs=episode.apis,
        initial_state=episode.initial_state,
        state=episode.state,
        messages=episode.messages,
        tokens_used=_tokens(calls),
        llm_call_ids=[call.pk for call in calls],
        created_by=actor,
        admitted=False,
        **limits,
    )
    _session_admit(actor, session)
    return session


def _live_sessions(actor):
    return EnvSession.objects.filter(created_by=actor, done=False, admitted=True)


def _live_sessions_refusal(cap: int) -> EnvSessionLimit:
    return EnvSessionLimit(
        f"you have {cap} unfinished sessions (SIMIA_ENV_MAX_LIVE_SESSIONS): finish or abandon some first"
    )


def _live_sessions_check(actor) -> None:
    cap = settings.SIMIA_ENV_MAX_LIVE_SESSIONS
    if _live_sessions(actor).count() >= cap:
        raise _live_sessions_refusal(cap)


def _session_admit(actor, session: EnvSession) -> None:
    """Count the written session against the cap: admitted, or taken back when the cap is reached.

    Creates of one account take turns (a lock on the account's row) only for this count, an index scan, and
    not for writing their sessions: with the write inside the lock, 100 creates at once queued behind each
    other's megabytes. Only admitted sessions are counted, so the cap is exact and sessions still being
    written do not count against the ones being admitted."""
    cap = settings.SIMIA_ENV_MAX_LIVE_SESSIONS
    with transaction.atomic():
        # NO KEY: a lock that other creates' inserts (which check the account's key) do not wait for.
        User.objects.select_for_update(no_key=True).filter(pk=actor.pk).first()
        session.admitted = _live_sessions(actor).count() < cap
        if session.admitted:
            EnvSession.objects.filter(pk=session.pk).update(admitted=True)
    if not session.admitted:
        session.delete()
        raise _live_sessions_refusal(cap)


def _episode_limits(limits: dict) -> EpisodeLimits:
    # The simulated user of an RL session talks until it is done (or a limit is hit).
    return EpisodeLimits(**limits, user_turns=None)


def _tokens(calls: list[LLMCall]) -> int:
    """Tokens the session's budget counts: the environment's calls, not the judge's (the reward is always given)."""
    return sum(call.tokens_in + call.tokens_out for call in calls if call.stage != Stage.JUDGE)


def _connection_release() -> None:
    """Give the database connection back before waiting on LLMs, so that a session waiting on its simulator
    holds no connection (256 waiting sessions would otherwise hold 256 of the server's connections)."""
    if not connection.in_atomic_block:
        connection.close()


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


def message_clean(*, payload, index: int) -> dict:
    """The agent's assistant message in canonical form (to become message `index` of the conversation), or
    EnvInputError naming the field of a body of the wrong shape.

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
    try:
        return message_strict({**message, "role": "assistant"}, "message", index)
    except FormatError as exc:
        raise EnvInputError(f'"{exc.field}" {exc.message}') from None


def _episode_load(session: EnvSession) -> Episode:
    """The engine's state as the session stored it."""
    task = session.task
    return Episode(
        domain_name=session.domain.name,
        policy=session.domain.policy,
        task_text=task.instruction,
        expected_outcome=task.expected_outcome,
        user_scenario=task.user_scenario,
        apis=session.api_specs,
        tools=session.tools,
        state=session.state,
        initial_state=session.initial_state,
        state_schema=session.domain.state_schema,
        clients=StageClients(),
        limits=_episode_limits(session.limits),
        messages=list(session.messages),
        steps=dict(session.steps),
        errors=session.error_count,
        tokens_used=session.tokens_used,
    )


def _session_live(*, session_id, actor, finished: str, workspace_ids) -> EnvSession:
    """The caller's unfinished session of the workspaces (read without a lock: its writes are guarded by
    `version`); the caller needs the curator role in its workspace."""
    workspace_ids = member_workspace_ids(actor) if workspace_ids is None else workspace_ids
    session = selectors.session_for_step(session_id=session_id, actor=actor, workspace_ids=workspace_ids)
    if session is None:
        raise EnvNotFound(f"no environment session {session_id}")
    _curator_check(actor, session.domain.workspace_id)
    if not session.done and session.updated_at < _idle_since():
        _session_end(session, reason=TerminationReason.IDLE_TIMEOUT)
    if session.done:
        raise EnvFinished(f"the episode has ended ({session.termination_reason}); {finished}")
    return session


def _idle_since():
    return timezone.now() - timedelta(minutes=settings.SIMIA_ENV_IDLE_MINUTES)


def _session_save(session: EnvSession, *, version: int, **fields) -> None:
    """Compare-and-set on the version: whichever change wrote first wins, the other is refused."""
    updated = EnvSession.objects.filter(pk=session.pk, version=version).update(
        version=F("version") + 1, updated_at=timezone.now(), **fields
    )
    if not updated:
        raise EnvConflict("another step on this session was applied at the same time; retry")


def _trajectory_store(session: EnvSession, episode: Episode, outcome, *, llm_call_ids: list[int]):
    """The ended episode as an rl trajectory, so it is reviewed and exported like any other."""
    return trajectory_create(
        violations=outcome.violations,
        verdict=outcome.verdict,
        kind=TrajectoryKind.RL,
        domain=session.domain,
        task=session.task,
        messages=episode.messages,
        tools=episode.tools,
        steps=episode.steps,
        initial_state=episode.initial_state,
        final_state=episode.state,
        termination_reason=episode.termination_reason,
        reward=outcome.verdict["score"] if outcome.verdict else None,
        provenance={
            "stage": "rl",
            "env_session": str(session.pk),
            "group": session.group.key if session.group else None,
            "created_by": session.created_by_id,
            "limits": session.limits,
            "llm_calls": llm_call_ids,
        },
    )


def _finish_info(outcome, trajectory) -> dict:
    verdict = outcome.verdict
    judge = None
    if verdict is not None:
        judge = {
            "passed": verdict["passed"],
            "score": verdict["score"],
            "confidence": verdict["confidence"],
            "rationale": verdict["rationale"],
            **({"error": verdict["error"]} if verdict.get("error") else {}),
        }
    return {
        "reward_breakdown": verdict["scores"] if verdict else {},
        "judge": judge,
        "violations": [v.as_dict() for v in outcome.violations],
        "trajectory": trajectory.pk,
    }


def _session_write(session: EnvSession, episode: Episode, *, version: int, calls: list[LLMCall], outcome) -> dict:
    """Store the step (and the trajectory, when the episode ended) if no other change came first."""
    fields = {
        "state": episode.state,
        "messages": episode.messages,
        "steps": episode.steps,
        "step_count": episode.assistant_turns(),
        "error_count": episode.errors,
        "tokens_used": session.tokens_used + _tokens(calls),
        "llm_call_ids": session.llm_call_ids + [call.pk for call in calls],
    }
    info = {}
    with transaction.atomic():
        if episode.done:
            trajectory = _trajectory_store(session, episode, outcome, llm_call_ids=fields["llm_call_ids"])
            verdict = outcome.verdict
            fields.update(
                done=True,
                termination_reason=episode.termination_reason,
                reward=verdict["score"] if verdict else None,
                reward_breakdown=verdict["scores"] if verdict else {},
                trajectory=trajectory,
                finished_at=timezone.now(),
            )
            info = _finish_info(outcome, trajectory)
        _session_save(session, version=version, **fields)  # a lost race rolls the trajectory back too
    for name, value in fields.items():
        setattr(session, name, value)
    return info


def env_step(*, session_id, actor, payload, workspace_ids: Iterable[int] | None = None) -> dict:
    """Apply one agent message to a session of the workspaces (by default every one the actor belongs to); returns
    {"observation", "done", "reward", "termination_reason", "info"}."""
    session = _session_live(
        session_id=session_id, actor=actor, finished="create a new session", workspace_ids=workspace_ids
    )
    message = message_clean(payload=payload, index=len(session.messages))
    calls_sent = len(message.get("tool_calls") or [])
    if calls_sent > session.max_tool_calls_per_step:
        raise EnvError(
            f"the message has {calls_sent} tool calls; this session's max_tool_calls_per_step is "
            f"{session.max_tool_calls_per_step}"
        )
    version, known = session.version, len(session.messages)
    _connection_release()
    with llm_calls_held() as calls:
        episode = _episode_load(session)
        observation = episode.step(message)
        outcome = episode_conclude(episode=episode, judge=JUDGE_ALWAYS) if episode.done else None
    llm_calls_write(calls)  # kept even when this step loses a race below
    info = _session_write(session, episode, version=version, calls=calls, outcome=outcome)
    return {
        "observation": observation,
        "done": session.done,
        "reward": session.reward,
        "termination_reason": session.termination_reason or None,
        "info": {
            "step": session.step_count,
            "errors": session.error_count,
            "tokens_used": session.tokens_used,
            "tool_errors": {
                index: step["errors"]
                for index, step in episode.steps.items()
                if index.isdigit() and int(index) >= known and step["errors"]
            },
            **info,
            "llm": _calls_usage(calls),
        },
    }


def _calls_usage(calls: list[LLMCall]) -> dict:
    return {
        "tokens": sum(call.tokens_in + call.tokens_out for call in calls),
        "latency_ms": sum(call.latency_ms for call in calls),
        "calls": len(calls),
    }


# -- abandon ---------------------------------------------------------------------------------------


def _session_end(session: EnvSession, *, reason: str) -> dict:
    """End an unfinished episode without a judge (abandoned by the client, or idle too long)."""
    episode = _episode_load(session)
    episode.termination_reason = reason
    outcome = episode_conclude(episode=episode, judge=JUDGE_NEVER)
    return _session_write(session, episode, version=session.version, calls=[], outcome=outcome)


def env_abandon(*, session_id, actor, workspace_ids: Iterable[int] | None = None) -> dict:
    """End an unfinished episode at the client's request; answers like a final step.

    The conversation so far is stored as an rl trajectory with its rule violations but is not judged:
    an abandoned episode has no outcome to score, so `reward` stays null and no LLM call is made.
    """
    session = _session_live(
        session_id=session_id, actor=actor, finished="nothing to abandon", workspace_ids=workspace_ids
    )
    info = _session_end(session, reason=TerminationReason.ABANDONED)
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
            **info,
            "llm": _calls_usage([]),
        },
    }


def env_sessions_expire(*, actor=None) -> int:
    """Abandon unfinished sessions (of `actor`, or everyone's) left without a step for SIMIA_ENV_IDLE_MINUTES;
    returns how many. Each is stored like an abandoned one, with termination reason idle_timeout."""
    idle = (
        EnvSession.objects.select_related("domain", "task", "group")
        .defer("domain__initial_state")
        .filter(done=False, updated_at__lt=_idle_since())
    )
    if actor is not None:
        idle = idle.filter(created_by=actor)
    ended = 0
    for session in idle.iterator(chunk_size=100):
        try:
            _session_end(session, reason=TerminationReason.IDLE_TIMEOUT)
        except EnvConflict:  # a step came in meanwhile: the session is alive after all
            continue
        ended += 1
    return ended
