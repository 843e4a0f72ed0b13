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
        spec, problems = tau2_task_spec(record.value, names)
        issues += [
            ImportIssue(folder.path("tasks.json"), record.line, p.field, p.message, record.number) for p in problems
        ]
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
