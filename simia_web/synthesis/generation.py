"""Domain-first generation: APIs and world state for a domain, then tasks over those APIs.

A domain's design is asked for in lists (parameters, collections, records) rather than as JSON Schemas and a
state document: a list has a length a grammar can bound and entries of a shape it can enforce, so a server
that holds the model to the schema (llama.cpp, llama-cpp-python) gets a design that validates whatever the
model's size, where free-form schemas let a small model write unknown `required` names or run on until
max_tokens. Every other server reads the same schema as instructions. `domain_design` turns the answer into
the catalog's shapes: API specs with JSON Schema parameters, and a world state with a schema derived from it.
"""

from simia_web.core.jsonutil import compact_json
from simia_web.llm.client import LLMClient
from simia_web.simulation.prompt_fit import json_size, specs_described, text_clip
from simia_web.simulation.state_slice import state_view

API_PROMPT_VERSION = "apis-v2"  # v2: the design in bounded lists, turned into schemas here
TASK_PROMPT_VERSION = "tasks-v2"  # v2: apis_needed limited to the domain's API names; inputs fitted to the budget

# Bounds sized so that the longest answer for three APIs fits a stage's 2,048 tokens: a small model on a
# grammar tends to write as much as it is allowed.
_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_]{1,30}$"}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 160}
_SHORT_TEXT = {"type": "string", "minLength": 1, "maxLength": 80}
_LONG_TEXT = {"type": "string", "minLength": 1, "maxLength": 1000}
FIELD_TYPES = ["string", "integer", "number", "boolean", "array", "object"]


def _fields(count: int, *, flag_required: bool) -> dict:
    properties = {"name": _NAME, "type": {"enum": FIELD_TYPES}, "description": _SHORT_TEXT}
    if flag_required:
        properties["required"] = {"type": "boolean"}
    return {
        "type": "array",
        "maxItems": count,
        "items": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
    }


_VALUE = {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "number"}, {"type": "boolean"}]}
_RECORD = {
    "type": "object",
    "properties": {
        "collection": _NAME,
        "id": {"type": "string", "pattern": "^[A-Za-z0-9_#-]{1,24}$"},
        "fields": {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {"name": _NAME, "value": _VALUE},
                "required": ["name", "value"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["collection", "id", "fields"],
    "additionalProperties": False,
}


def api_schema(count: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "apis": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": _NAME,
                        "description": _TEXT,
                        "kind": {"enum": ["read", "write"]},
                        "parameters": _fields(4, flag_required=True),
                        "returns": _fields(4, flag_required=False),
                        "touches": {"type": "array", "items": _NAME, "maxItems": 3},
                    },
                    "required": ["name", "description", "kind", "parameters", "returns", "touches"],
                    "additionalProperties": False,
                },
            },
            "collections": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {"name": _NAME, "description": _SHORT_TEXT},
                    "required": ["name", "description"],
                    "additionalProperties": False,
                },
            },
            "records": {"type": "array", "minItems": 1, "maxItems": 5, "items": _RECORD},
        },
        "required": ["apis", "collections", "records"],
        "additionalProperties": False,
    }


def task_schema(count: int, api_names: list[str]) -> dict:
    # Tasks that fail validation are kept with their reasons and filtered out later, so a model may write a few
    # more than asked: the bound is twice the count.
    return {
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "minItems": count,
                "maxItems": 2 * count,
                "items": {
                    "type": "object",
                    "properties": {
                        "instruction": _LONG_TEXT,
                        "apis_needed": {"type": "array", "items": {"enum": api_names}, "minItems": 1, "maxItems": 12},
                        "expected_outcome": _LONG_TEXT,
                        "difficulty": {"enum": ["easy", "medium", "hard"]},
                    },
                    "required": ["instruction", "apis_needed", "expected_outcome", "difficulty"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["tasks"],
        "additionalProperties": False,
    }


# What an answer must be to be read at all. Each API and task in it is then validated on its own and kept with
# its problems (catalog.validation), so one bad item does not cost the others.
_FIELD_ANSWER = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "type": {"enum": FIELD_TYPES}},
        "required": ["name", "type"],
    },
}
API_ANSWER = {
    "type": "object",
    "properties": {
        "apis": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"parameters": _FIELD_ANSWER, "returns": _FIELD_ANSWER},
                "required": ["name", "description", "parameters", "kind"],
            },
        },
        "collections": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "collection": {"type": "string"},
                    "id": {"type": ["string", "integer"]},
                    "fields": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                    },
                },
                "required": ["collection", "id", "fields"],
            },
        },
    },
    "required": ["apis", "collections", "records"],
}
TASK_ANSWER = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"apis_needed": {"type": "array"}},
                "required": ["instruction", "apis_needed", "expected_outcome", "difficulty"],
            },
        }
    },
    "required": ["tasks"],
}


def _object_schema(fields: list[dict]) -> dict:
    """A JSON Schema object of the listed fields; those flagged `required` are required."""
    schema = {
        "type": "object",
        "properties": {
            f["name"]: {"type": f["type"], **({"description": f["description"]} if f.get("description") else {})}
            for f in fields
        },
    }
    required = [f["name"] for f in fields if f.get("required") is True]
    if required:
        schema["required"] = required
    return schema


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", dict: "object", list: "array"}
    return names.get(type(value), "null")


def state_schema_of(state: dict, descriptions: dict[str, str]) -> dict:
    """The schema a synthesized state is held to: every collection an object of records, each record field
    keeping the JSON type(s) it starts with (so a patch cannot turn a price into a string)."""
    properties = {}
    for name, records in state.items():
        types: dict[str, set[str]] = {}
        for record in records.values():
            for field, value in record.items():
                types.setdefault(field, set()).add(_json_type(value))
        record_schema = {
            "type": "object",
            "properties": {f: {"type": sorted(t) if len(t) > 1 else next(iter(t))} for f, t in types.items()},
        }
        properties[name] = {"type": "object", "additionalProperties": record_schema}
        if descriptions.get(name):
            properties[name]["description"] = descriptions[name]
    return {"type": "object", "properties": properties, "required": list(state)}


def domain_design(answer: dict) -> dict:
    """An API-synthesis answer as the catalog stores it: {"apis", "state_schema", "initial_state"}."""
    apis = [
        {
            "name": api["name"],
            "description": api["description"],
            "kind": api["kind"],
            "parameters": _object_schema(api["parameters"]),
            "returns": _object_schema(api.get("returns") or []),
            "touches": api.get("touches", []),
        }
        for api in answer["apis"]
    ]
    descriptions = {str(c["name"]): c.get("description") or "" for c in answer["collections"]}
    state: dict[str, dict] = {name: {} for name in descriptions}
    for record in answer["records"]:
        fields = {str(f["name"]): f.get("value") for f in record["fields"]}
        state.setdefault(str(record["collection"]), {})[str(record["id"])] = fields
    return {"apis": apis, "state_schema": state_schema_of(state, descriptions), "initial_state": state}


def apis_generate(*, client: LLMClient, domain_name: str, description: str, policy: str, count: int):
    return client.structured(
        messages=[
            {
                "role": "system",
                "content": "You design realistic backend APIs for tool-calling agents. Each API has a snake_case "
                "name, a description, kind read (no side effects) or write (changes state), its parameters and the "
                "fields it returns (each with a name, a JSON type and a description; parameters also say whether "
                "they are required) and the state collections it touches. Give both read and write APIs, each "
                "with a different name. Also list the world state's collections and a few realistic records in "
                "them (an id and the record's fields), the records the APIs operate on.",
            },
            {
                "role": "user",
                "content": compact_json(
                    {
                        "domain": domain_name,
                        "description": description,
                        "policy": text_clip(policy, 4000),
                        "number_of_apis": count,
                    }
                ),
            },
        ],
        schema=api_schema(count),
        schema_name="domain_apis",
        accept=API_ANSWER,
        prompt_version=API_PROMPT_VERSION,
    )


def tasks_inputs(*, domain_name: str, policy: str, apis: list[dict], state: dict, count: int, budget: int) -> dict:
    """The task writer's inputs within `budget` characters: the policy and the APIs first (names and
    descriptions only when their schemas do not fit), then the initial state or a sample of it."""
    cut = []
    request = {"domain": domain_name, "policy": text_clip(policy, budget // 4), "number_of_tasks": count}
    if json_size(apis) > budget // 3:
        apis = specs_described(apis)
        cut.append("API parameter schemas left out")
    request["apis"] = apis
    view, state_cut = state_view(state, {}, budget - json_size(request) - 300)
    request["initial_state" if "state" in view else "initial_state_sample"] = view.get("state", view.get("state_slice"))
    cut += state_cut
    if cut:
        request["cut"] = cut
    return request


TASK_INSTRUCTIONS = (
    "You write diverse, realistic user requests for a customer-service agent that can only act through the "
    "listed APIs. Each task names the APIs needed to solve it (only from the list), the expected outcome (what "
    "the state and the final answer should be) and a difficulty. Refer to records that exist in the initial "
    "state. Vary intents; do not repeat a request."
)


def tasks_generate(*, client: LLMClient, domain_name: str, policy: str, apis: list[dict], state: dict, count: int):
    schema = task_schema(count, [api["name"] for api in apis])
    request = tasks_inputs(
        domain_name=domain_name,
        policy=policy,
        apis=apis,
        state=state,
        count=count,
        budget=client.prompt_chars_available(schema) - len(TASK_INSTRUCTIONS),
    )
    return client.structured(
        messages=[
            {"role": "system", "content": TASK_INSTRUCTIONS},
            {"role": "user", "content": compact_json(request)},
        ],
        schema=schema,
        schema_name="domain_tasks",
        accept=TASK_ANSWER,
        prompt_version=TASK_PROMPT_VERSION,
    )
