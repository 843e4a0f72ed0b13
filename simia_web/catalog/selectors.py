"""Reads of the catalog that the pipelines repeat for every unit."""

from simia_web.core.cache import ProcessCache

from .models import Api, Domain

_job_domains = ProcessCache("SIMIA_CATALOG_CACHE_SECONDS")
# A domain's fields that can be large: its world state alone is 2.8 MB for τ² retail.
DOMAIN_LARGE_FIELDS = ("description", "policy", "state_schema", "initial_state", "state_errors")


def with_domain_named(queryset):
    """`queryset` with each row's domain joined for its name, without its large fields: joined whole, a list of
    50 rows parsed the domain's world state 50 times (1.2 s of CPU for a page of τ² retail's)."""
    return queryset.select_related("domain").defer(*(f"domain__{name}" for name in DOMAIN_LARGE_FIELDS))


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
