"""The one import service behind the CLI, the REST upload and the pages.

Everything is read and validated first; only a clean import opens the transaction that writes.
Content already in the catalog (same hash, same task id, same API name) is skipped, so importing
the same file twice creates nothing the second time.
"""

from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils.text import slugify

from simia_web.catalog.models import Api, Domain, DomainSource, Seed, SeedFormat, Task
from simia_web.catalog.services import (
    SNAPSHOTS,
    domain_ensure,
    domain_name_taken,
    seed_problems_compute,
    task_index,
    workspace_id_or_default,
)
from simia_web.catalog.validation import api_problems
from simia_web.core.errors import ValidationFailed, django_validation
from simia_web.core.jsonutil import content_hash
from simia_web.core.models import Revision
from simia_web.core.services import audit_record
from simia_web.formats.tau2 import api_specs_from_tools

from .errors import Collected, ImportIssue, ImportRejected
from .records import seed_specs_read
from .tau2 import tau2_read

FORMATS = ("tau2", "sharegpt", "openai")
KINDS = ("apis", "tasks", "seeds")


@dataclass
class ImportResult:
    domain: str
    format: str
    created: dict = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    skipped: dict = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    unusable_seeds: int = 0
    notes: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "domain": self.domain,
            "format": self.format,
            "created": self.created,
            "skipped_duplicates": self.skipped,
            "unusable_seeds": self.unusable_seeds,
            "notes": self.notes,
        }

    def __str__(self) -> str:
        parts = [f"Imported into domain {self.domain!r} ({self.format}):"]
        for kind in KINDS:
            if self.created[kind] or self.skipped[kind]:
                parts.append(f"  {kind}: {self.created[kind]} created, {self.skipped[kind]} already present")
        if self.unusable_seeds:
            parts.append(f"  {self.unusable_seeds} seeds fail the rules and are marked unusable")
        parts += [f"  note: {n}" for n in self.notes]
        return "\n".join(parts)


def source_name(source) -> str:
    return str(source) if isinstance(source, Path) else getattr(source, "name", "upload") or "upload"


def domain_name_problems(name: str) -> list[str]:
    """What the domain name's validators refuse in `name` (nothing when it is a usable name)."""
    try:
        with django_validation():
            Domain._meta.get_field("name").run_validators(name)
    except ValidationFailed as exc:
        return exc.messages
    return []


def _domain_name(domain: str | None, source_name: str, fallback: str) -> str:
    if domain:
        return domain
    stem = source_name.rstrip("/").rsplit("/", 1)[-1].split(":")[0]
    for suffix in (".zip", ".jsonl", ".json"):
        stem = stem.removesuffix(suffix)
    return slugify(stem)[:80] or fallback


def domain_name_issues(name: str, source: str, workspace_id: int | None) -> list[ImportIssue]:
    """What is wrong with importing into the domain `name` of the workspace `workspace_id` (`default` when None): a
    name the validators refuse, or one another workspace's domain has (said without more)."""
    if problems := domain_name_problems(name):
        return [ImportIssue(source, None, "domain", f"{name!r}: {' '.join(problems)}")]
    owner = Domain.objects.filter(name=name).values_list("workspace_id", flat=True).first()
    if owner is not None and owner != workspace_id_or_default(workspace_id):
        return [ImportIssue(source, None, "domain", domain_name_taken(name))]
    return []


def seeds_import(
    *, source, format: str, domain: str | None = None, workspace_id: int | None = None, actor=None
) -> ImportResult:
    """Import a τ² folder (or .zip) or a ShareGPT / OpenAI file into a domain of the workspace `workspace_id` (the
    `default` one when None). Raises ImportRejected, writing nothing."""
    name = source_name(source)
    if format not in FORMATS:
        raise ImportRejected([ImportIssue(name, None, "format", f"must be one of {', '.join(FORMATS)}")])
    if isinstance(source, Path) and not source.exists():
        raise ImportRejected([ImportIssue(name, None, "", "no such file or folder")])
    if format != "tau2" and isinstance(source, Path) and source.is_dir():
        raise ImportRejected([ImportIssue(name, None, "", f"a {format} import reads a file, not a folder")])
    if format == "tau2":
        try:
            data = tau2_read(source, name)
        except Collected as exc:
            raise ImportRejected([exc.issue]) from None
        domain_name = domain or slugify(data.get("name", ""))[:80] or "tau2"
    else:
        specs, issues = seed_specs_read(source, name, format)
        data = {"issues": issues, "seeds": specs}
        domain_name = _domain_name(domain, name, "seeds")
    data["issues"][:0] = domain_name_issues(domain_name, name, workspace_id)
    if data["issues"]:
        raise ImportRejected(data["issues"])
    with transaction.atomic():
        if format == "tau2":
            result, target = _tau2_write(data, domain_name, workspace_id, actor)
        else:
            result, target = _seeds_write(data["seeds"], domain_name, format, name, workspace_id, actor)
        audit_record(actor=actor, action="catalog.import", target=target, data={"source": name, **result.as_dict()})
    return result


def _revisions_initial(objs: list, actor) -> None:
    """Revision 1 of every created row, in one query per kind."""
    if not objs:
        return
    content_type = ContentType.objects.get_for_model(type(objs[0]))
    snapshot = SNAPSHOTS[type(objs[0])]
    author = actor if getattr(actor, "pk", None) else None
    Revision.objects.bulk_create(
        Revision(
            content_type=content_type,
            object_id=o.pk,
            version=o.version,
            data=snapshot(o),
            author=author,
            note="imported",
        )
        for o in objs
    )


def apis_add(domain: Domain, specs: list[dict], result: ImportResult, actor, provenance: dict) -> None:
    """Add the specs' APIs to the domain (a spec's own "provenance" over `provenance`), skipping names it has."""
    existing = set(domain.apis.filter(valid=True).values_list("name", flat=True))
    rows = []
    for spec in specs:
        if spec["name"] in existing:
            result.skipped["apis"] += 1
            continue
        existing.add(spec["name"])
        errors = api_problems(spec)
        rows.append(
            Api(
                domain=domain,
                name=spec["name"][:120],
                description=spec["description"],
                parameters=spec["parameters"],
                returns=spec.get("returns") or {},
                kind=spec["kind"],
                valid=not errors,
                errors=errors,
                provenance={**provenance, **spec.get("provenance", {})},
                content_hash=content_hash({k: v for k, v in spec.items() if k != "provenance"}),
            )
        )
    created = Api.objects.bulk_create(rows)
    _revisions_initial(created, actor)
    result.created["apis"] += len(created)


def _domain_fill(domain: Domain, values: dict, result: ImportResult) -> None:
    """Fill empty domain fields; differing non-empty ones are kept and noted, never overwritten."""
    changed = []
    for field_name, value in values.items():
        current = getattr(domain, field_name)
        if not value or current == value:
            continue
        if current:
            result.notes.append(f"the domain already has a different {field_name.replace('_', ' ')}; kept it")
            continue
        setattr(domain, field_name, value)
        changed.append(field_name)
    if changed:
        domain.save(update_fields=[*changed, "updated_at"])


def _tau2_write(data: dict, domain_name: str, workspace_id: int | None, actor) -> tuple[ImportResult, Domain]:
    result = ImportResult(domain=domain_name, format="tau2")
    domain = domain_ensure(name=domain_name, source=DomainSource.TAU2, workspace_id=workspace_id, actor=actor)
    _domain_fill(
        domain,
        {"policy": data["policy"], "initial_state": data["initial_state"], "state_schema": data["state_schema"]},
        result,
    )
    provenance = {"import": "tau2"}
    apis_add(domain, data["apis"], result, actor, provenance)
    known_ids = set(domain.tasks.values_list("external_id", flat=True))
    known_hashes = set(domain.tasks.values_list("content_hash", flat=True))
    rows = []
    for spec in data["tasks"]:
        digest = content_hash(spec["record"])
        if spec["external_id"] in known_ids or digest in known_hashes:
            result.skipped["tasks"] += 1
            continue
        known_ids.add(spec["external_id"])
        known_hashes.add(digest)
        rows.append(
            Task(
                domain=domain,
                external_id=spec["external_id"],
                instruction=spec["instruction"],
                user_scenario=spec["user_scenario"],
                apis_needed=spec["apis_needed"],
                expected_outcome=spec["expected_outcome"],
                expected_actions=spec["expected_actions"],
                provenance=provenance,
                content_hash=digest,
            )
        )
    created = Task.objects.bulk_create(rows)
    for task in created:
        task_index(task, new=True)
    _revisions_initial(created, actor)
    result.created["tasks"] = len(created)
    return result, domain


def _seeds_write(
    specs: list[dict], domain_name: str, format: str, source_name: str, workspace_id: int | None, actor
) -> tuple[ImportResult, Domain]:
    result = ImportResult(domain=domain_name, format=format)
    domain = domain_ensure(name=domain_name, source=DomainSource.SEEDS, workspace_id=workspace_id, actor=actor)
    domain_tools = [api.as_tool() for api in domain.apis.filter(valid=True)]
    tool_specs: dict[str, dict] = {}
    known = set(domain.seeds.values_list("content_hash", flat=True))
    rows = []
    for spec in specs:
        # A record without its own tools is read against the domain's APIs.
        tools = spec["tools"] or domain_tools
        digest = content_hash({"messages": spec["messages"], "tools": tools})
        if digest in known:
            result.skipped["seeds"] += 1
            continue
        known.add(digest)
        for api in api_specs_from_tools(spec["tools"]):
            tool_specs.setdefault(api["name"], api)
        problems = seed_problems_compute(spec["messages"], tools)
        result.unusable_seeds += bool(problems)
        rows.append(
            Seed(
                domain=domain,
                source_format=SeedFormat(format),
                source_name=source_name[-300:],
                source_record=spec["record"],
                messages=spec["messages"],
                tools=tools,
                usable=not problems,
                problems=problems,
                created_by=actor if getattr(actor, "pk", None) else None,
                provenance={"import": format, "line": spec["line"]},
                content_hash=digest,
            )
        )
    apis_add(domain, list(tool_specs.values()), result, actor, {"import": format, "from": "seed tools"})
    created = Seed.objects.bulk_create(rows)
    _revisions_initial(created, actor)
    result.created["seeds"] = len(created)
    return result, domain
