"""τ²-bench domain folders (policy.md, tools.json, tasks.json, optional db.json) → catalog specs."""

import re

from simia_web.catalog.validation import api_problems, state_problems
from simia_web.formats import FormatError
from simia_web.formats.common import tools_list

from .errors import Collected, ImportIssue
from .reading import Folder, bytes_read, json_read, records_read, text_decode

# tools.json has no read/write flag, so it is inferred from the name: a tool whose name starts with
# one of these verbs changes the world state (τ²'s own toolkits mark exactly these as WRITE).
WRITE_PREFIXES = (
    "add_", "book_", "cancel_", "change_", "create_", "delete_", "exchange_", "modify_", "place_", "remove_",
    "reset_", "return_", "send_", "set_", "submit_", "transfer_", "update_",
)  # fmt: skip
INSTRUCTION_PARTS = (
    ("reason_for_call", "Reason for call"),
    ("known_info", "Known info"),
    ("unknown_info", "Unknown info"),
    ("task_instructions", "Task instructions"),
)
JSON_TYPES = ((dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"), ((int, float), "number"))


def api_kind_infer(name: str) -> str:
    return "write" if name.startswith(WRITE_PREFIXES) else "read"


def api_specs_from_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "parameters": t["function"]["parameters"],
            "returns": {},
            "kind": api_kind_infer(t["function"]["name"]),
        }
        for t in tools
    ]


def state_schema_derive(state: dict) -> dict:
    """A permissive schema: the top-level collections must exist with their JSON type; inside, anything."""
    properties = {}
    for key, value in state.items():
        kind = next((label for types, label in JSON_TYPES if isinstance(value, types)), None)
        properties[key] = {"type": kind} if kind else {}
    return {"type": "object", "properties": properties, "required": list(state)}


def instruction_build(scenario: dict) -> str:
    instructions = scenario.get("instructions")
    if isinstance(instructions, str):
        return instructions.strip()
    if not isinstance(instructions, dict):
        return ""
    parts = []
    for key, label in INSTRUCTION_PARTS:
        value = instructions.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(f"{label}: {value.strip()}")
    return "\n".join(parts)


def _outcome(criteria: dict) -> str:
    lines = []
    for assertion in criteria.get("nl_assertions") or []:
        lines.append(str(assertion))
    for info in criteria.get("communicate_info") or []:
        lines.append(f"The agent tells the user: {info}")
    return "\n".join(lines)


def task_spec(record: dict, api_names: set[str], file: str, line: int, number: int, issues: list) -> dict | None:
    def issue(field, message):
        issues.append(ImportIssue(file, line, field, message, number))

    if not isinstance(record, dict):
        issue("", "a task must be a JSON object")
        return None
    external_id = record.get("id")
    if external_id in (None, ""):
        issue("id", "is missing")
    scenario = record.get("user_scenario")
    if not isinstance(scenario, dict):
        issue("user_scenario", "is missing")
        return None
    instruction = instruction_build(scenario)
    if not instruction:
        issue("user_scenario.instructions", "has no reason_for_call, known_info, unknown_info or task_instructions")
    criteria = record.get("evaluation_criteria") or {}
    if not isinstance(criteria, dict):
        issue("evaluation_criteria", "must be an object")
        criteria = {}
    actions = []
    for i, action in enumerate(criteria.get("actions") or []):
        if not isinstance(action, dict) or not isinstance(action.get("name"), str):
            issue(f"evaluation_criteria.actions[{i}].name", "is missing")
            continue
        if action["name"] not in api_names:
            issue(f"evaluation_criteria.actions[{i}].name", f"names a tool not in tools.json: {action['name']!r}")
        arguments = action.get("arguments") or {}
        if not isinstance(arguments, dict):
            issue(f"evaluation_criteria.actions[{i}].arguments", "must be an object")
        actions.append({"name": action["name"], "arguments": arguments})
    description = record.get("description") if isinstance(record.get("description"), dict) else {}
    return {
        "external_id": str(external_id)[:80],
        "instruction": instruction,
        "user_scenario": scenario,
        "expected_actions": actions,
        "apis_needed": list(dict.fromkeys(a["name"] for a in actions)),
        "expected_outcome": _outcome(criteria) or str(description.get("purpose") or ""),
        "record": record,
    }


def tau2_read(source, name: str) -> dict:
    """{"policy", "apis", "tasks", "initial_state", "state_schema"} or ImportIssues in `issues`."""
    folder = Folder(source, name)
    issues: list[ImportIssue] = []
    for required in ("policy.md", "tools.json", "tasks.json"):
        if not folder.has(required):
            issues.append(ImportIssue(folder.path(required), None, "", "is missing from the τ² domain folder"))
    if issues:
        return {"issues": issues}

    def guarded(read, base):
        try:
            return read(folder.source(base), folder.path(base))
        except Collected as exc:
            issues.append(exc.issue)
            return None

    policy = guarded(lambda s, n: text_decode(bytes_read(s, n), n), "policy.md")
    tools_file = folder.path("tools.json")
    apis = []
    raw_tools = guarded(json_read, "tools.json")
    if raw_tools is not None:
        try:
            apis = api_specs_from_tools(tools_list(raw_tools))
        except FormatError as exc:
            issues.append(ImportIssue(tools_file, None, exc.field, exc.message))
        seen = set()
        for i, spec in enumerate(apis):
            for problem in api_problems(spec):
                issues.append(ImportIssue(tools_file, None, f"tools[{i}]", f"{spec['name']}: {problem}"))
            if spec["name"] in seen:
                issues.append(ImportIssue(tools_file, None, f"tools[{i}].name", f"duplicate tool {spec['name']!r}"))
            seen.add(spec["name"])
    tasks = []
    records = guarded(records_read, "tasks.json")
    names = {a["name"] for a in apis}
    for record in records or []:
        spec = task_spec(record.value, names, folder.path("tasks.json"), record.line, record.number, issues)
        if spec is not None:
            tasks.append(spec)
    initial_state, state_schema = {}, {}
    if folder.has("db.json"):
        state = guarded(json_read, "db.json")
        if state is not None and not isinstance(state, dict):
            issues.append(ImportIssue(folder.path("db.json"), None, "", "the database must be a JSON object"))
        elif state is not None:
            initial_state, state_schema = state, state_schema_derive(state)
            for problem in state_problems(state_schema, initial_state):
                issues.append(ImportIssue(folder.path("db.json"), None, "", problem))
    return {
        "issues": issues,
        "policy": (policy or "").strip(),
        "apis": apis,
        "tasks": tasks,
        "initial_state": initial_state,
        "state_schema": state_schema,
        "name": _folder_name(source, name),
    }


def _folder_name(source, name: str) -> str:
    stem = name.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"\.zip$", "", stem, flags=re.I)
