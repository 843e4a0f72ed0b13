"""Fitting prompt parts into a character budget by rules that keep what a stage needs, noting every cut.

Sizes are characters of compact JSON, the form the parts are sent in; the budget comes from the
client (`LLMClient.prompt_chars_available`). The notes go into the prompt itself, so the model knows
the evidence is partial, and with it into the LLM call's stored request.
"""

import json


def json_size(value) -> int:
    return len(compact_json(value))


def compact_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[: max(0, limit)]}… [{len(text) - limit} characters cut]"


def messages_fit(messages: list[dict], budget: int, *, keep_first: int = 0) -> tuple[list[dict], list[str]]:
    """The first `keep_first` and then the latest messages that fit `budget`, long contents clipped.

    Returns the messages (each with its original `index`) and notes of what was cut."""
    notes = []
    per_message = max(400, budget // 4)
    clipped = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, str) and len(content) > per_message:
            notes.append(f"message {index}: content cut from {len(content)} to {per_message} characters")
            message = {**message, "content": text_clip(content, per_message)}
        clipped.append({"index": index, **message})
    head, tail = clipped[:keep_first], clipped[keep_first:]
    used = sum(json_size(m) for m in head)
    kept: list[dict] = []
    for message in reversed(tail):
        size = json_size(message)
        if used + size > budget:
            break
        kept.append(message)
        used += size
    kept.reverse()
    left_out = len(tail) - len(kept)
    if left_out:
        first = tail[0]["index"]
        notes.append(f"messages {first}..{first + left_out - 1} left out (older than the {len(kept)} shown)")
    return head + kept, notes
