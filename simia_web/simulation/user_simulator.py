"""The simulated customer: speaks from a private brief, one message at a time, as τ²-bench's user simulator.

A τ² task's `user_scenario` (reason for call, known and unknown info, how to behave) is the brief; the
simulator writes every customer message, the first one included, and the brief itself never reaches
the agent. Tasks without a scenario give their instruction as the brief.
"""

from simia_web.core.jsonutil import compact_json
from simia_web.formats.conversation import message_text
from simia_web.llm.client import LLMClient, LLMReply

from .prompt_fit import messages_fit, text_clip

PROMPT_VERSION = "user-sim-v2"  # v2: a private brief, the opening written by the simulator, a fitted transcript
ANSWER = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}},
    "required": ["message", "done"],
}
# Asked for with a bounded message, so that a grammar (llama.cpp) stops a small model within the stage's tokens.
SCHEMA = {
    **ANSWER,
    "properties": {"message": {"type": "string", "minLength": 1, "maxLength": 600}, "done": {"type": "boolean"}},
    "additionalProperties": False,
}
# τ²-bench's scenario fields, in the order a person would think of them.
BRIEF_PARTS = (
    ("reason_for_call", "Why you are calling"),
    ("known_info", "What you know"),
    ("unknown_info", "What you do not know"),
    ("task_instructions", "How to behave"),
)

INSTRUCTIONS = (
    "You play a customer talking to a customer-service agent, following your private brief below. Write only "
    "the customer's next message, in the first person, as a real customer would: one request at a time, short, "
    "giving details (names, ids, zip codes) only when the agent asks for them. Never reveal or quote the brief, "
    "never say you are simulated, and never invent information the brief does not give you; say you do not know "
    "what the brief says you do not know. Set done=true (with a short goodbye as the message) once your request "
    "is fully handled, or clearly cannot be; otherwise done=false."
)


def scenario_brief(user_scenario: dict) -> str:
    """The private brief of a τ²-style scenario, or "" for a task without one."""
    instructions = (user_scenario or {}).get("instructions")
    if isinstance(instructions, str):
        return instructions.strip()
    if not isinstance(instructions, dict):
        return ""
    parts = [
        f"{label}: {instructions[key].strip()}"
        for key, label in BRIEF_PARTS
        if isinstance(instructions.get(key), str) and instructions[key].strip()
    ]
    persona = user_scenario.get("persona")
    if isinstance(persona, str) and persona.strip():
        parts.append(f"Who you are: {persona.strip()}")
    return "\n".join(parts)


def user_turn(*, client: LLMClient, brief: str, messages: list[dict]) -> LLMReply:
    """The customer's next message as {"message", "done"}; with no agent message yet, the opening one.

    The user sees only the spoken turns (not tool traffic), the latest first when they must be cut."""
    budget = client.prompt_chars_available(SCHEMA)
    system = f"{INSTRUCTIONS}\n\n# Your private brief\n{text_clip(brief, budget // 3)}"
    spoken = [
        {"role": "customer" if m["role"] == "user" else "agent", "content": message_text(m)}
        for m in messages
        if m.get("role") in {"user", "assistant"} and message_text(m).strip()
    ]
    transcript, cut = messages_fit(spoken, budget - len(system) - 200)
    if transcript:
        request: dict[str, object] = {
            "conversation": [{"role": m["role"], "content": m["content"]} for m in transcript]
        }
        if cut:
            request["cut"] = cut
    else:
        request = {"conversation": [], "instruction": "Write your first message to the agent."}
    return client.structured(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": compact_json(request)}],
        schema=SCHEMA,
        schema_name="user_turn",
        accept=ANSWER,
        prompt_version=PROMPT_VERSION,
    )
