"""Post-processing of amplified trajectories, beside the shared rules in rules.py.

An amplified conversation is written by the LLM in one pass, so it arrives untrusted: it is first
normalized into the canonical format (without hiding mistakes: arguments that are not JSON stay
text so the rules can name them), then safe repairs are applied and recorded, then every rule runs.
"""

import json

from simia_web.curation.canonical import conversation_text, message_text

from .rules import (
    DEFAULT_MAX_MESSAGES,
    DEFAULT_MIN_MESSAGES,
    Violation,
    merge_consecutive_assistant,
    rules_check,
    shingles,
    similarity,
)

NEAR_DUPLICATE_THRESHOLD = 0.8


def amplified_normalize(raw_messages) -> tuple[list[dict], list[Violation]]:
    """Canonical messages from an LLM answer; anything that cannot be a message is a violation."""
    if not isinstance(raw_messages, list):
        return [], [Violation("malformed_output", None, f"messages is a {type(raw_messages).__name__}, not a list")]
    messages, found = [], []
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            found.append(Violation("malformed_output", index, f"message {index} is not an object; dropped"))
            continue
        content = raw.get("content")
        message = {
            "role": raw.get("role") if isinstance(raw.get("role"), str) else "",
            "content": content if isinstance(content, str) else message_text(raw) if isinstance(content, list) else "",
        }
        if content is not None and not isinstance(content, str | list):
            message["content"] = json.dumps(content, ensure_ascii=False)  # e.g. a tool result given as an object
        calls = raw.get("tool_calls")
        if calls:
            message["tool_calls"] = [
                _call_normalize(call, index, j) for j, call in enumerate(calls if isinstance(calls, list) else [calls])
            ]
        if message["role"] == "tool":
            message["tool_call_id"] = str(raw.get("tool_call_id") or "")
        messages.append(message)
    return messages, found


def _call_normalize(call, index: int, j: int) -> dict:
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call.get("id") or f"call_{index}_{j}"),
        "type": "function",
        "function": {"name": str(function.get("name") or ""), "arguments": arguments},
    }


def assistant_turns_merge(messages: list[dict]) -> tuple[list[dict], list[Violation]]:
    """Merge back-to-back assistant turns where nothing is lost or reordered: two text turns, or a
    text turn followed by a turn that calls tools (the text becomes the calls' preamble)."""
    merged, fixes = merge_consecutive_assistant(messages)
    out: list[dict] = []
    for message in merged:
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous.get("role") == "assistant" == message.get("role")
            and not previous.get("tool_calls")
            and message.get("tool_calls")
            and not message_text(message).strip()
        ):
            out[-1] = {**message, "content": message_text(previous)}
            fixes.append(
                Violation("consecutive_assistant", len(out) - 1, "merged a text turn into the next tool call", True)
            )
            continue
        out.append(message)
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
    raw_messages,
    tools: list[dict],
    *,
    seed_label: str,
    seed_messages: list[dict],
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> tuple[list[dict], list[Violation]]:
    """(canonical messages after safe repairs, every finding incl. the recorded repairs)."""
    messages, found = amplified_normalize(raw_messages)
    messages, fixes = assistant_turns_merge(messages)
    found += fixes
    found += rules_check(messages, tools, min_messages=min_messages, max_messages=max_messages)
    found += near_duplicate_violations(messages, [(seed_label, seed_messages)], threshold)
    return messages, found
