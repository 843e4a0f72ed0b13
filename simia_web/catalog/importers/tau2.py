"""τ²-bench domain folders (policy.md, tools.json, tasks.json, optional db.json) → catalog specs.

The files are read here; what their records mean is formats.tau2's."""

import re

from simia_web.catalog.validation import api_problems, state_problems
from simia_web.formats import FormatError
from simia_web.formats.conversation import tools_list
from simia_web.formats.tau2 import api_specs_from_tools, state_schema_derive, tau2_task_spec

from .errors import Collected, ImportIssue
from .reading import Folder, bytes_read, json_read, records_read, text_decode


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
    raw_tools = guarded(json_read, "tools.json")
    apis = [] if raw_tools is None else _apis_read(raw_tools, folder.path("tools.json"), issues)
    tasks = []
    names = {a["name"] for a in apis}
    for record in guarded(records_read, "tasks.json") or []:
        spec, problems = tau2_task_spec(record.value, names)
        issues += [
            ImportIssue(folder.path("tasks.json"), record.line, p.field, p.message, record.number) for p in problems
        ]
        if spec is not None:
            tasks.append(spec)
    state = guarded(json_read, "db.json") if folder.has("db.json") else None
    initial_state, state_schema = ({}, {}) if state is None else _state_read(state, folder.path("db.json"), issues)
    return {
        "issues": issues,
        "policy": (policy or "").strip(),
        "apis": apis,
        "tasks": tasks,
        "initial_state": initial_state,
        "state_schema": state_schema,
        "name": _folder_name(source, name),
    }


def _apis_read(raw_tools, tools_file: str, issues: list[ImportIssue]) -> list[dict]:
    """The API specs of tools.json; what is wrong with them goes into `issues`."""
    try:
        apis = api_specs_from_tools(tools_list(raw_tools))
    except FormatError as exc:
        issues.append(ImportIssue(tools_file, None, exc.field, exc.message))
        return []
    seen = set()
    for i, spec in enumerate(apis):
        for problem in api_problems(spec):
            issues.append(ImportIssue(tools_file, None, f"tools[{i}]", f"{spec['name']}: {problem}"))
        if spec["name"] in seen:
            issues.append(ImportIssue(tools_file, None, f"tools[{i}].name", f"duplicate tool {spec['name']!r}"))
        seen.add(spec["name"])
    return apis


def _state_read(state, db_file: str, issues: list[ImportIssue]) -> tuple[dict, dict]:
    """The initial state of db.json and the schema derived from it; what is wrong goes into `issues`."""
    if not isinstance(state, dict):
        issues.append(ImportIssue(db_file, None, "", "the database must be a JSON object"))
        return {}, {}
    state_schema = state_schema_derive(state)
    for problem in state_problems(state_schema, state):
        issues.append(ImportIssue(db_file, None, "", problem))
    return state, state_schema


def _folder_name(source, name: str) -> str:
    stem = name.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"\.zip$", "", stem, flags=re.I)
