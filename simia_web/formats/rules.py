"""Deterministic checks shared by rollouts, amplification, seed pre-filtering and RL sessions.

Each finding is a Violation with a stable code, the message index it concerns and a detail. An
amplified conversation is written by the LLM in one pass, so it arrives untrusted: it is first
normalized (without hiding mistakes: arguments that are not JSON stay text so the rules can name
them), then safe repairs are applied and recorded, then every rule runs (amplified_check).
"""

from simia_web.core.schemas import SCHEMA_FAILURES, schema_errors

from .conversation import (
    ROLES,
    Violation,
    conversation_text,
    message_text,
    messages_lenient,
    parse_arguments,
    tool_schemas,
)

DEFAULT_MIN_MESSAGES = 3
DEFAULT_MAX_MESSAGES = 200
NEAR_DUPLICATE_THRESHOLD = 0.8


def argument_violations(schema: dict, arguments: dict, index: int | None, tool: str) -> list[Violation]:
    """Schema problems of one call's arguments: missing_required, unknown_parameter, wrong_type, ..."""
    found = []
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name in arguments:
            if name not in properties:
                found.append(Violation("unknown_parameter", index, f"{tool}: unknown parameter {name!r}"))
    try:
        errors = schema_errors(schema, arguments)
    except SCHEMA_FAILURES as exc:  # the tool's own schema is broken
        return [Violation("tool_schema_invalid", index, f"{tool}: {getattr(exc, 'message', exc)}")]
    for error in errors:
        if error.validator == "additionalProperties":
            continue  # reported above as unknown_parameter
        code = {"required": "missing_required", "type": "wrong_type"}.get(str(error.validator), "arguments_invalid")
        where = "/".join(str(p) for p in error.absolute_path)
        found.append(Violation(code, index, f"{tool}: {where + ': ' if where else ''}{error.message}"))
    return found


def call_violations(call: dict, schemas: dict[str, dict], index: int | None) -> list[Violation]:
    """Problems of a single tool call: the same check the rollout makes before asking the simulator."""
    name = (call.get("function") or {}).get("name", "")
    if name not in schemas:
        return [Violation("unknown_tool", index, f"no tool named {name!r}")]
    arguments, error = parse_arguments(call)
    if error:
        return [Violation("arguments_not_json", index, f"{name}: {error}")]
    return argument_violations(schemas[name], arguments, index, name)


def simulator_failures(steps: dict[str, dict]) -> list[Violation]:
    """Tool messages (by index) the simulator gave no answer for: the agent was told the service is down,
    which the real API never said, so the conversation is not kept as training data."""
    return [
        Violation("simulator_failed", int(index), "; ".join(step.get("errors") or []))
        for index, step in steps.items()
        if index.isdigit() and isinstance(step, dict) and step.get("simulator_failed")
    ]


def ends_with_answer(messages: list[dict]) -> bool:
    """Whether the conversation ends with the assistant's non-empty text answer (no tool call pending)."""
    last = messages[-1] if messages else {}
    return last.get("role") == "assistant" and not last.get("tool_calls") and bool(message_text(last).strip())


def _turn_violations(message: dict, index: int, previous_role: str | None) -> list[Violation]:
    """What is wrong with one turn where it stands: its place after the turn before, and its emptiness."""
    role = message["role"]
    found = []
    if role == "system" and index > 0 and previous_role != "system":
        found.append(Violation("roles_out_of_order", index, "system message after the conversation started"))
    if role == "assistant" and previous_role in {None, "system"}:
        found.append(Violation("roles_out_of_order", index, "assistant speaks before the user"))
    if role == "assistant" and previous_role == "assistant" and not message.get("tool_calls"):
        found.append(Violation("consecutive_assistant", index, "two assistant turns in a row"))
    if role in {"user", "assistant"} and not message_text(message).strip() and not message.get("tool_calls"):
        found.append(Violation("empty_message", index, f"empty {role} message"))
    return found


def rules_check(
    messages: list[dict],
    tools: list[dict],
    *,
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    require_final_answer: bool = True,
) -> list[Violation]:
    """Every rule over a whole conversation. The messages are not changed."""
    schemas = tool_schemas(tools)
    found: list[Violation] = []
    open_calls: dict[str, int] = {}
    previous_role = None
    if not (min_messages <= len(messages) <= max_messages):
        found.append(
            Violation("length_out_of_bounds", None, f"{len(messages)} messages; allowed {min_messages}..{max_messages}")
        )
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            found.append(Violation("roles_out_of_order", index, f"unknown role {role!r}"))
            continue
        found.extend(_turn_violations(message, index, previous_role))
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                del open_calls[call_id]
            else:
                found.append(Violation("result_without_call", index, f"tool result for unknown call {call_id!r}"))
        elif open_calls and role != "tool":
            for call_id, call_index in open_calls.items():
                found.append(Violation("call_without_result", call_index, f"call {call_id!r} has no result"))
            open_calls.clear()
        for call in message.get("tool_calls") or []:
            open_calls[call.get("id", "")] = index
            found.extend(call_violations(call, schemas, index))
        previous_role = role
    for call_id, call_index in open_calls.items():
        found.append(Violation("call_without_result", call_index, f"call {call_id!r} has no result"))
    if require_final_answer and not ends_with_answer(messages):
        found.append(
            Violation(
                "no_final_answer",
                len(messages) - 1 if messages else None,
                "the conversation does not end with a non-empty assistant answer",
            )
        )
    return found


def shingles(text: str, size: int = 3) -> set[tuple[str, ...]]:
    words = text.lower().split()
    if len(words) < size:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def similarity(a: set, b: set) -> float:
    """Jaccard similarity of two shingle sets."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def assistant_turns_merge(messages: list[dict]) -> tuple[list[dict], list[Violation]]:
    """Merge back-to-back assistant turns where nothing is lost or reordered: two text turns, or a text turn
    followed by a turn that calls tools (the text becomes the calls' preamble). Each merge is recorded."""
    out: list[dict] = []
    fixes = []
    for message in messages:
        previous = out[-1] if out else {}
        mergeable = previous.get("role") == "assistant" == message.get("role") and not previous.get("tool_calls")
        if mergeable and not message.get("tool_calls"):
            previous["content"] = "\n\n".join(t for t in (message_text(previous), message_text(message)) if t)
            fixes.append(Violation("consecutive_assistant", len(out) - 1, "merged two assistant turns", True))
        elif mergeable and not message_text(message).strip():
            out[-1] = {**message, "content": message_text(previous)}
            fixes.append(
                Violation("consecutive_assistant", len(out) - 1, "merged a text turn into the next tool call", True)
            )
        else:
            out.append(dict(message))
    return out, fixes


def near_duplicate_violations(
    messages: list[dict], others: list[tuple[str, list[dict]]], threshold: float = NEAR_DUPLICATE_THRESHOLD
) -> list[Violation]:
    """A near_duplicate violation for the first of `others` (label, messages) this conversation copies."""
    words = shingles(conversation_text(messages))
    for label, other in others:
        score = similarity(words, shingles(conversation_text(other)))
        if score >= threshold:
            return [Violation("near_duplicate", None, f"near-duplicate of {label} (similarity {score:.2f})")]
    return []


def amplified_check(
    raw_messages: object,
    tools: list[dict],
    *,
    seed_label: str,
    seed_messages: list[dict],
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> tuple[list[dict], list[Violation]]:
    """(canonical messages after safe repairs, every finding incl. the recorded repairs)."""
    messages, found = messages_lenient(raw_messages)
    messages, fixes = assistant_turns_merge(messages)
    found += fixes
    found += rules_check(messages, tools, min_messages=min_messages, max_messages=max_messages)
    found += near_duplicate_violations(messages, [(seed_label, seed_messages)], threshold)
    return messages, found
