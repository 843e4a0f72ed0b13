"""The episode engine: one conversation between an agent and the simulated environment and user.

Rollouts drive it with the teacher agent; RL sessions drive it one agent message per HTTP request and
persist its state between requests. Both start it with `episode_start`, feed it agent messages with
`Episode.step` and end it with `episode_conclude` (rules, then the judge or not), so there is one
definition of a step, of the budgets and of the end of an episode.

Budgets are checked before every LLM call, never after a step: a step stops asking the simulator or
the user simulator once the episode's errors or tokens are spent, so it can pass its token budget by
at most the one call that crossed it.
"""

import copy
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simia_web.formats.conversation import Violation, parse_arguments, tool_result, tool_schemas
from simia_web.formats.rules import call_violations, rules_check, simulator_failures
from simia_web.llm.client import LLMClient, LLMError, client_for_stage
from simia_web.llm.models import LLMCall, Stage
from simia_web.llm.services import llm_call_ids

from .judge import PROMPT_VERSION, judge_run, world_evidence
from .simulator import simulate_call
from .user_simulator import scenario_brief, user_turn

DEFAULT_MAX_TOOL_CALLS_PER_STEP = 16  # the RL default too (environments.models)


def agent_system_prompt(*, domain_name: str, policy: str) -> str:
    return (
        f"You are a customer-service agent for the {domain_name} domain. Use the tools to look up and change "
        "records; never invent data a tool could give you. Follow the policy below. When the request is handled, "
        "reply to the user with a short final answer.\n\n# Policy\n" + (policy or "(no written policy)")
    )


@dataclass
class EpisodeLimits:
    max_steps: int = 12  # agent messages
    max_errors: int = 3  # refused tool calls and simulator errors
    token_budget: int | None = None  # tokens of simulator and user-simulator calls; None: unlimited
    max_tool_calls_per_step: int = DEFAULT_MAX_TOOL_CALLS_PER_STEP
    user_turns: int | None = 0  # user-simulator replies after the opening; None: until the user is done


class StageClients(dict):
    """LLM clients by stage, made on first use (an RL step that only calls tools never builds a judge)."""

    def __init__(self, *, job_id: int | None = None, profiles: dict | None = None, judge_prompt: str = PROMPT_VERSION):
        super().__init__()
        self.job_id = job_id
        self.profiles = profiles or {}
        self.judge_prompt = judge_prompt  # the judge's prompt version (simulation.judge.PROMPTS)

    def __missing__(self, stage: str) -> LLMClient:
        client = self[stage] = client_for_stage(stage, job_id=self.job_id, profile_id=self.profiles.get(stage))
        return client


@dataclass
class Episode:
    domain_name: str
    policy: str
    task_text: str
    expected_outcome: str
    user_scenario: dict
    apis: dict[str, dict]  # name -> spec (description, parameters, returns, kind, touches)
    tools: list[dict]
    state: dict
    state_schema: dict
    clients: StageClients
    limits: EpisodeLimits
    messages: list[dict] = field(default_factory=list)
    steps: dict[str, dict] = field(default_factory=dict)
    errors: int = 0
    tokens_used: int = 0
    user_turns: int = 0
    llm_calls: list[LLMCall] = field(default_factory=list)  # the calls made by this run of the engine
    termination_reason: str = ""
    initial_state: dict | None = None
    # A session with the domain's reference environment (catalog.references.ReferenceSession): when set, tool
    # calls are answered by the real implementation instead of the simulator, and recorded as such.
    reference: Any = None

    def __post_init__(self) -> None:
        if self.initial_state is None:
            self.initial_state = copy.deepcopy(self.state)
        self._schemas = tool_schemas(self.tools)

    @property
    def llm_call_ids(self) -> list[int]:
        return llm_call_ids(self.llm_calls)

    @property
    def done(self) -> bool:
        return bool(self.termination_reason)

    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    # -- budgets --------------------------------------------------------------------------------

    def budget_spent(self) -> str:
        """The limit that forbids another LLM call ("" while calls may still be made)."""
        if self.errors >= self.limits.max_errors:
            return "max_errors"
        if self.limits.token_budget is not None and self.tokens_used >= self.limits.token_budget:
            return "token_budget"
        return ""

    def _spend(self, calls: list[LLMCall]) -> None:
        self.llm_calls += calls
        self.tokens_used += sum(call.tokens_in + call.tokens_out for call in calls)

    # -- a step ---------------------------------------------------------------------------------

    def step(self, message: dict) -> list[dict]:
        """Take one agent message; returns the observation (tool results, or the user's reply).

        Sets `termination_reason` when the episode ends with this step."""
        message = {
            "role": "assistant",
            "content": message.get("content"),
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
        }
        self.messages.append(message)
        index = len(self.messages) - 1
        calls = message.get("tool_calls") or []
        observation = [self._answer_call(call, index, n) for n, call in enumerate(calls)]
        if reason := self.budget_spent():
            self.termination_reason = reason
        elif self.assistant_turns() >= self.limits.max_steps:
            self.termination_reason = "max_steps"  # the agent could not answer the user: no reply is asked for
        elif not calls:
            observation = self._user_turn()
        return observation

    def _answer_call(self, call: dict, call_index: int, position: int) -> dict:
        name = (call.get("function") or {}).get("name", "")
        if position >= self.limits.max_tool_calls_per_step:
            detail = f"not run: more than max_tool_calls_per_step={self.limits.max_tool_calls_per_step} calls"
            content, step = {"error": "too_many_tool_calls", "details": [detail]}, self._refused(detail)
        elif problems := call_violations(call, self._schemas, call_index):
            # Checked before any LLM is asked: the agent gets a structured error it can recover from.
            details = [p.detail for p in problems]
            content, step = {"error": "invalid_tool_call", "details": details}, self._refused(*details)
        elif reason := self.budget_spent():
            # Not the agent's fault and not the API's answer: the call is left unanswered by the simulator.
            content = {"error": "not_run", "details": [f"the episode's {reason} limit is reached"]}
            step = {"patch": [], "state_after": self.state, "errors": [], "rejected": True, "budget": reason}
        elif self.reference is not None:
            content, step = self._reference_answer(name, call)
        else:
            arguments, _ = parse_arguments(call)
            outcome = simulate_call(
                client=self.clients[Stage.SIMULATOR],
                api={"name": name, **self.apis.get(name, {})},
                arguments=arguments,
                task=self.task_text,
                state=self.state,
                state_schema=self.state_schema,
                history=self.messages,
            )
            self._spend(outcome["calls"])
            self.state = outcome["state_after"]
            content = outcome["response"]
            step = {"patch": outcome["patch"], "state_after": self.state, "errors": outcome["errors"]}
            if outcome["failed"]:
                step["simulator_failed"] = True
            if outcome["cut"]:
                step["prompt_cut"] = outcome["cut"]
        if step["errors"]:
            self.errors += 1
        tool_message = tool_result(
            call.get("id", ""), content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        )
        self.messages.append(tool_message)
        self.steps[str(len(self.messages) - 1)] = step
        return tool_message

    def _reference_answer(self, name: str, call: dict) -> tuple[Any, dict]:
        """The real environment's answer; the world state is the reference's own, so nothing is patched here."""
        arguments, _ = parse_arguments(call)
        answer = self.reference.call(name, arguments)
        step: dict[str, object] = {"patch": [], "state_after": self.state, "errors": [], "environment": "reference"}
        if answer.error:
            step["errors"] = [f"the reference could not answer: {answer.error}"]
            return {"error": "The service is temporarily unavailable."}, step
        if answer.is_error:
            step["reference_reported_error"] = True
        return answer.value, step

    def _refused(self, *details: str) -> dict:
        return {"patch": [], "state_after": self.state, "errors": list(details), "rejected": True}

    def _user_turn(self) -> list[dict]:
        """The simulated user answers the agent's text, or the episode ends."""
        if self.limits.user_turns is not None and self.user_turns >= self.limits.user_turns:
            self.termination_reason = "final_answer"
            return []
        try:
            reply = self.user_message()
        except LLMError:
            self.termination_reason = "llm_error"
            return []
        if reply is None:
            self.termination_reason = "user_done"
            return []
        self.user_turns += 1
        self.messages.append(reply)
        if reason := self.budget_spent():
            self.termination_reason = reason
        return [reply]

    def user_message(self) -> dict | None:
        """The user simulator's next message (None when the user is done); LLMError when it cannot answer."""
        reply = user_turn(
            client=self.clients[Stage.USER_SIMULATOR],
            brief=scenario_brief(self.user_scenario) or self.task_text,
            messages=self.messages,
        )
        self._spend(reply.calls)
        opening = not any(m.get("role") == "user" for m in self.messages)
        # Nothing is handled before the customer has spoken: an opening marked done still opens the conversation.
        if (reply.data["done"] and not opening) or not reply.data["message"].strip():
            return None
        return {"role": "user", "content": reply.data["message"]}


def api_specs(apis: Iterable[Any]) -> dict[str, dict]:
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


def episode_start(
    *,
    domain: Any,
    task: Any,
    apis: Iterable[Any],
    clients: StageClients,
    limits: EpisodeLimits,
    reference: Any = None,
) -> Episode:
    """A new episode on a task: the agent's system prompt, then the customer's opening message.

    A task with a τ²-style `user_scenario` is the user simulator's private brief: the simulator writes
    the opening (LLMError when it cannot), and the brief itself is never shown to the agent. Other
    tasks' instructions are written as the customer's request and open the conversation as they are."""
    episode = Episode(
        domain_name=domain.name,
        policy=domain.policy,
        task_text=task.instruction,
        expected_outcome=task.expected_outcome,
        user_scenario=task.user_scenario or {},
        apis=api_specs(apis),
        tools=[api.as_tool() for api in apis],
        state=domain.initial_state or {},
        state_schema=domain.state_schema,
        clients=clients,
        limits=limits,
        reference=reference,
    )
    system = agent_system_prompt(domain_name=domain.name, policy=domain.policy)
    episode.messages = [{"role": "system", "content": system}]
    if scenario_brief(episode.user_scenario):
        opening = episode.user_message()
        if opening is None:
            raise LLMError("invalid_output", "the user simulator wrote no opening message")
        episode.messages.append(opening)
    else:
        episode.messages.append({"role": "user", "content": task.instruction})
    return episode


@dataclass
class EpisodeOutcome:
    violations: list[Violation]
    verdict: dict | None  # None when not judged


JUDGE_IF_CLEAN = "if_clean"  # rollouts: only conversations that pass the rules are worth a judge call
JUDGE_ALWAYS = "always"  # RL: the trainer needs a reward for every episode that ended by itself
JUDGE_NEVER = "never"  # abandoned: there is no outcome to score


def episode_conclude(*, episode: Episode, judge: str, violations: Sequence[Violation] = ()) -> EpisodeOutcome:
    """The end of every episode: the deterministic rules, then (per `judge`) the LLM judge."""
    found = rules_check(episode.messages, episode.tools) + simulator_failures(episode.steps) + list(violations)
    if judge == JUDGE_NEVER or (judge == JUDGE_IF_CLEAN and found):
        return EpisodeOutcome(found, None)
    verdict = judge_run(
        client=episode.clients[Stage.JUDGE],
        messages=episode.messages,
        tools=episode.tools,
        task=f"{episode.task_text}\nExpected outcome: {episode.expected_outcome}",
        policy=episode.policy,
        world=world_evidence(episode.initial_state or {}, episode.steps),
        prompt_version=episode.clients.judge_prompt,
    )
    if verdict.get("llm_call"):
        episode.llm_calls.append(verdict["llm_call"])
    return EpisodeOutcome(found, verdict)
