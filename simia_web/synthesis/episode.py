"""One conversation between an agent and the simulated environment (and optionally a simulated user).

Rollouts drive it with the teacher agent; RL sessions drive it one agent message at a time.
"""

import copy
import json
from dataclasses import dataclass, field

from simia_web.curation.canonical import parse_arguments, tool_schemas
from simia_web.llm.client import LLMClient, LLMError
from simia_web.llm.models import LLMCall
from simia_web.llm.services import llm_call_ids

from .rules import call_violations
from .simulator import simulate_call

USER_PROMPT_VERSION = "user-sim-v1"
USER_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}},
    "required": ["message", "done"],
}


def agent_system_prompt(*, domain_name: str, policy: str) -> str:
    return (
        f"You are a customer-service agent for the {domain_name} domain. Use the tools to look up and change "
        "records; never invent data a tool could give you. Follow the policy below. When the request is handled, "
        "reply to the user with a short final answer.\n\n# Policy\n" + (policy or "(no written policy)")
    )


@dataclass
class Episode:
    domain_name: str
    policy: str
    task_text: str
    apis: dict[str, dict]  # name -> spec (description, parameters, returns, kind, touches)
    tools: list[dict]
    state: dict
    state_schema: dict
    simulator: LLMClient
    messages: list[dict] = field(default_factory=list)
    steps: dict[str, dict] = field(default_factory=dict)
    errors: int = 0
    llm_calls: list[LLMCall] = field(default_factory=list)
    termination_reason: str = ""

    def __post_init__(self):
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

    def handle_assistant(self, message: dict) -> list[dict]:
        """Append the agent's message and answer each of its tool calls; returns the tool messages."""
        message = {
            "role": "assistant",
            "content": message.get("content"),
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
        }
        self.messages.append(message)
        index = len(self.messages) - 1
        results = []
        for call in message.get("tool_calls") or []:
            results.append(self._answer_call(call, index))
        return results

    def _answer_call(self, call: dict, call_index: int) -> dict:
        name = (call.get("function") or {}).get("name", "")
        problems = call_violations(call, self._schemas, call_index)
        if problems:
            # Checked before any LLM is asked: the agent gets a structured error it can recover from.
            content = {"error": "invalid_tool_call", "details": [p.detail for p in problems]}
            step = {"patch": [], "state_after": self.state, "errors": [p.detail for p in problems], "rejected": True}
        else:
            arguments, _ = parse_arguments(call)
            outcome = simulate_call(
                client=self.simulator,
                api={"name": name, **self.apis.get(name, {})},
                arguments=arguments,
                task=self.task_text,
                state=self.state,
                state_schema=self.state_schema,
                history=self.messages,
            )
            self.llm_calls += outcome["calls"]
            self.state = outcome["state_after"]
            content = outcome["response"]
            step = {"patch": outcome["patch"], "state_after": self.state, "errors": outcome["errors"]}
            if outcome["failed"]:
                step["simulator_failed"] = True
        if step["errors"]:
            self.errors += 1
        tool_message = {
            "role": "tool",
            "tool_call_id": call.get("id", ""),
            "content": content if isinstance(content, str) else json.dumps(content, ensure_ascii=False),
        }
        self.messages.append(tool_message)
        self.steps[str(len(self.messages) - 1)] = step
        return tool_message

    def user_reply(self, client: LLMClient) -> dict | None:
        """The simulated user's next message, or None when the user is satisfied (or the LLM failed)."""
        transcript = [
            {"role": m["role"], "content": m.get("content")}
            for m in self.messages
            if m.get("role") in {"user", "assistant"}
        ]
        try:
            reply = client.structured(
                messages=[
                    {
                        "role": "system",
                        "content": "You play a customer talking to a support agent. Stay in character, "
                        "reveal information only when asked, and set done=true once your request is fully handled or "
                        "clearly cannot be.\n\nYour situation:\n" + self.task_text,
                    },
                    {"role": "user", "content": json.dumps({"conversation": transcript}, ensure_ascii=False)},
                ],
                schema=USER_SCHEMA,
                schema_name="user_turn",
                prompt_version=USER_PROMPT_VERSION,
            )
        except LLMError:
            return None
        self.llm_calls += reply.calls
        if reply.data["done"] or not reply.data["message"].strip():
            return None
        message = {"role": "user", "content": reply.data["message"]}
        self.messages.append(message)
        return message
