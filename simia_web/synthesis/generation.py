"""Domain-first generation: APIs and world state for a domain, then tasks over those APIs."""

import json

from simia_web.llm.client import LLMClient

API_PROMPT_VERSION = "apis-v1"
TASK_PROMPT_VERSION = "tasks-v1"

# Sizes are bounded in the schemas themselves: servers that enforce the schema with a grammar (llama.cpp,
# llama-cpp-python) then stop a model at the count asked for instead of letting it write until max_tokens.
_NAME = {"type": "string", "minLength": 1, "maxLength": 64}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 1000}
_NAMES = {"type": "array", "items": _NAME, "maxItems": 12}


def api_schema(count: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "apis": {
                "type": "array",
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": _NAME,
                        "description": _TEXT,
                        "parameters": {"type": "object"},
                        "returns": {"type": "object"},
                        "kind": {"enum": ["read", "write"]},
                        "touches": _NAMES,
                    },
                    "required": ["name", "description", "parameters", "kind"],
                },
            },
            "state_schema": {"type": "object"},
            "initial_state": {"type": "object"},
        },
        "required": ["apis", "state_schema", "initial_state"],
    }


def task_schema(count: int) -> dict:
    # Tasks that fail validation are kept with their reasons and filtered out later, so a model may write a few
    # more than asked: the bound is twice the count.
    return {
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "maxItems": 2 * count,
                "items": {
                    "type": "object",
                    "properties": {
                        "instruction": _TEXT,
                        "apis_needed": _NAMES,
                        "expected_outcome": _TEXT,
                        "difficulty": {"enum": ["easy", "medium", "hard"]},
                    },
                    "required": ["instruction", "apis_needed", "expected_outcome", "difficulty"],
                },
            }
        },
        "required": ["tasks"],
    }


def apis_generate(*, client: LLMClient, domain_name: str, description: str, policy: str, count: int):
    return client.structured(
        messages=[
            {
                "role": "system",
                "content": "You design realistic backend APIs for tool-calling agents. Each API has a snake_case "
                "name, a description, `parameters` as a JSON Schema object (type object, properties, required), a "
                "`returns` JSON Schema, kind read (no side effects) or write (changes state), and the state "
                "collections it touches. Also give a JSON Schema for the world state and a small, realistic initial "
                "state valid against it, with the records the APIs operate on.",
            },
            {
                "role": "user",
                "content": json.dumps(
                    {
                        "domain": domain_name,
                        "description": description,
                        "policy": policy[:4000],
                        "number_of_apis": count,
                    }
                ),
            },
        ],
        schema=api_schema(count),
        schema_name="domain_apis",
        prompt_version=API_PROMPT_VERSION,
    )


def tasks_generate(*, client: LLMClient, domain_name: str, policy: str, apis: list[dict], state: dict, count: int):
    return client.structured(
        messages=[
            {
                "role": "system",
                "content": "You write diverse, realistic user requests for a customer-service agent that can only "
                "act through the listed APIs. Each task names the APIs needed to solve it (only from the list), the "
                "expected outcome (what the state and the final answer should be) and a difficulty. Refer to records "
                "that exist in the initial state. Vary intents; do not repeat a request.",
            },
            {
                "role": "user",
                "content": json.dumps(
                    {
                        "domain": domain_name,
                        "policy": policy[:4000],
                        "apis": apis,
                        "initial_state": state,
                        "number_of_tasks": count,
                    },
                    ensure_ascii=False,
                )[:60000],
            },
        ],
        schema=task_schema(count),
        schema_name="domain_tasks",
        prompt_version=TASK_PROMPT_VERSION,
    )
