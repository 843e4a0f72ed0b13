"""τ²-bench ⇄ the canonical format: the domain folder's tools.json and tasks.json records read into
catalog fields, and trajectories written as τ²-bench results (tasks and simulation runs) with the
rules those records must pass.
"""

from typing import Any

import jsonschema

from .conversation import ROLES, message_text, parse_arguments
from .errors import FormatError

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


def tau2_task_spec(record: object, api_names: set[str]) -> tuple[dict | None, list[FormatError]]:
    """The catalog fields of one tasks.json record (None when it cannot be read) and its problems."""
    problems: list[FormatError] = []

    def issue(field: str, message: str) -> None:
        problems.append(FormatError(field, message))

    if not isinstance(record, dict):
        issue("", "a task must be a JSON object")
        return None, problems
    external_id = record.get("id")
    if external_id in (None, ""):
        issue("id", "is missing")
    scenario = record.get("user_scenario")
    if not isinstance(scenario, dict):
        issue("user_scenario", "is missing")
        return None, problems
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
    description = record.get("description")
    description = description if isinstance(description, dict) else {}
    return {
        "external_id": str(external_id)[:80],
        "instruction": instruction,
        "user_scenario": scenario,
        "expected_actions": actions,
        "apis_needed": list(dict.fromkeys(a["name"] for a in actions)),
        "expected_outcome": _outcome(criteria) or str(description.get("purpose") or ""),
        "record": record,
    }, problems


# -- writing -------------------------------------------------------------------------------------

TAU2_TERMINATION = {
    "final_answer": "agent_stop",
    "agent_stop": "agent_stop",
    "user_stop": "user_stop",
    "max_steps": "max_steps",
    "max_errors": "too_many_errors",
    "llm_error": "agent_error",
}

TAU2_TASK_SCHEMA = {
    "type": "object",
    "required": ["id", "description", "user_scenario", "evaluation_criteria"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "description": {"type": ["object", "null"]},
        "user_scenario": {
            "type": "object",
            "required": ["instructions"],
            "properties": {"instructions": {"type": ["object", "string"]}},
        },
        "evaluation_criteria": {
            "type": ["object", "null"],
            "properties": {
                "actions": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "required": ["action_id", "name", "arguments"],
                        "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
                    },
                }
            },
        },
    },
}

_task_validator = jsonschema.Draft202012Validator(TAU2_TASK_SCHEMA)
TAU2_SIMULATION_KEYS = ("id", "task_id", "termination_reason", "reward_info", "messages", "trial")


def _problems(validator: Any, record: dict) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or 'record'}: {error.message}"
        for error in validator.iter_errors(record)
    ]


def tau2_task_problems(record: dict) -> list[str]:
    return _problems(_task_validator, record)


def _tau2_message_problems(message: object, where: str, calls_seen: set) -> list[str]:
    if not isinstance(message, dict):
        return [f"{where}: must be an object"]
    problems = []
    role = message.get("role")
    if role not in ROLES:
        problems.append(f"{where}.role: unknown role {role!r}")
    if not isinstance(message.get("turn_idx"), int):
        problems.append(f"{where}.turn_idx: must be an integer")
    if message.get("content") is not None and not isinstance(message["content"], str):
        problems.append(f"{where}.content: must be a string or null")
    for j, call in enumerate(message.get("tool_calls") or []):
        at = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            problems.append(f"{at}.name: is missing")
            continue
        if not isinstance(call.get("arguments"), dict):
            problems.append(f"{at}.arguments: must be an object")
        if call.get("requestor") not in ("assistant", "user"):
            problems.append(f"{at}.requestor: must be assistant or user")
        calls_seen.add(call.get("id"))
    if role == "tool":
        if not isinstance(message.get("id"), str) or not message["id"]:
            problems.append(f"{where}.id: a tool message needs the id of its call")
        elif message["id"] not in calls_seen:
            problems.append(f"{where}.id: no earlier tool call {message['id']!r}")
    return problems


def tau2_simulation_problems(record: dict) -> list[str]:
    """What τ²-bench's SimulationRun model refuses (checked by hand: a schema validator is an order of magnitude
    slower)."""
    problems = [f"{key}: is missing" for key in TAU2_SIMULATION_KEYS if key not in record]
    if problems:
        return problems
    if not isinstance(record["task_id"], str) or not record["task_id"]:
        problems.append("task_id: must be a non-empty string")
    if record["termination_reason"] not in TAU2_TERMINATION.values():
        problems.append(f"termination_reason: unknown value {record['termination_reason']!r}")
    reward = (record["reward_info"] or {}).get("reward")
    if not isinstance(reward, int | float) or isinstance(reward, bool):
        problems.append("reward_info.reward: must be a number")
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: is empty"]
    calls_seen: set = set()
    for i, message in enumerate(messages):
        problems += _tau2_message_problems(message, f"messages[{i}]", calls_seen)
    return problems


def tau2_task_id(domain_name: str, *, task_pk: int | None, external_id: str = "", trajectory_id: int = 0) -> str:
    """Unique across domains: `retail/0` for an imported task, `retail/task-12` for a synthesized one."""
    if task_pk is None:
        return f"{domain_name}/trajectory-{trajectory_id}"
    return f"{domain_name}/{external_id or f'task-{task_pk}'}"


def tau2_task(task: dict, domain_name: str) -> dict:
    scenario = task["user_scenario"] if isinstance(task["user_scenario"], dict) else {}
    if "instructions" not in scenario:
        scenario = {
            "persona": None,
            "instructions": {
                "domain": domain_name,
                "reason_for_call": task["instruction"],
                "known_info": None,
                "unknown_info": None,
                "task_instructions": "",
            },
        }
    task_id = tau2_task_id(domain_name, task_pk=task["id"], external_id=task["external_id"])
    actions: list[dict[str, Any]] = [
        {
            "action_id": f"{task_id}_{i}",
            "name": str(action.get("name", "")),
            "arguments": action.get("arguments") if isinstance(action.get("arguments"), dict) else {},
            "info": None,
        }
        for i, action in enumerate(task["expected_actions"] or [])
        if isinstance(action, dict)
    ]
    return {
        "id": task_id,
        "description": {
            "purpose": task["instruction"],
            "relevant_policies": None,
            "notes": task["expected_outcome"] or None,
        },
        "user_scenario": scenario,
        "initial_state": None,
        "evaluation_criteria": {
            "actions": actions,
            "communicate_info": [],
            "nl_assertions": [task["expected_outcome"]] if task["expected_outcome"] else None,
            "reward_basis": ["DB", "NL_ASSERTION"] if task["expected_outcome"] else ["DB"],
        },
    }


def tau2_task_from_trajectory(row: dict, domain_name: str) -> dict:
    """A task for a trajectory that has none (amplified from a seed): its first user turn is the ask."""
    first_user = next((message_text(m) for m in row["messages"] if m.get("role") == "user"), "")
    return {
        "id": tau2_task_id(domain_name, task_pk=None, trajectory_id=row["id"]),
        "description": {"purpose": None, "relevant_policies": None, "notes": "derived from a seed-first trajectory"},
        "user_scenario": {
            "persona": None,
            "instructions": {
                "domain": domain_name,
                "reason_for_call": first_user,
                "known_info": None,
                "unknown_info": None,
                "task_instructions": "",
            },
        },
        "initial_state": None,
        "evaluation_criteria": None,
    }


def tau2_messages(row: dict) -> list[dict]:
    out = []
    for index, message in enumerate(row["messages"]):
        role = message.get("role")
        item = {"role": role, "content": message_text(message) or None, "turn_idx": index, "timestamp": None}
        if role in {"assistant", "user"}:
            calls = []
            for call in message.get("tool_calls") or []:
                arguments, error = parse_arguments(call)
                calls.append(
                    {
                        "id": call.get("id", ""),
                        "name": call["function"]["name"],
                        # Arguments that are not a JSON object stay as they are, for the validator to refuse.
                        "arguments": arguments if error is None else call["function"].get("arguments"),
                        "requestor": role,
                    }
                )
            item["tool_calls"] = calls or None
        if role == "tool":
            step = (row["steps"] or {}).get(str(index)) or {}
            item.update(id=message.get("tool_call_id", ""), requestor="assistant", error=bool(step.get("errors")))
        out.append(item)
    return out


def tau2_simulation(row: dict, task_id: str, domain_name: str) -> dict:
    created = row["created_at"].isoformat() if row["created_at"] else None
    judge_reward = None if row["judge_score"] is None else float(row["judge_score"])
    reward = row["reward"] if row["reward"] is not None else judge_reward
    return {
        "id": f"simia-{row['id']}",
        "task_id": task_id,
        "timestamp": created,
        "start_time": created,
        "end_time": created,
        "duration": 0.0,
        "termination_reason": TAU2_TERMINATION.get(row["termination_reason"], "agent_stop"),
        "agent_cost": None,
        "user_cost": None,
        "reward_info": {
            "reward": reward if reward is not None else 0.0,
            "reward_basis": None,
            "info": {
                "source": "environment reward" if row["reward"] is not None else "judge score",
                "status": row["status"],
                "judge_passed": row["judge_passed"],
                "termination_reason": row["termination_reason"],
                "domain": domain_name,
            },
        },
        "messages": tau2_messages(row),
        "trial": 0,
        "seed": None,
    }
