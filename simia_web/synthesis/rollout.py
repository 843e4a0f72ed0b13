"""A teacher-agent rollout of one task: the episode engine driven by the agent LLM, then rules and the judge; and
the rollout units that the synthesize and rollout job kinds plan and run."""

from contextlib import ExitStack
from dataclasses import dataclass

from simia_web.catalog.models import Api, Domain, Task
from simia_web.catalog.references import ReferenceConfig, ReferenceSession, reference_for
from simia_web.catalog.selectors import domain_unusable_reason, domain_with_valid_apis
from simia_web.core.rows import row_by_pk
from simia_web.curation.models import TrajectoryKind
from simia_web.curation.services import trajectory_create
from simia_web.formats.conversation import Violation, message_text
from simia_web.formats.rules import ends_with_answer
from simia_web.jobs.kinds import UnitPlan
from simia_web.llm.client import LLMError
from simia_web.llm.models import Stage
from simia_web.llm.services import llm_call_ids
from simia_web.simulation.episode import (
    JUDGE_IF_CLEAN,
    EpisodeLimits,
    StageClients,
    api_specs,
    episode_conclude,
    episode_start,
)
from simia_web.simulation.judge import PROMPT_VERSION as JUDGE_PROMPT_VERSION

from .services import REFERENCE
from .trajectory_kinds import trajectory_unit_result

__all__ = ["RolloutLimits", "UnusableDomain", "api_specs", "domain_require_usable", "rollout_run"]

AGENT_PROMPT_VERSION = "agent-v1"
# Said to the agent (in the prompt only) when a rollout reaches a limit before it answered the customer.
WRAP_UP = (
    "You cannot call any more tools in this conversation. Reply to the customer now with your final answer: "
    "what was done and what could not be done."
)
LIMIT_TERMINATIONS = frozenset({"max_steps", "max_errors", "token_budget"})


@dataclass
class RolloutLimits:
    max_steps: int = 12
    max_errors: int = 3
    user_turns: int = 0  # extra user turns played by the user simulator

    @classmethod
    def of_job(cls, params: dict) -> "RolloutLimits":
        return cls(
            max_steps=params.get("max_steps", 12),
            max_errors=params.get("max_errors", 3),
            user_turns=params.get("user_turns", 0),
        )


class UnusableDomain(Exception):
    """A domain that a unit cannot use as it is: the unit fails with this reason and calls no LLM."""


def domain_require_usable(domain: Domain) -> None:
    if reason := domain_unusable_reason(domain):
        raise UnusableDomain(reason)


def rollout_units(task_ids: list[int], rollouts: int) -> list[UnitPlan]:
    return [
        UnitPlan("rollout", f"rollout:{task_id}:{k}", {"task": task_id, "sample": k})
        for task_id in task_ids
        for k in range(rollouts)
    ]


def rollout_unit_run(job, unit):
    """Roll out the unit's task and return the writer that stores the trajectory."""
    # Only what a rollout reads (a task's other columns, provenance and API lists, are a third of the read's CPU),
    # as fixed SQL (core.rows).
    fields = ("domain_id", "instruction", "expected_outcome", "user_scenario")
    task = row_by_pk(Task, unit.params["task"], fields)
    domain, apis = domain_with_valid_apis(task.domain_id, job_id=job.pk)
    domain_require_usable(domain)
    reference = None
    if job.params.get("environment") == REFERENCE:
        reference = reference_for(domain)
        if reference is None:
            raise UnusableDomain(f"domain {domain.name} has no reference environment to roll out against")
    outcome = rollout_run(
        task=task,
        domain=domain,
        apis=apis,
        limits=RolloutLimits.of_job(job.params),
        job_id=job.pk,
        profiles=job.params.get("profiles", {}),
        judge_prompt=job.params.get("judge_prompt", JUDGE_PROMPT_VERSION),
        sample=f"{job.pk}:{unit.key}",
        reference=reference,
    )

    def write():
        fields = outcome["fields"]
        fields["provenance"]["llm_calls"] = llm_call_ids(outcome["llm_calls"])
        trajectory = trajectory_create(
            kind=TrajectoryKind.ROLLOUT,
            job=job,
            unit=unit,
            violations=outcome["violations"],
            verdict=outcome["verdict"],
            **fields,
        )
        return trajectory_unit_result(trajectory, outcome["violations"])

    return write


def rollout_run(
    *,
    task: Task,
    domain: Domain,
    apis: list[Api],
    limits: RolloutLimits,
    job_id: int | None,
    profiles: dict,
    sample: str,
    reference: ReferenceConfig | None = None,
    judge_prompt: str = JUDGE_PROMPT_VERSION,
) -> dict:
    """Run the episode to its end and return the fields of the trajectory to store (not yet written).

    With a `reference`, the domain's real environment answers the tool calls (a fresh session for this rollout)
    instead of the simulator: real responses, recorded as such, for calibration and for mixing with simulated
    ones. McpUnavailable when the session cannot be opened."""
    with ExitStack() as stack:
        session = stack.enter_context(ReferenceSession(reference)) if reference is not None else None
        outcome = _rollout(
            task=task,
            domain=domain,
            apis=apis,
            limits=limits,
            job_id=job_id,
            profiles=profiles,
            judge_prompt=judge_prompt,
            sample=sample,
            reference=session,
        )
    if reference is not None:
        outcome["fields"]["provenance"].update(environment="reference", reference=reference.describe())
    return outcome


def _rollout(
    *, task, domain, apis, limits: RolloutLimits, job_id, profiles: dict, judge_prompt: str, sample: str, reference
) -> dict:
    clients = StageClients(job_id=job_id, profiles=profiles, judge_prompt=judge_prompt)
    episode = episode_start(
        domain=domain,
        task=task,
        apis=apis,
        clients=clients,
        limits=EpisodeLimits(max_steps=limits.max_steps, max_errors=limits.max_errors, user_turns=limits.user_turns),
        reference=reference,
    )
    failures: list[Violation] = []
    while not episode.done:
        try:
            reply = clients[Stage.AGENT].chat(
                messages=episode.messages, tools=episode.tools, prompt_version=AGENT_PROMPT_VERSION, cache_salt=sample
            )
        except LLMError as exc:
            if not episode.assistant_turns():
                raise  # the agent never answered: there is no conversation to keep, the unit fails with the reason
            episode.termination_reason = "llm_error"
            failures.append(Violation("llm_error", len(episode.messages) - 1, f"agent: {exc}"[:2000]))
            break
        episode.llm_calls += reply.calls
        episode.step(reply.data)
    wrapped_up = _wrap_up(episode, clients[Stage.AGENT], sample, failures)

    outcome = episode_conclude(episode=episode, judge=JUDGE_IF_CLEAN, violations=failures)
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
                **({"wrap_up": True} if wrapped_up else {}),
                "models": {stage: c.profile.model for stage, c in clients.items()},
                "profiles": {stage: c.profile.name for stage, c in clients.items()},
            },
        },
        "violations": outcome.violations,
        "verdict": outcome.verdict,
        "llm_calls": episode.llm_calls,  # their ids go in the provenance once the rows are written
    }


def _wrap_up(episode, agent, sample: str, failures: list[Violation]) -> bool:
    """A teacher that reached a limit mid-task still owes the customer an answer, as a deployed agent would
    give one: it is asked once, without tools, and the judge scores the conversation as it then stands.
    The termination reason keeps the limit, so curators see why it ended."""
    if episode.termination_reason not in LIMIT_TERMINATIONS or ends_with_answer(episode.messages):
        return False
    try:
        reply = agent.chat(
            messages=episode.messages,
            instruction=WRAP_UP,
            prompt_version=AGENT_PROMPT_VERSION,
            cache_salt=sample,
        )
    except LLMError as exc:
        failures.append(Violation("llm_error", len(episode.messages) - 1, f"agent wrap-up: {exc}"[:2000]))
        return False
    episode.llm_calls += reply.calls
    text = message_text(reply.data).strip()
    if not text:
        return False
    episode.messages.append({"role": "assistant", "content": text})
    return True
