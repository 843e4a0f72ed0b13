"""Reads of the catalog: the lists the pages and the REST API share, and what the pipelines repeat for every
unit.

Every read a request makes names the workspaces it reads from (`workspace_ids`: a page's current workspace, or a
REST request's workspaces) and starts from `accounts.scoping.scoped`, so another workspace's rows are never there to
be found."""

from collections.abc import Iterable, Mapping

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from simia_web.accounts.scoping import scoped
from simia_web.core.cache import ProcessCache

from .filters import ApiFilter, DomainFilter, SeedFilter, TaskFilter
from .models import Api, Domain, Seed, Task

_job_domains = ProcessCache("SIMIA_CATALOG_CACHE_SECONDS")
# A domain's fields that can be large: its world state alone is 2.8 MB for τ² retail.
DOMAIN_LARGE_FIELDS = ("description", "policy", "state_schema", "initial_state", "state_errors")


def with_domain_named(queryset):
    """`queryset` with each row's domain joined for its name, without its large fields: joined whole, a list of
    50 rows parsed the domain's world state 50 times."""
    return queryset.select_related("domain").defer(*(f"domain__{name}" for name in DOMAIN_LARGE_FIELDS))


# A filter's domain choices stop here: a select of more would be no use to read.
DOMAIN_CHOICES_MAX = 500


def domains_in(*, workspace_ids: Iterable[int]) -> QuerySet[Domain]:
    """The domains the workspaces own."""
    return scoped(Domain.objects.all(), workspace_ids)


def domain_names(*, workspace_ids: Iterable[int]) -> list[str]:
    """The workspaces' domain names in order, for a filter's choices."""
    rows = domains_in(workspace_ids=workspace_ids).order_by("name").values_list("name", flat=True)
    return list(rows[:DOMAIN_CHOICES_MAX])


def domain_named(*, name: str, workspace_ids: Iterable[int]) -> Domain | None:
    """The domain called `name` if one of the workspaces owns it (its id, name and workspace only), else None: a
    name of another workspace's domain is not found, as a missing one."""
    return domains_in(workspace_ids=workspace_ids).only("id", "name", "workspace_id").filter(name=name).first()


def _count(model, **match):
    """A correlated COUNT, so that several counts on one row do not multiply each other as joins would."""
    rows = model.objects.filter(**match).order_by().values(*match.keys()).annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def domains_counted(*, workspace_ids: Iterable[int]) -> QuerySet[Domain]:
    """The workspaces' domains with `api_count`, `task_count` and `seed_count`: all of each, valid or not, as the
    lists that a domain's counts link to show them."""
    return domains_in(workspace_ids=workspace_ids).annotate(
        api_count=_count(Api, domain=OuterRef("pk")),
        task_count=_count(Task, domain=OuterRef("pk")),
        seed_count=_count(Seed, domain=OuterRef("pk")),
    )


def domain_list(*, filters: Mapping, workspace_ids: Iterable[int]) -> QuerySet[Domain]:
    """The workspaces' domains matching `filters` (DomainFilter's parameters), by name, with their counts and
    without the large fields a list row never shows."""
    rows = domains_counted(workspace_ids=workspace_ids).defer(
        *(name for name in DOMAIN_LARGE_FIELDS if name != "description"), "provenance"
    )
    return DomainFilter(filters, queryset=rows).qs.order_by("name")


def api_list(*, filters: Mapping, workspace_ids: Iterable[int]) -> QuerySet[Api]:
    """The workspaces' APIs matching `filters` (ApiFilter's parameters), by domain and name."""
    return ApiFilter(filters, queryset=api_details(workspace_ids=workspace_ids)).qs.order_by(
        "domain__name", "name", "id"
    )


def task_list(*, filters: Mapping, workspace_ids: Iterable[int]) -> QuerySet[Task]:
    """The workspaces' tasks matching `filters` (TaskFilter's parameters), by domain and id."""
    rows = with_domain_named(
        scoped(Task.objects.all(), workspace_ids).defer("user_scenario", "expected_actions", "provenance")
    )
    return TaskFilter(filters, queryset=rows).qs.order_by("domain__name", "id")


def seed_list(*, filters: Mapping, workspace_ids: Iterable[int]) -> QuerySet[Seed]:
    """The workspaces' seeds matching `filters` (SeedFilter's parameters), by domain and id, without their
    conversations."""
    rows = with_domain_named(scoped(Seed.objects.all(), workspace_ids).defer("messages", "tools", "provenance"))
    return SeedFilter(filters, queryset=rows).qs.order_by("domain__name", "id")


def api_details(*, workspace_ids: Iterable[int]) -> QuerySet[Api]:
    """The workspaces' APIs as their page and the API's detail show them, with their domain's name."""
    return with_domain_named(scoped(Api.objects.all(), workspace_ids))


def task_details(*, workspace_ids: Iterable[int]) -> QuerySet[Task]:
    return with_domain_named(scoped(Task.objects.all(), workspace_ids))


def seed_details(*, workspace_ids: Iterable[int]) -> QuerySet[Seed]:
    return with_domain_named(scoped(Seed.objects.select_related("created_by"), workspace_ids))


def domain_apis(*, domain: Domain, limit: int) -> list[Api]:
    """A domain's APIs for its page: valid ones first, by name."""
    return list(domain.apis.order_by("-valid", "name")[:limit])


def domain_unusable_reason(domain: Domain) -> str | None:
    """Why task synthesis, rollouts and RL sessions cannot use the domain as it is, or None: an invalid
    world state is kept with its problems, and every unit started on it would fail its state checks."""
    if domain.state_problems:
        return f"domain {domain.name!r} has an invalid world state: {'; '.join(domain.state_problems)}"
    return None


def domain_with_valid_apis(domain_id: int, *, job_id: int) -> tuple[Domain, list[Api]]:
    """A domain and its valid APIs, as the rollout units of one job read them.

    Kept per job and process for SIMIA_CATALOG_CACHE_SECONDS: a job of a thousand rollouts reads them
    once per worker and interval instead of a thousand times. Keyed by job, so APIs that another job
    adds are seen by the jobs planned after them; an edit reaches a running job's later units within
    that interval.
    """

    def load() -> tuple[Domain, list[Api]]:
        domain = Domain.objects.get(pk=domain_id)
        return domain, list(Api.objects.filter(domain_id=domain_id, valid=True))

    return _job_domains.get((job_id, domain_id), load)


catalog_cache_clear = _job_domains.clear
