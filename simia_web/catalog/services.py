"""Writes to domains, APIs, tasks and seeds."""

from collections.abc import Callable
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.utils import timezone

from simia_web.accounts.models import default_workspace_id, owner_workspace_id
from simia_web.core.errors import ValidationFailed, django_validation
from simia_web.core.jsonutil import content_hash
from simia_web.core.models import Revision
from simia_web.core.services import audit_record, revision_record, versioned_update
from simia_web.dedup.services import item_index
from simia_web.formats import FormatError
from simia_web.formats.conversation import messages_strict, tools_list
from simia_web.formats.rules import rules_check

from .duplicates import TASKS, task_duplicate_of
from .models import Api, Domain, DomainSource, Seed, Task, TaskStatus
from .validation import (
    STATE_SCHEMA_LABEL,
    api_problems,
    api_set_problems,
    state_problems,
)


def workspace_id_or_default(workspace_id: int | None) -> int:
    """The workspace a write goes to: `workspace_id`, or the `default` workspace when it names none."""
    return default_workspace_id() if workspace_id is None else workspace_id


def domain_name_taken(name: str) -> str:
    """The refusal of a domain name another workspace uses: names are unique across workspaces (they are in
    addresses), and the refusal says no more than that the name is in use."""
    return f"the name {name!r} is taken: choose another name"


def domain_ensure(
    *,
    name: str,
    description: str = "",
    policy: str = "",
    source: str = DomainSource.MANUAL,
    workspace_id: int | None = None,
    actor=None,
) -> Domain:
    """The domain `name` of the workspace `workspace_id` (the `default` one when None), created when new;
    ValidationFailed (field `domain`) when another workspace has a domain of that name."""
    workspace_id = workspace_id_or_default(workspace_id)
    domain, created = Domain.objects.get_or_create(
        name=name,
        defaults={"description": description, "policy": policy, "source": source, "workspace_id": workspace_id},
    )
    if domain.workspace_id != workspace_id:
        raise ValidationFailed(domain_name_taken(name), field="domain")
    if created:
        audit_record(actor=actor, action="domain.create", target=domain, data={"source": source})
    return domain


@transaction.atomic
def apis_store(
    *, domain: Domain, apis: list[dict], state_schema, initial_state, job=None, provenance: dict | None = None
) -> list[Api]:
    """Store synthesized APIs and the world state; invalid items are kept with their errors, unused."""
    existing = set(domain.apis.filter(valid=True).values_list("name", flat=True))
    per_api, set_problems = api_set_problems(apis)
    rows = []
    for i, spec in enumerate(apis):
        errors = list(per_api[i])
        if spec.get("name") in existing:
            errors.append(f"the domain already has an API named {spec.get('name')!r}")
        rows.append(
            Api(
                domain=domain,
                name=str(spec.get("name", ""))[:120],
                description=spec.get("description", ""),
                parameters=spec.get("parameters") if isinstance(spec.get("parameters"), dict) else {},
                returns=spec.get("returns") if isinstance(spec.get("returns"), dict) else {},
                kind=spec["kind"] if spec.get("kind") in {"read", "write"} else "read",
                touches=spec.get("touches") if isinstance(spec.get("touches"), list) else [],
                valid=not errors,
                errors=errors,
                job=job,
                provenance=provenance or {},
                content_hash=content_hash(spec),
            )
        )
    created = Api.objects.bulk_create(rows)
    problems = state_problems(state_schema, initial_state)
    if not initial_state and domain.initial_state:  # the domain keeps its state, and that state's problems
        problems = [*domain.state_problems, "a synthesized world state was not used: it has no records"]
    elif problems and domain.state_schema and not domain.state_problems:
        # The domain keeps the valid state it has; the new one's problems are a note, not the domain's.
        problems = [f"a synthesized world state was not used: {problem}" for problem in problems]
    else:  # a valid state, or an invalid one where there was no valid state: kept with its problems, unused
        domain.state_schema = state_schema if isinstance(state_schema, dict) else {}
        domain.initial_state = initial_state if isinstance(initial_state, dict) else {}
    domain.state_errors = set_problems + problems
    domain.save(update_fields=["state_schema", "initial_state", "state_errors", "updated_at"])
    return created


@transaction.atomic
def tasks_store(*, domain: Domain, tasks: list[dict], job=None, provenance: dict | None = None) -> list[Task]:
    """Store synthesized tasks: unknown APIs reject a task; near-duplicates of the domain's valid tasks (found through
    the near-duplicate index, which each stored task joins) are flagged, not dropped."""
    api_names = set(domain.apis.filter(valid=True).values_list("name", flat=True))
    created = []
    for spec in tasks:
        instruction = str(spec.get("instruction", "")).strip()
        needed = spec.get("apis_needed")
        needed = needed if isinstance(needed, list) else []
        errors = []
        if not instruction:
            errors.append("empty instruction")
        unknown = [name for name in needed if name not in api_names]
        if unknown:
            errors.append(f"names unknown APIs: {', '.join(map(str, unknown))}")
        status, duplicate_of = TaskStatus.VALID, None
        if errors:
            status = TaskStatus.REJECTED
        else:
            duplicate_of = task_duplicate_of(domain=domain, instruction=instruction)
            if duplicate_of is not None:
                status = TaskStatus.DUPLICATE
                errors.append(f"near-duplicate of task {duplicate_of}")
        task = Task.objects.create(
            domain=domain,
            instruction=instruction,
            apis_needed=needed,
            expected_outcome=str(spec.get("expected_outcome", "")),
            difficulty=str(spec.get("difficulty", ""))[:16],
            status=status,
            errors=errors,
            duplicate_of_id=duplicate_of,
            job=job,
            provenance=provenance or {},
            content_hash=content_hash(spec),
        )
        task_index(task, new=True)
        created.append(task)
    return created


def task_index(task: Task, new: bool = False) -> None:
    """Sign the task's instruction in the near-duplicate index, in the transaction that writes it."""
    item_index(
        corpus=TASKS, workspace_id=owner_workspace_id(task.domain), item_id=task.pk, text=task.instruction, new=new
    )


# --- Edits with revisions -------------------------------------------------------------------------
# Domains, seeds, APIs and tasks are edited by curators before more data is generated from them.
# Every edit is a compare-and-set on `version`, stores a Revision (full snapshot plus JSON Patch from
# the previous one) and an audit event, all in one transaction.


def domain_snapshot(domain: Domain) -> dict:
    return {
        "description": domain.description,
        "policy": domain.policy,
        "state_schema": domain.state_schema,
        "initial_state": domain.initial_state,
    }


def seed_snapshot(seed: Seed) -> dict:
    return {"messages": seed.messages, "tools": seed.tools}


def api_snapshot(api: Api) -> dict:
    return {
        "name": api.name,
        "description": api.description,
        "parameters": api.parameters,
        "returns": api.returns,
        "kind": api.kind,
    }


def task_snapshot(task: Task) -> dict:
    return {
        "instruction": task.instruction,
        "expected_outcome": task.expected_outcome,
        "apis_needed": task.apis_needed,
        "difficulty": task.difficulty,
        "user_scenario": task.user_scenario,
        "expected_actions": task.expected_actions,
    }


SNAPSHOTS: dict[type[models.Model], Callable[[Any], dict]] = {
    Domain: domain_snapshot,
    Seed: seed_snapshot,
    Api: api_snapshot,
    Task: task_snapshot,
}


def revision_initial(*, obj, actor=None, note: str = "created") -> Revision:
    """Revision 1 (or the current version) of a new row, so later edits have a base to diff from."""
    return revision_record(obj=obj, data=SNAPSHOTS[type(obj)](obj), author=actor, note=note)


def _revision_base(obj, actor) -> None:
    """Rows made before revisions existed (e.g. synthesized ones) get their current state recorded first."""
    content_type = ContentType.objects.get_for_model(obj)
    if not Revision.objects.filter(content_type=content_type, object_id=obj.pk, version=obj.version).exists():
        revision_initial(obj=obj, actor=None, note="state before the first edit")


def _edited(obj, **changes) -> dict:
    """The row's current values with the edits applied; a None edit leaves that field as it is."""
    return {name: getattr(obj, name) if value is None else value for name, value in changes.items()}


def _edit_commit(*, obj, expected_version: int, actor, fields: dict, note: str, action: str):
    _revision_base(obj, actor)
    versioned_update(obj=obj, expected_version=expected_version, fields={**fields, "updated_at": timezone.now()})
    revision = revision_record(obj=obj, data=SNAPSHOTS[type(obj)](obj), author=actor, note=note)
    audit_record(
        actor=actor,
        action=action,
        target=obj,
        data={"version": obj.version, "changes": revision.changes, "note": note[:300]},
    )
    return obj


def seed_problems_compute(messages: list[dict], tools: list[dict]) -> list[dict]:
    """The deterministic rules over a seed; any unfixed finding makes it unusable for amplification."""
    return [v.as_dict() for v in rules_check(messages, tools)]


@transaction.atomic
def seed_update(*, seed: Seed, expected_version: int, actor, messages=None, tools=None, note: str = "") -> Seed:
    """Edit a seed's messages and/or tools. Structure errors refuse the edit; rule findings are kept
    on the seed (usable=False with its problems) so an annotator can save work in progress."""
    new = _edited(seed, messages=messages, tools=tools)
    try:
        new_messages = messages_strict(new["messages"])
        new_tools = tools_list(new["tools"])
    except FormatError as exc:
        raise ValidationFailed(str(exc), field="messages" if exc.field.startswith("messages") else "tools") from None
    digest = content_hash({"messages": new_messages, "tools": new_tools})
    twin = Seed.objects.filter(domain_id=seed.domain_id, content_hash=digest).exclude(pk=seed.pk).first()
    if twin is not None:
        raise ValidationFailed(f"identical to seed {twin.pk} of this domain", field="messages")
    problems = seed_problems_compute(new_messages, new_tools)
    fields = {
        "messages": new_messages,
        "tools": new_tools,
        "content_hash": digest,
        "problems": problems,
        "usable": not problems,
    }
    return _edit_commit(
        obj=seed, expected_version=expected_version, actor=actor, fields=fields, note=note, action="seed.update"
    )


@transaction.atomic
def api_update(
    *,
    api: Api,
    expected_version: int,
    actor,
    description=None,
    parameters=None,
    returns=None,
    kind=None,
    note: str = "",
) -> Api:
    """Edit an API's description, parameter/return schemas or kind; an invalid result is refused."""
    spec = {
        "name": api.name,
        **_edited(api, description=description, parameters=parameters, returns=returns, kind=kind),
        "touches": api.touches,
    }
    if not isinstance(spec["description"], str):
        raise ValidationFailed("must be text", field="description")
    problems = api_problems(spec)
    if problems:
        raise ValidationFailed.of({"api": problems})
    if not api.valid and Api.objects.filter(domain_id=api.domain_id, name=api.name, valid=True).exists():
        raise ValidationFailed(f"the domain already has a valid API named {api.name!r}", field="name")
    fields = {
        "description": spec["description"],
        "parameters": spec["parameters"],
        "returns": spec["returns"] or {},
        "kind": spec["kind"],
        "valid": True,
        "errors": [],
        "content_hash": content_hash(spec),
    }
    return _edit_commit(
        obj=api, expected_version=expected_version, actor=actor, fields=fields, note=note, action="api.update"
    )


@transaction.atomic
def task_update(
    *,
    task: Task,
    expected_version: int,
    actor,
    instruction=None,
    expected_outcome=None,
    apis_needed=None,
    difficulty=None,
    note: str = "",
) -> Task:
    """Edit a task; a rejected task whose problems are fixed becomes valid again."""
    errors = {}
    new = _edited(
        task, instruction=instruction, expected_outcome=expected_outcome, apis_needed=apis_needed, difficulty=difficulty
    )
    new_instruction, new_outcome, new_needed, new_difficulty = new.values()
    if not isinstance(new_instruction, str) or not new_instruction.strip():
        errors["instruction"] = "must not be empty"
    if not isinstance(new_outcome, str):
        errors["expected_outcome"] = "must be text"
    if not isinstance(new_needed, list) or not all(isinstance(n, str) for n in new_needed):
        errors["apis_needed"] = "must be a list of API names"
    else:
        known = set(task.domain.apis.filter(valid=True).values_list("name", flat=True))
        unknown = [n for n in new_needed if n not in known]
        if unknown:
            errors["apis_needed"] = f"unknown APIs: {', '.join(unknown)}"
    if not isinstance(new_difficulty, str) or len(new_difficulty) > 16:
        errors["difficulty"] = "must be text of at most 16 characters"
    if errors:
        raise ValidationFailed.of(errors)
    fields = {
        "instruction": new_instruction.strip(),
        "expected_outcome": new_outcome,
        "apis_needed": new_needed,
        "difficulty": new_difficulty,
    }
    if task.status == TaskStatus.REJECTED:
        fields.update(status=TaskStatus.VALID, errors=[])
    task = _edit_commit(
        obj=task, expected_version=expected_version, actor=actor, fields=fields, note=note, action="task.update"
    )
    task_index(task)
    return task


@transaction.atomic
def domain_update(
    *,
    domain: Domain,
    expected_version: int,
    actor,
    description=None,
    policy=None,
    state_schema=None,
    initial_state=None,
    note: str = "",
) -> Domain:
    """Edit a domain's description, policy, world-state schema or initial state; an initial state the
    schema refuses (or an invalid schema) is refused, so rollouts always start from a valid world."""
    new = _edited(
        domain, description=description, policy=policy, state_schema=state_schema, initial_state=initial_state
    )
    errors: dict[str, str | list[str]] = {
        name: "must be text" for name in ("description", "policy") if not isinstance(new[name], str)
    }
    problems = state_problems(new["state_schema"], new["initial_state"])
    if problems:
        errors["state_schema" if problems[0].startswith(STATE_SCHEMA_LABEL) else "initial_state"] = problems
    if not isinstance(new["initial_state"], dict):  # episodes patch the state by JSON Pointer from an object root
        errors["initial_state"] = "must be a JSON object"
    if errors:
        raise ValidationFailed.of(errors)
    # The state is valid now: drop its old problems, keep those of the API set.
    stale = domain.state_problems
    fields = {**new, "state_errors": [e for e in domain.state_errors if e not in stale]}
    return _edit_commit(
        obj=domain, expected_version=expected_version, actor=actor, fields=fields, note=note, action="domain.update"
    )


# --- Made by hand on the catalog's pages ------------------------------------------------------------------------
# Each starts its history with revision 1, so that its later edits are diffed from what was made.

RESERVED_DOMAIN_NAMES = frozenset({"new"})  # /domains/new/ is the page that creates one


@transaction.atomic
def domain_create(
    *, name: str, description: str = "", policy: str = "", workspace_id: int | None = None, actor
) -> Domain:
    """A new domain of the workspace `workspace_id` (the `default` one when None), written by hand: its APIs, tasks
    and world state come next (by form, import or synthesis). A name in use is refused; when another workspace uses
    it, without saying more."""
    workspace_id = workspace_id_or_default(workspace_id)
    if name in RESERVED_DOMAIN_NAMES:
        raise ValidationFailed(f"{name!r} is reserved: choose another name", field="name")
    owner = Domain.objects.filter(name=name).values_list("workspace_id", flat=True).first()
    if owner == workspace_id:
        raise ValidationFailed(f"a domain named {name!r} exists already: choose another name, or open it", field="name")
    if owner is not None:
        raise ValidationFailed(domain_name_taken(name), field="name")
    domain = Domain(
        name=name, description=description, policy=policy, source=DomainSource.MANUAL, workspace_id=workspace_id
    )
    with django_validation():
        domain.full_clean()
    domain.save()
    audit_record(actor=actor, action="domain.create", target=domain, data={"source": DomainSource.MANUAL})
    revision_initial(obj=domain, actor=actor)
    return domain


def _api_set_refresh(domain: Domain) -> None:
    """The domain's notes on its API set (a read-only and a state-changing API), after one was added."""
    specs = [
        {"name": a.name, "kind": a.kind, "parameters": a.parameters, "returns": a.returns, "touches": a.touches}
        for a in domain.apis.filter(valid=True).only("name", "kind", "parameters", "returns", "touches")
    ]
    _per_api, set_problems = api_set_problems(specs)
    domain.state_errors = [*domain.state_problems, *set_problems]
    domain.save(update_fields=["state_errors", "updated_at"])


@transaction.atomic
def api_create(*, domain: Domain, name: str, kind: str, parameters, description: str = "", returns=None, actor) -> Api:
    """A new API of the domain, written by hand; refused (nothing written) when it is not valid."""
    spec = {"name": name, "description": description, "kind": kind, "parameters": parameters, "returns": returns or {}}
    problems = api_problems(spec)
    if problems:
        raise ValidationFailed.of({"parameters" if "parameters" in problems[0] else "detail": problems})
    if domain.apis.filter(valid=True, name=name).exists():
        raise ValidationFailed(f"the domain already has an API named {name!r}: edit that one instead", field="name")
    api = Api.objects.create(
        domain=domain,
        name=name,
        description=description,
        kind=kind,
        parameters=parameters,
        returns=returns or {},
        content_hash=content_hash(spec),
    )
    audit_record(actor=actor, action="api.create", target=api, data={"domain": domain.name})
    revision_initial(obj=api, actor=actor)
    _api_set_refresh(domain)
    return api


@transaction.atomic
def task_create(
    *,
    domain: Domain,
    instruction: str,
    expected_outcome: str = "",
    apis_needed: list[str] | None = None,
    difficulty: str = "",
    actor,
) -> Task:
    """A new task of the domain, written by hand: valid, or flagged a near-duplicate of one it already has; refused
    when it names APIs the domain does not have."""
    instruction, needed = instruction.strip(), apis_needed or []
    errors = {}
    if not instruction:
        errors["instruction"] = "must not be empty: say what the user asks for"
    known = set(domain.apis.filter(valid=True).values_list("name", flat=True))
    unknown = [n for n in needed if n not in known]
    if unknown:
        errors["apis_needed"] = f"the domain has no valid API named {', '.join(unknown)}"
    if len(difficulty) > 16:
        errors["difficulty"] = "at most 16 characters"
    if errors:
        raise ValidationFailed.of(errors)
    duplicate_of = task_duplicate_of(domain=domain, instruction=instruction)
    task = Task.objects.create(
        domain=domain,
        instruction=instruction,
        expected_outcome=expected_outcome,
        apis_needed=needed,
        difficulty=difficulty,
        status=TaskStatus.VALID if duplicate_of is None else TaskStatus.DUPLICATE,
        errors=[] if duplicate_of is None else [f"near-duplicate of task {duplicate_of}"],
        duplicate_of_id=duplicate_of,
        content_hash=content_hash({"instruction": instruction, "apis_needed": needed}),
    )
    task_index(task, new=True)
    audit_record(actor=actor, action="task.create", target=task, data={"domain": domain.name})
    revision_initial(obj=task, actor=actor)
    return task
