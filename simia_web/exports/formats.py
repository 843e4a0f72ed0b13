"""Export writers, one per format, converting canonical trajectories on the way out.

Every writer streams: it reads trajectories in batches from one cursor (rows_stream) and writes
each record as soon as it is converted and checked, so memory stays flat at any size. A record
that breaks its format's rules is never written; it is refused with its reasons, which the
snapshot keeps.

File layout per format:
- openai: one JSONL file, `{"messages": [...], "tools": [...]}` per line.
- sharegpt: a zip holding `data.jsonl` (LLaMA-Factory ShareGPT rows) and `dataset_info.json`
  naming it, so the unzipped folder can be passed to LLaMA-Factory as `dataset_dir`.
- tau2: one JSON document `{"timestamp", "info", "tasks": [...], "simulations": [...]}` in the
  layout of τ²-bench results files.
"""

import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import jsonschema
import orjson
from django.utils import timezone

from simia_web.catalog.models import Domain, Task
from simia_web.curation.canonical import message_text, parse_arguments, tool_schemas
from simia_web.formats import FormatError, canonical_to_openai, canonical_to_sharegpt, sharegpt_problems

CHUNK_SIZE = 500
REFUSALS_KEPT = 1000
ROW_FIELDS = ("id", "domain_id", "task_id", "messages", "tools", "steps", "status", "created_at")
TASK_FIELDS = ("id", "domain_id", "external_id", "instruction", "user_scenario", "expected_outcome", "expected_actions")
SIMULATION_FIELDS = (*ROW_FIELDS, "termination_reason", "reward", "judge_score", "judge_passed", "task__external_id")


@dataclass
class ExportStats:
    count: int = 0
    repaired_count: int = 0
    refused_count: int = 0
    refusal_reasons: Counter = field(default_factory=Counter)
    refusals: list = field(default_factory=list)

    def refuse(self, trajectory_id: int, reasons: list[str]) -> None:
        self.refused_count += 1
        for reason in reasons:
            self.refusal_reasons[reason.split(":", 1)[-1].strip()[:120]] += 1
        if len(self.refusals) < REFUSALS_KEPT:
            self.refusals.append({"trajectory": trajectory_id, "reasons": reasons})


def rows_stream(queryset, fields=ROW_FIELDS, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """Rows as dicts in id order, `chunk_size` at a time, from one query.

    On PostgreSQL this is a server-side cursor (export_write holds the transaction it needs), so
    the rows are never all in memory and the table is read once, not re-sorted per chunk.
    """
    return queryset.order_by("pk").values(*fields).iterator(chunk_size=chunk_size)


def _line(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"


# --- OpenAI -------------------------------------------------------------------------------------

OPENAI_ROLES = {"system", "user", "assistant", "tool"}


def openai_problems(record: dict) -> list[str]:
    """What the OpenAI fine-tuning format refuses: unknown roles, calls to undeclared tools,
    arguments that are not a JSON object string, tool results without their call (and the reverse)."""
    problems = []
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: is empty"]
    names = set(tool_schemas(record.get("tools") or []))
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{i}]"
        if role not in OPENAI_ROLES:
            problems.append(f"{where}.role: unknown role {role!r}")
            continue
        if role != "tool" and open_calls:
            problems.append(f"{where}: tool call(s) {', '.join(sorted(open_calls))} have no result")
            open_calls.clear()
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                problems.append(f"{where}.tool_call_id: no open call {message.get('tool_call_id')!r}")
            open_calls.discard(message.get("tool_call_id"))
        for j, call in enumerate(message.get("tool_calls") or []):
            name = call["function"]["name"]
            if not call.get("id"):
                problems.append(f"{where}.tool_calls[{j}].id: is missing")
            if name not in names:
                problems.append(f"{where}.tool_calls[{j}]: tool {name!r} is not in tools")
            if not isinstance(call["function"].get("arguments"), str):
                problems.append(f"{where}.tool_calls[{j}].arguments: must be a JSON string")
            elif parse_arguments(call)[1]:
                problems.append(f"{where}.tool_calls[{j}].arguments: {parse_arguments(call)[1]}")
            open_calls.add(call.get("id"))
    if open_calls:
        problems.append(f"tool call(s) {', '.join(sorted(open_calls))} have no result")
    if not any(m.get("role") == "assistant" for m in messages):
        problems.append("messages: no assistant message to train on")
    return problems


def write_openai(stream, queryset, stats: ExportStats, label: str) -> None:
    for row in rows_stream(queryset):
        try:
            record = canonical_to_openai(row["messages"], row["tools"])
        except (FormatError, KeyError, TypeError) as exc:
            stats.refuse(row["id"], [f"conversion: {exc}"])
            continue
        problems = openai_problems(record)
        if problems:
            stats.refuse(row["id"], problems)
            continue
        stream.write(_line(record))
        stats.count += 1


# --- ShareGPT (LLaMA-Factory) -------------------------------------------------------------------

SHAREGPT_MERGEABLE = {"human", "gpt"}


def sharegpt_repair(record: dict) -> tuple[dict, list[str]]:
    """Merge back-to-back human or gpt turns, the one break LLaMA-Factory skips that can be mended
    without inventing or dropping content. Returns the record and what was repaired."""
    merged: list[dict] = []
    repairs = []
    for turn in record["conversations"]:
        previous = merged[-1] if merged else None
        if previous and previous["from"] == turn["from"] and turn["from"] in SHAREGPT_MERGEABLE:
            previous["value"] = "\n\n".join(v for v in (previous["value"], turn["value"]) if v)
            repairs.append(f"merged consecutive {turn['from']} turns at {len(merged) - 1}")
            continue
        merged.append(dict(turn))
    return {**record, "conversations": merged}, repairs


def sharegpt_dataset_info(name: str, file_name: str) -> dict:
    return {
        name: {
            "file_name": file_name,
            "formatting": "sharegpt",
            "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
            "tags": {
                "role_tag": "from",
                "content_tag": "value",
                "user_tag": "human",
                "assistant_tag": "gpt",
                "observation_tag": "observation",
                "function_tag": "function_call",
                "system_tag": "system",
            },
        }
    }


class _ZipTarget:
    """Only write(): zipfile then streams entries with data descriptors and never seeks back."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, data) -> int:
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()


def write_sharegpt(stream, queryset, stats: ExportStats, label: str) -> None:
    with zipfile.ZipFile(_ZipTarget(stream), "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("data.jsonl", "w", force_zip64=True) as data:
            for row in rows_stream(queryset):
                try:
                    record = canonical_to_sharegpt(row["messages"], row["tools"])
                except (FormatError, KeyError, TypeError) as exc:
                    stats.refuse(row["id"], [f"conversion: {exc}"])
                    continue
                record, repairs = sharegpt_repair(record)
                problems = sharegpt_problems(record)
                if problems:
                    stats.refuse(row["id"], problems)
                    continue
                stats.repaired_count += bool(repairs)
                data.write(_line(record))
                stats.count += 1
        info = sharegpt_dataset_info(label, "data.jsonl")
        archive.writestr("dataset_info.json", json.dumps(info, indent=2, ensure_ascii=False))


# --- τ²-bench -----------------------------------------------------------------------------------

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


def _problems(validator, record: dict) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or 'record'}: {error.message}"
        for error in validator.iter_errors(record)
    ]


def tau2_task_problems(record: dict) -> list[str]:
    return _problems(_task_validator, record)


TAU2_ROLES = {"system", "user", "assistant", "tool"}


def _tau2_message_problems(message, where: str, calls_seen: set) -> list[str]:
    if not isinstance(message, dict):
        return [f"{where}: must be an object"]
    problems = []
    role = message.get("role")
    if role not in TAU2_ROLES:
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
    """What τ²-bench's SimulationRun model refuses (checked by hand: a schema validator is 20x slower)."""
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
    actions = [
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
                arguments, _ = parse_arguments(call)
                calls.append(
                    {
                        "id": call.get("id", ""),
                        "name": call["function"]["name"],
                        "arguments": arguments if isinstance(arguments, dict) else {},
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


class _JsonArray:
    """Writes `"key": [item, item, ...]` one item at a time."""

    def __init__(self, stream, key: str):
        self.stream, self.empty = stream, True
        stream.write(b"," + orjson.dumps(key) + b":[")

    def add(self, record: dict) -> None:
        self.stream.write((b"" if self.empty else b",\n") + orjson.dumps(record))
        self.empty = False

    def close(self) -> None:
        self.stream.write(b"]")


def write_tau2(stream, queryset, stats: ExportStats, label: str) -> None:
    domain_names = dict(Domain.objects.values_list("id", "name"))
    stream.write(b'{"timestamp":' + orjson.dumps(timezone.now().isoformat()))
    stream.write(b',"info":' + orjson.dumps({"source": "simia-web", "dataset": label, "num_trials": 1}))
    tasks = _JsonArray(stream, "tasks")
    broken_tasks: dict[int, list[str]] = {}  # their simulations are refused with these reasons
    task_rows = Task.objects.filter(pk__in=queryset.filter(task__isnull=False).values("task_id"))
    for task in rows_stream(task_rows, fields=TASK_FIELDS):
        record = tau2_task(task, domain_names.get(task["domain_id"], ""))
        problems = tau2_task_problems(record)
        if problems:
            broken_tasks[task["id"]] = [f"task: {p}" for p in problems]
            continue
        tasks.add(record)
    for row in rows_stream(queryset.filter(task__isnull=True)):
        tasks.add(tau2_task_from_trajectory(row, domain_names.get(row["domain_id"], "")))
    tasks.close()
    simulations = _JsonArray(stream, "simulations")
    for row in rows_stream(queryset, fields=SIMULATION_FIELDS):
        if row["task_id"] in broken_tasks:
            stats.refuse(row["id"], broken_tasks[row["task_id"]])
            continue
        domain_name = domain_names.get(row["domain_id"], "")
        task_id = tau2_task_id(
            domain_name, task_pk=row["task_id"], external_id=row["task__external_id"] or "", trajectory_id=row["id"]
        )
        try:
            record = tau2_simulation(row, task_id, domain_name)
        except (KeyError, TypeError, AttributeError) as exc:
            stats.refuse(row["id"], [f"conversion: {exc}"])
            continue
        problems = tau2_simulation_problems(record)
        if problems:
            stats.refuse(row["id"], problems)
            continue
        simulations.add(record)
        stats.count += 1
    simulations.close()
    stream.write(b"}")


WRITERS = {"openai": write_openai, "sharegpt": write_sharegpt, "tau2": write_tau2}
EXTENSIONS = {"openai": "jsonl", "sharegpt": "zip", "tau2": "json"}
CONTENT_TYPES = {"openai": "application/jsonl", "sharegpt": "application/zip", "tau2": "application/json"}
