"""The environment simulator: answers a tool call and returns a JSON Patch to the explicit world state."""

import copy
import json

import jsonpatch

from simia_web.core.schemas import SCHEMA_FAILURES, first_error
from simia_web.llm.client import LLMClient, LLMError

PROMPT_VERSION = "simulator-v1"

SCHEMA = {
    "type": "object",
    "properties": {
        "response": {"description": "The API's JSON response, as the real backend would return it."},
        "patch": {
            "type": "array",
            "description": "RFC 6902 JSON Patch operations applied to the world state; empty for reads.",
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


def simulator_messages(*, api: dict, arguments: dict, task: str, state: dict, history: list[dict]) -> list[dict]:
    return [
        {
            "role": "system",
            "content": "You simulate the backend of an API. Given the API specification, the current world state "
            "and the call, return the exact JSON response the real API would give, and a JSON Patch (RFC 6902) "
            "that applies the call's effects to the world state. Read-only APIs never change the state. Invalid "
            "requests (unknown ids, violated preconditions) return an error response and an empty patch. Stay "
            "consistent with the state and with earlier responses.",
        },
        {
            "role": "user",
            "content": json.dumps(
                {"api": api, "arguments": arguments, "task": task, "state": state, "history": history[-12:]},
                ensure_ascii=False,
            ),
        },
    ]


def state_apply(state: dict, patch: list[dict], state_schema: dict | None) -> tuple[dict, str | None]:
    """Apply a patch to a copy of the state and validate the result; on error the state is unchanged."""
    try:
        new_state = jsonpatch.apply_patch(copy.deepcopy(state), patch)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError) as exc:
        return state, f"patch could not be applied: {exc}"
    if state_schema:
        try:
            error = first_error(state_schema, new_state)
        except SCHEMA_FAILURES as exc:
            return state, f"the state schema cannot be used: {exc}"
        if error:
            return state, f"patched state breaks the state schema {error}"
    return new_state, None


def simulate_call(
    *, client: LLMClient, api: dict, arguments: dict, task: str, state: dict, state_schema: dict, history: list[dict]
) -> dict:
    """{"response", "patch", "state_after", "errors", "failed", "calls" (LLMCall rows)}; never raises for LLM
    trouble: when the simulator gives no usable answer, `failed` is set and the agent is told the service is down."""
    try:
        reply = client.structured(
            messages=simulator_messages(api=api, arguments=arguments, task=task, state=state, history=history),
            schema=SCHEMA,
            schema_name="simulated_response",
            prompt_version=PROMPT_VERSION,
        )
    except LLMError as exc:
        return {
            "response": {"error": "The service is temporarily unavailable."},
            "patch": [],
            "state_after": state,
            "errors": [f"simulator failed: {exc}"],
            "failed": True,
            "calls": [],
        }
    patch = reply.data["patch"]
    new_state, error = state_apply(state, patch, state_schema)
    return {
        "response": reply.data["response"],
        "patch": patch,
        "state_after": new_state,
        "errors": [error] if error else [],
        "failed": False,
        "calls": reply.calls,
    }
