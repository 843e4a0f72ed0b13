"""The environment simulator: answers a tool call and returns a JSON Patch to the explicit world state."""

import re
from typing import Any

import jsonpatch
import jsonpointer
import orjson
from django.conf import settings

from simia_web.core.json_input import json_parse
from simia_web.core.jsonutil import compact_json
from simia_web.core.schemas import SCHEMA_FAILURES, first_error
from simia_web.llm.client import LLMClient, LLMError, LLMReply

from .prompt_fit import json_size, messages_fit, text_clip
from .state_slice import state_view

PROMPT_VERSION = "simulator-v4"  # v4: paths go into a collection; add and replace carry a value; reads patch nothing
# Operations in one patch, whatever the server was asked for (the prompt's schema allows 6), and the characters
# of compact JSON one patch may add to the state (an answer holds a few thousand; only a copy writes more).
PATCH_MAX_OPERATIONS = 32
PATCH_MAX_GROWTH = 1 << 20

# What an answer must be: any JSON response, and a patch of operations (applying it is checked apart).
ANSWER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "response": {"description": "The API's JSON response, as the real backend would return it."},
        "patch": {
            "type": "array",
            "description": "RFC 6902 JSON Patch operations applied to the world state; empty for reads.",
            "maxItems": PATCH_MAX_OPERATIONS,
            "items": {
                "type": "object",
                "properties": {
                    "op": {"enum": ["add", "remove", "replace", "move", "copy", "test"]},
                    "path": {"type": "string"},
                    "from": {"type": "string"},
                    "value": {},
                },
                "required": ["op", "path"],
            },
        },
    },
    "required": ["response", "patch"],
}
# What the server is asked for: the response as JSON text and a short patch of bounded values, which a grammar
# (llama.cpp) can hold a model to and stop within the stage's tokens; a response object could go on forever.
_SEGMENT = '(/[^/"\\\\]{1,60})'  # bounded: "[^/]+" let a small model write a path of 700 tokens
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]{1,60}")  # safe in a pattern as it is
_SCALARS = [{"type": "string", "maxLength": 120}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
_VALUE = {"anyOf": [*_SCALARS, {"type": "object", "additionalProperties": {"anyOf": _SCALARS}}]}


def answer_schema(state: dict, *, writes: bool = True) -> dict:
    """The answer asked for one call. A read-only API's patch is empty. A path goes into one of the state's
    collections when their names are plain, and add and replace carry a value: a small model held to it
    cannot write a patch that misses the state at its first step, replaces a whole collection, or leaves
    out what to write (the failures SmolLM2-135M made most)."""
    keys = sorted(state) if isinstance(state, dict) else []
    if keys and all(_PLAIN_KEY.fullmatch(key) for key in keys):
        pointer = f"^/({'|'.join(keys)}){_SEGMENT}{{1,5}}$"
    else:
        pointer = f"^{_SEGMENT}{{1,6}}$"
    path = {"type": "string", "pattern": pointer}
    operation = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"op": {"enum": ["add", "replace"]}, "path": path, "value": _VALUE},
                "required": ["op", "path", "value"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"op": {"const": "remove"}, "path": path},
                "required": ["op", "path"],
                "additionalProperties": False,
            },
        ]
    }
    return {
        "type": "object",
        "properties": {
            "response": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "The API's response as JSON text, as the real backend would return it.",
            },
            "patch": {**ANSWER["properties"]["patch"], "maxItems": 6 if writes else 0, "items": operation},
        },
        "required": ["response", "patch"],
        "additionalProperties": False,
    }


SYSTEM = (
    "You simulate the backend of an API. Given the API specification, the current world state and the call, "
    "return the exact JSON response the real API would give (as JSON text), and a JSON Patch (RFC 6902) that "
    "applies the call's effects to the world state. Read-only APIs never change the state. Invalid requests "
    "(unknown ids, violated preconditions) return an error response and an empty patch. Stay consistent with the "
    "state and with earlier responses."
)


def simulator_messages(
    *, api: dict, arguments: dict, task: str, state: dict, history: list[dict], budget: int
) -> tuple[list[dict], list[str]]:
    """The prompt within `budget` characters, and notes of what was cut to fit.

    The call itself is always whole; the task and the conversation so far get at most a quarter of the
    budget each (the latest turns kept); the state, or the slice of it the call names, the rest."""
    request = {"api": api, "arguments": arguments, "task": text_clip(task, budget // 8)}
    conversation = [m for m in history if m.get("role") != "system"]
    shown, cut = messages_fit(conversation, budget // 4)
    request["history"] = [{k: v for k, v in m.items() if k != "index"} for m in shown]
    room = budget - len(SYSTEM) - json_size(request) - 200
    view, state_cut = state_view(state, arguments, room)
    request.update(view)
    cut += state_cut
    if cut:
        request["cut"] = cut
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": compact_json(request)}], cut


def state_apply(state: dict, patch: list[dict], state_schema: dict | None) -> tuple[dict, str | None]:
    """Apply a patch to a copy of the state and validate the result; on error the state is unchanged.

    A patch is at most PATCH_MAX_OPERATIONS operations, and what each one adds is counted before it runs: the
    patch adds at most PATCH_MAX_GROWTH characters of compact JSON, and the state stays within
    SIMIA_JSON_MAX_BYTES. A `copy` is the one operation that writes more than the answer holds: copying a
    collection into itself doubled the state each time (19 of them made 35.6 MB and took 2 GB)."""
    if len(patch) > PATCH_MAX_OPERATIONS:
        return state, f"the patch has {len(patch)} operations; at most {PATCH_MAX_OPERATIONS} are applied"
    size = json_size(state)
    limit = min(size + PATCH_MAX_GROWTH, max(size, settings.SIMIA_JSON_MAX_BYTES))
    new_state = orjson.loads(orjson.dumps(state))  # a copy, several times faster than copy.deepcopy for JSON
    for position, operation in enumerate(patch):
        where = f"operation {position} ({operation.get('op')} {operation.get('path')})"
        try:
            size += _patch_growth(new_state, operation)
            if size > limit:
                return state, f"patch could not be applied: {where}: it would take the state over {limit:,} characters"
            new_state = jsonpatch.apply_patch(new_state, [operation], in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError) as exc:
            return state, f"patch could not be applied: {where}: {_patch_reason(exc)}"
    if state_schema:
        try:
            error = first_error(state_schema, new_state)
        except SCHEMA_FAILURES as exc:
            return state, f"the state schema cannot be used: {exc}"
        if error:
            return state, f"patched state breaks the state schema {error}"
    return new_state, None


def _patch_growth(state: dict, operation: dict) -> int:
    """At most how many characters the operation adds to the state: its value, or for a copy what it copies
    (what replace and remove take away is not subtracted: the bound only needs to hold)."""
    if operation.get("op") in ("add", "replace"):
        return json_size(operation.get("value"))
    if operation.get("op") == "copy" and isinstance(operation.get("from"), str):
        return json_size(jsonpointer.resolve_pointer(state, operation["from"], None))
    return 0


def _patch_reason(exc: Exception) -> str:
    """jsonpatch's reason without the document it quotes ("member 'x' not found in {...the whole state}")."""
    reason = str(exc)
    for quote in (" in {", " in ["):
        reason = reason.split(quote, 1)[0]
    return reason[:200]


def simulate_call(
    *, client: LLMClient, api: dict, arguments: dict, task: str, state: dict, state_schema: dict, history: list[dict]
) -> dict:
    """{"response", "patch", "state_after", "errors", "failed", "calls" (LLMCall rows), "cut" (what the prompt
    left out to fit)}; never raises for LLM trouble: when the simulator gives no usable answer, `failed` is set
    and the agent is told the service is down."""
    writes = api.get("kind") != "read"
    schema = answer_schema(state, writes=writes)
    messages, cut = simulator_messages(
        api=api,
        arguments=arguments,
        task=task,
        state=state,
        history=history,
        budget=client.prompt_chars_available(schema),
    )

    def ask(conversation: list[dict]) -> LLMReply:
        return client.structured(
            messages=conversation,
            schema=schema,
            schema_name="simulated_response",
            accept=ANSWER,
            prompt_version=PROMPT_VERSION,
        )

    try:
        reply = ask(messages)
    except LLMError as exc:
        return {
            "response": {"error": "The service is temporarily unavailable."},
            "patch": [],
            "state_after": state,
            "errors": [f"simulator failed: {exc}"],
            "failed": True,
            "calls": [],
            "cut": cut,
        }
    answer, calls = reply.data, list(reply.calls)
    new_state, error = _outcome(state, answer["patch"], state_schema, writes)
    if error:  # the response may well be right: a patch that does not apply is worth one correction
        try:
            retry = ask([*messages, *_patch_feedback(answer, error)])
        except LLMError:
            retry = None
        if retry is not None:
            calls += retry.calls
            retried_state, retry_error = _outcome(state, retry.data["patch"], state_schema, writes)
            if retry_error is None:
                answer, new_state, error = retry.data, retried_state, None
    return {
        "response": _response_value(answer["response"]),
        "patch": answer["patch"],
        "state_after": new_state,
        "errors": [error] if error else [],
        "failed": False,
        "calls": calls,
        "cut": cut,
    }


def _outcome(state: dict, patch: list[dict], state_schema: dict | None, writes: bool) -> tuple[dict, str | None]:
    if patch and not writes:
        return state, f"a read-only API cannot change the state: a patch of {len(patch)} operation(s) was not applied"
    return state_apply(state, patch, state_schema)


def _patch_feedback(answer: dict, error: str) -> list[dict]:
    return [
        {"role": "assistant", "content": compact_json(answer)},
        {
            "role": "user",
            "content": f"Your patch cannot be used: {error}. Reply again with the response and a patch that applies "
            "to the world state shown: replace and remove need a path that exists, add creates a member of an "
            "existing object. Use an empty patch if the call changes nothing.",
        },
    ]


def _response_value(response: object) -> object:
    """The response the API gave: JSON text read as the value it holds; other text is the response itself."""
    if not isinstance(response, str):
        return response
    try:
        return json_parse(response, where="the simulated response", strict=False)
    except ValueError:
        return response
