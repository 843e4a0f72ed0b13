"""Context budget: how large an answer each stage asks for, and fitting a prompt into what is left.

Prompts are sized in characters and converted with the profile's characters-per-token ratio, which
starts low (conservative) and is learned from the `usage` the endpoint returns. A prompt that does not
fit loses, in this order: the middle of huge tool results, the oldest turns of a conversation (never
the system message or the first user message, never a tool call without its results) and finally the
middle of the longest messages. Every cut is reported, so it can be recorded on the call.
"""

from dataclasses import dataclass

from .models import EndpointProfile, Stage

# A user turn or a verdict is short; APIs, tasks and whole trajectories are long.
STAGE_MAX_TOKENS: dict[str, int] = {
    Stage.API_SYNTHESIS: 2048,
    Stage.TASK_SYNTHESIS: 2048,
    Stage.AMPLIFY: 2048,
    Stage.AGENT: 768,
    Stage.SIMULATOR: 768,
    Stage.USER_SIMULATOR: 256,
    Stage.JUDGE: 512,
}
CONSERVATIVE_CHARS_PER_TOKEN = 2.0  # JSON full of ids, whose digits some tokenizers split one by one; prose runs to 4
ASSUMED_CONTEXT_WINDOW = 8192  # until the server reports or names its own: the smallest common window today
MESSAGE_OVERHEAD_CHARS = 16  # a chat template's role markers and separators around each message
# Room kept for what character counts miss (tokenizer variance, a server's own tool prompt).
SAFETY_TOKENS = 64
SAFETY_SHARE = 0.05
_CUT_MARK = "\n[... {} characters cut ...]\n"


def stage_max_tokens(profile: EndpointProfile, stage: str) -> int:
    """The answer size a stage asks for: the profile's per-stage setting, else the stage default under its cap."""
    configured = (profile.stage_max_tokens or {}).get(stage)
    if configured:
        return int(configured)
    return min(STAGE_MAX_TOKENS.get(stage, profile.max_tokens), profile.max_tokens)


def context_window(profile: EndpointProfile) -> int:
    return profile.context_window or ASSUMED_CONTEXT_WINDOW


def prompt_token_room(window: int, max_tokens: int) -> int:
    """Tokens a prompt may take beside an answer of max_tokens."""
    return max(0, int(window * (1 - SAFETY_SHARE)) - SAFETY_TOKENS - max_tokens)


def message_chars(message: dict) -> int:
    size = MESSAGE_OVERHEAD_CHARS + len(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        size += len(function.get("name") or "") + len(function.get("arguments") or "") + len(call.get("id") or "")
    return size


def prompt_chars(messages: list[dict], extra_chars: int = 0) -> int:
    return sum(message_chars(m) for m in messages) + extra_chars


@dataclass
class Fitted:
    messages: list[dict]
    cuts: list[dict]  # [{"what": "tool_result"|"turns"|"content", "index": first original index, "chars": n}]
    chars: int  # the fitted prompt's size, extra_chars included

    def fits(self, available: int) -> bool:
        return self.chars <= available


def messages_fit(messages: list[dict], *, available: int, extra_chars: int = 0) -> Fitted:
    """The messages cut down to `available` characters (beside `extra_chars` of tools or schema), if they can be."""
    total = prompt_chars(messages, extra_chars)
    if total <= available:
        return Fitted(messages, [], total)
    fitted = list(messages)
    cuts: list[dict] = []
    excess = total - available

    # 1. A tool result may use at most an eighth of the room: the agent needs its gist, not all of it.
    result_cap = max(2000, available // 8)
    for index, message in enumerate(fitted):
        if excess <= 0:
            break
        content = message.get("content") or ""
        if message.get("role") == "tool" and len(content) > result_cap:
            fitted[index] = {**message, "content": _cut_middle(content, result_cap)}
            saved = len(content) - len(fitted[index]["content"])
            excess -= saved
            cuts.append({"what": "tool_result", "index": index, "chars": saved})

    # 2. The oldest turns between the opening (system, first user message) and the latest turn go first.
    if excess > 0:
        head = _opening_length(fitted)
        groups = _turn_groups(fitted, head)
        dropped_from, dropped, saved = None, 0, 0
        while excess > 0 and len(groups) > 1:
            start, end = groups.pop(0)
            chars = sum(message_chars(m) for m in fitted[start:end])
            dropped_from = start if dropped_from is None else dropped_from
            dropped += end - start
            saved += chars
            excess -= chars
        if dropped and dropped_from is not None:
            keep_from = dropped_from + dropped
            fitted = fitted[:dropped_from] + fitted[keep_from:]
            cuts.append({"what": "turns", "index": dropped_from, "count": dropped, "chars": saved})

    # 3. Last resort: the middle of the longest messages (a huge policy, state or trajectory).
    while excess > 0:
        longest = max(range(len(fitted)), key=lambda i: len(fitted[i].get("content") or ""), default=None)
        content = fitted[longest].get("content") or "" if longest is not None else ""
        if longest is None or len(content) < 400:  # nothing left worth cutting: the caller learns it does not fit
            break
        keep = max(200, len(content) - excess - len(_CUT_MARK) - 8)
        fitted[longest] = {**fitted[longest], "content": _cut_middle(content, keep)}
        saved = len(content) - len(fitted[longest]["content"])
        if saved <= 0:
            break
        excess -= saved
        cuts.append({"what": "content", "index": longest, "chars": saved})
    return Fitted(fitted, cuts, available + excess)


def _opening_length(messages: list[dict]) -> int:
    """How many leading messages are always kept: the system message(s) and the first user message."""
    index = 0
    while index < len(messages) and messages[index].get("role") == "system":
        index += 1
    if index < len(messages) and messages[index].get("role") == "user":
        index += 1
    return index


def _turn_groups(messages: list[dict], start: int) -> list[tuple[int, int]]:
    """[start, end) spans after the opening that are dropped whole: an assistant turn with its tool results."""
    groups = []
    index = start
    while index < len(messages):
        end = index + 1
        if messages[index].get("role") == "assistant" and messages[index].get("tool_calls"):
            while end < len(messages) and messages[end].get("role") == "tool":
                end += 1
        groups.append((index, end))
        index = end
    return groups


def _cut_middle(text: str, keep: int) -> str:
    """The text's start and end, `keep` characters in all, with the cut marked."""
    if len(text) <= keep:
        return text
    mark = _CUT_MARK.format(len(text) - keep)
    head = max(0, (keep - len(mark)) * 2 // 3)
    tail = max(0, keep - len(mark) - head)
    return text[:head] + mark + (text[-tail:] if tail else "")
