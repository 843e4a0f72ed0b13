"""A teacher-agent rollout of one task against the simulator, followed by rules and the judge."""

from dataclasses import dataclass

from simia_web.catalog.models import Api, Domain, Task
from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import Stage

from .episode import Episode, agent_system_prompt
from .judge import judge_run, world_evidence
from .rules import Violation, rules_check, simulator_failures

AGENT_PROMPT_VERSION = "agent-v1"


@dataclass
class RolloutLimits:
    max_steps: int = 12
    max_errors: int = 3
    user_turns: int = 0  # extra user turns played by the user simulator


def api_specs(apis: list[Api]) -> dict[str, dict]:
    return {
        api.name: {
            "description": api.description,
            "parameters": api.parameters,
            "returns": api.returns,
            "kind": api.kind,
            "touches": api.touches,
        }
        for api in apis
    }


def episode_start(*, domain: Domain, task: Task, apis: list[Api], simulator) -> Episode:
    episode = Episode(
        domain_name=domain.name,
        policy=domain.policy,
        task_text=task.instruction,
        apis=api_specs(apis),
        tools=[api.as_tool() for api in apis],
        state=domain.initial_state or {},
        state_schema=domain.state_schema,
        simulator=simulator,
    )
    episode.messages = [
        {"role": "system", "content": agent_system_prompt(domain_name=domain.name, policy=domain.policy)},
        {"role": "user", "content": task.instruction},
    ]
    return episode


def rollout_run(
    *,
    task: Task,
    domain: Domain,
    apis: list[Api],
    limits: RolloutLimits,
    job_id: int | None,
    profiles: dict,
    sample: str,
) -> dict:
    """Run the episode to its end and return the fields of the trajectory to store (not yet written)."""
    clients = {
        stage: client_for_stage(stage, job_id=job_id, profile_id=profiles.get(stage))
        for stage in (Stage.AGENT, Stage.SIMULATOR, Stage.USER_SIMULATOR, Stage.JUDGE)
    }
    episode = episode_start(domain=domain, task=task, apis=apis, simulator=clients[Stage.SIMULATOR])
    user_turns = 0
    agent_failure: Violation | None = None
    while not episode.done:
        if episode.assistant_turns() >= limits.max_steps:
            episode.termination_reason = "max_steps"
            break
        try:
            reply = clients[Stage.AGENT].chat(
                messages=episode.messages, tools=episode.tools, prompt_version=AGENT_PROMPT_VERSION, cache_salt=sample
            )
        except LLMError as exc:
            if not episode.assistant_turns():
                raise  # the agent never answered: there is no conversation to keep, the unit fails with the reason
            episode.termination_reason = "llm_error"
            agent_failure = Violation("llm_error", len(episode.messages) - 1, f"agent: {exc}"[:2000])
            break
        episode.llm_calls += reply.calls
        episode.handle_assistant(reply.data)
        if episode.errors >= limits.max_errors:
            episode.termination_reason = "max_errors"
        elif not reply.data.get("tool_calls"):
            if user_turns < limits.user_turns and episode.user_reply(clients[Stage.USER_SIMULATOR]):
                user_turns += 1
            else:
                episode.termination_reason = "final_answer"

    violations = rules_check(episode.messages, episode.tools) + simulator_failures(episode.steps)
    if agent_failure is not None:
        violations.append(agent_failure)
    verdict = None
    if not violations:
        verdict = judge_run(
            client=clients[Stage.JUDGE],
            messages=episode.messages,
            tools=episode.tools,
            task=f"{task.instruction}\nExpected outcome: {task.expected_outcome}",
            policy=domain.policy,
            world=world_evidence(episode.initial_state, episode.steps),
        )
        if verdict.get("llm_call"):
            episode.llm_calls.append(verdict["llm_call"])
    return {
        "fields": {
            "domain": domain,
            "task": task,
            "messages": episode.messages,
            "tools": episode.tools,
            "steps": episode.steps,
            "initial_state": episode.initial_state,
            "final_state": episode.state,
            "termination_reason": episode.termination_reason,
            "provenance": {
                "stage": "rollout",
                "sample": sample,
                "prompt_versions": {"agent": AGENT_PROMPT_VERSION},
                "models": {stage: c.profile.model for stage, c in clients.items()},
                "profiles": {stage: c.profile.name for stage, c in clients.items()},
            },
        },
        "violations": violations,
        "verdict": verdict,
        "llm_calls": episode.llm_calls,  # their ids go in the provenance once the rows are written
    }
