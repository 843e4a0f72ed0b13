"""Deterministic validation of synthesized or edited APIs, state schemas and tasks."""

import re
from typing import Any

from simia_web.core.schemas import SCHEMA_FAILURES, first_error, schema_error

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")


def schema_problems(schema, label: str) -> list[str]:
    error = schema_error(schema)
    return [f"{label} {error}"] if error else []


def api_problems(api: dict) -> list[str]:
    """Problems of one API spec: name, description, parameters schema, required ⊆ properties, returns."""
    problems = []
    name = api.get("name", "")
    if not isinstance(name, str) or not SNAKE_CASE.match(name):
        problems.append(f"name {name!r} is not snake_case")
    if api.get("kind") not in {"read", "write"}:
        problems.append(f"kind must be read or write, not {api.get('kind')!r}")
    parameters = api.get("parameters")
    found = schema_problems(parameters, "parameters")
    problems += found
    if not found and (not isinstance(parameters, dict) or parameters.get("type") != "object"):
        problems.append("parameters must describe an object")
    if not found and isinstance(parameters, dict):
        properties = parameters.get("properties") or {}
        missing = [r for r in parameters.get("required") or [] if r not in properties]
        if missing:
            problems.append(f"required names unknown properties: {', '.join(missing)}")
    if api.get("returns") not in (None, {}):
        problems += schema_problems(api.get("returns"), "returns")
    if not isinstance(api.get("touches", []), list):
        problems.append("touches must be a list of state collections")
    return problems


def api_set_problems(apis: list[dict]) -> tuple[dict[int, list[str]], list[str]]:
    """Per-API problems (by position) plus problems of the set (duplicate names, read/write coverage)."""
    per_api = {i: api_problems(api) for i, api in enumerate(apis)}
    seen: dict[Any, int] = {}
    for i, api in enumerate(apis):
        name = api.get("name")
        if name in seen:
            per_api[i].append(f"duplicate name {name!r} (first at #{seen[name]})")
        else:
            seen[name] = i
    valid = [api for i, api in enumerate(apis) if not per_api[i]]
    set_problems = []
    if not any(a.get("kind") == "read" for a in valid):
        set_problems.append("no valid read-only API")
    if not any(a.get("kind") == "write" for a in valid):
        set_problems.append("no valid state-changing API")
    return per_api, set_problems


# Every problem state_problems reports starts with one of these (the rest of a domain's state_errors
# are problems of its API set).
STATE_SCHEMA_LABEL, INITIAL_STATE_LABEL = "state schema", "initial state"
STATE_PROBLEM_LABELS = (STATE_SCHEMA_LABEL, INITIAL_STATE_LABEL)


def state_problems(state_schema, initial_state) -> list[str]:
    problems = schema_problems(state_schema, STATE_SCHEMA_LABEL)
    if problems:
        return problems
    try:
        error = first_error(state_schema, initial_state)
    except SCHEMA_FAILURES as exc:
        return [f"{STATE_SCHEMA_LABEL} cannot be used: {exc}"]
    if error:
        problems.append(f"{INITIAL_STATE_LABEL} breaks the state schema {error}")
    return problems
