"""Fitting prompt parts into a character budget by rules that keep what a stage needs, noting every cut.

Sizes are characters of compact JSON, the form the parts are sent in; the budget comes from the
client (`LLMClient.prompt_chars_available`). The notes go into the prompt itself, so the model knows
the evidence is partial, and with it into the LLM call's stored request.
"""

from simia_web.core.jsonutil import compact_json


def json_size(value: object) -> int:
    return len(compact_json(value))


def text_clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[: max(0, limit)]}… [{len(text) - limit} characters cut]"


def messages_fit(messages: list[dict], budget: int, *, keep_first: int = 0) -> tuple[list[dict], list[str]]:
    """The first `keep_first` and then the latest messages that fit `budget`, long contents clipped.

    Returns the messages (each with its original `index`) and notes of what was cut."""
    per_message = max(400, budget // 4)
    clipped_at: list[int] = []

    def clipped(index: int, message: dict) -> dict:
        content = message.get("content")
        if isinstance(content, str) and len(content) > per_message:
            clipped_at.append(index)
            message = {**message, "content": text_clip(content, per_message)}
        return {"index": index, **message}

    head = [clipped(i, m) for i, m in enumerate(messages[:keep_first])]
    used = sum(json_size(m) for m in head)
    kept: list[dict] = []
    for index in range(len(messages) - 1, keep_first - 1, -1):
        message = clipped(index, messages[index])
        size = json_size(message)
        if used + size > budget:
            if clipped_at and clipped_at[-1] == index:
                clipped_at.pop()  # not shown after all
            break
        kept.append(message)
        used += size
    kept.reverse()
    notes = []
    if clipped_at:
        shown = sorted(clipped_at)
        notes.append(f"contents of {len(shown)} messages cut to {per_message} characters (e.g. {shown[:5]})")
    left_out = len(messages) - keep_first - len(kept)
    if left_out:
        notes.append(f"messages {keep_first}..{keep_first + left_out - 1} left out (older than the {len(kept)} shown)")
    return head + kept, notes


def tools_fit(tools: list[dict], room: int, cut: list[str]) -> list:
    """The tools within `room`: whole, else names and short descriptions, else as many names as fit."""
    if json_size(tools) <= room:
        return tools
    functions = [t.get("function") or {} for t in tools]
    described = tools_described(tools)
    if json_size(described) <= room:
        cut.append("tool parameter schemas left out")
        return described
    names = [f.get("name") for f in functions]
    while names and json_size(names) > room:
        names.pop()
    cut.append(f"tools shown by name only ({len(names)} of {len(functions)})")
    return names


def tools_described(tools: list[dict]) -> list[dict]:
    """Each tool by name and a short description, without its parameters."""
    return specs_described([t.get("function") or {} for t in tools])


def specs_described(specs: list[dict]) -> list[dict]:
    """Each API or function spec by name and a short description, without its parameters."""
    return [{"name": s.get("name"), "description": text_clip(s.get("description") or "", 160)} for s in specs]
