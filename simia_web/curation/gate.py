"""The one gate for conversations people store in the workspace: what the editor saves, fix and accept (on the
page or over REST), and the text a revert brings back. A refusal is a FormatError naming the field.

Text a person writes must be a conversation an export can carry: the strict normaliser's shape, then each tool
call checked as the rollout checks it (a declared tool, arguments that are a JSON object matching its
parameters), then the OpenAI chat record's rules that every export format starts from (each result answers an
open call, each call gets its result). A revert brings back text that was stored before (the generated
version kept its rule violations), so it is held to the strict normaliser's shape only.
"""

from simia_web.formats import FormatError
from simia_web.formats.conversation import messages_strict, tool_schemas
from simia_web.formats.openai import openai_problems
from simia_web.formats.rules import call_violations


def messages_restored(messages) -> list[dict]:
    """An earlier version's messages, in the canonical shape."""
    return messages_strict(messages)


def messages_written(messages, tools: list[dict]) -> list[dict]:
    """Messages a person wrote, in the canonical shape, or a FormatError naming the first field that is wrong."""
    canonical = messages_strict(messages)
    schemas = tool_schemas(tools)
    for i, message in enumerate(canonical):
        for j, call in enumerate(message.get("tool_calls") or []):
            for violation in call_violations(call, schemas, i):
                part = "name" if violation.code == "unknown_tool" else "arguments"
                raise FormatError(f"messages[{i}].tool_calls[{j}].function.{part}", violation.detail)
    problems = openai_problems({"messages": canonical, "tools": tools})
    if problems:
        field, separator, detail = problems[0].partition(": ")
        raise FormatError(field, detail) if separator else FormatError("messages", problems[0])
    return canonical
