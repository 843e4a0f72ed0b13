"""The per-job, per-process cache of a domain's APIs that rollout units read."""

from simia_web.catalog.models import Api
from simia_web.catalog.selectors import domain_with_valid_apis
from simia_web.catalog.services import domain_ensure

PARAMS = {"type": "object", "properties": {}}


def _api(domain, name, valid=True):
    return Api(domain=domain, name=name, description="", parameters=PARAMS, returns={}, kind="read", valid=valid)


def test_a_job_reads_the_domain_once_and_a_later_job_sees_new_apis(db, settings, django_assert_num_queries):
    settings.SIMIA_CATALOG_CACHE_SECONDS = 60
    domain = domain_ensure(name="shop")
    Api.objects.bulk_create([_api(domain, "get_order"), _api(domain, "broken", valid=False)])
    with django_assert_num_queries(2):
        _, apis = domain_with_valid_apis(domain.pk, job_id=1)
    with django_assert_num_queries(0):
        cached_domain, cached = domain_with_valid_apis(domain.pk, job_id=1)
    assert [a.name for a in apis] == [a.name for a in cached] == ["get_order"] and cached_domain == domain

    Api.objects.bulk_create([_api(domain, "refund")])  # another job adds an API
    assert [a.name for a in domain_with_valid_apis(domain.pk, job_id=1)[1]] == ["get_order"]
    assert [a.name for a in domain_with_valid_apis(domain.pk, job_id=2)[1]] == ["get_order", "refund"]


def test_entries_expire(db, settings):
    settings.SIMIA_CATALOG_CACHE_SECONDS = 0
    domain = domain_ensure(name="shop")
    assert domain_with_valid_apis(domain.pk, job_id=1)[1] == []
    Api.objects.bulk_create([_api(domain, "get_order")])
    assert [a.name for a in domain_with_valid_apis(domain.pk, job_id=1)[1]] == ["get_order"]
