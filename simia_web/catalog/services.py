"""Writes to domains, APIs and tasks."""

from django.db import transaction

from simia_web.core.jsonutil import content_hash
from simia_web.core.services import audit_record
from simia_web.synthesis.rules import shingles, similarity

from .models import Api, Domain, DomainSource, Task, TaskStatus
from .validation import api_set_problems, state_problems

NEAR_DUPLICATE_THRESHOLD = 0.8


def domain_ensure(
    *, name: str, description: str = "", policy: str = "", source: str = DomainSource.MANUAL, actor=None
) -> Domain:
    domain, created = Domain.objects.get_or_create(
        name=name, defaults={"description": description, "policy": policy, "source": source}
    )
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
                kind=spec.get("kind") if spec.get("kind") in {"read", "write"} else "read",
                touches=spec.get("touches") if isinstance(spec.get("touches"), list) else [],
                valid=not errors,
                errors=errors,
                job=job,
                provenance=provenance or {},
                content_hash=content_hash(spec),
            )
        )
    created = Api.objects.bulk_create(rows)
    state_errors = set_problems + state_problems(state_schema, initial_state)
    if not domain.state_schema or not state_problems(state_schema, initial_state):
        domain.state_schema = state_schema if isinstance(state_schema, dict) else {}
        domain.initial_state = initial_state if isinstance(initial_state, dict) else {}
    domain.state_errors = state_errors
    domain.save(update_fields=["state_schema", "initial_state", "state_errors", "updated_at"])
    return created


@transaction.atomic
def tasks_store(*, domain: Domain, tasks: list[dict], job=None, provenance: dict | None = None) -> list[Task]:
    """Store synthesized tasks: unknown APIs reject a task; near-duplicates are flagged, not dropped."""
    api_names = set(domain.apis.filter(valid=True).values_list("name", flat=True))
    known = [(t.pk, shingles(t.instruction)) for t in domain.tasks.filter(status=TaskStatus.VALID)]
    created = []
    for spec in tasks:
        instruction = str(spec.get("instruction", "")).strip()
        needed = spec.get("apis_needed") if isinstance(spec.get("apis_needed"), list) else []
        errors = []
        if not instruction:
            errors.append("empty instruction")
        unknown = [name for name in needed if name not in api_names]
        if unknown:
            errors.append(f"names unknown APIs: {', '.join(map(str, unknown))}")
        status, duplicate_of = TaskStatus.VALID, None
        words = shingles(instruction)
        if errors:
            status = TaskStatus.REJECTED
        else:
            for other_pk, other_words in known:
                if similarity(words, other_words) >= NEAR_DUPLICATE_THRESHOLD:
                    status, duplicate_of = TaskStatus.DUPLICATE, other_pk
                    errors.append(f"near-duplicate of task {other_pk}")
                    break
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
        if status == TaskStatus.VALID:
            known.append((task.pk, words))
        created.append(task)
    return created
