"""/metrics: who may read it, what it says, and its job and LLM counters moving with a job run by a real worker."""

import ipaddress

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simia_web.jobs.models import JobStatus
from simia_web.llm.models import LLMCall
from simia_web.llm.services import llm_call_mark_invalid, llm_call_record
from simia_web.synthesis.services import synthesis_queue
from tests.conftest import wait_for

TOKEN = "scrape-token-0123456789"


def scrape(client) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def total(samples, name: str, **labels) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, pairs), value in samples.items() if sample == name and wanted <= set(pairs))


@pytest.fixture
def metrics_token(settings):
    settings.SIMIA_METRICS_TOKEN = TOKEN
    settings.SIMIA_METRICS_ALLOWED_IPS = []


def test_metrics_need_a_token_or_an_allowed_address(client, db, settings):
    settings.SIMIA_METRICS_TOKEN, settings.SIMIA_METRICS_ALLOWED_IPS = "", []
    assert client.get("/metrics").status_code == 403  # nothing configured: nobody
    settings.SIMIA_METRICS_TOKEN = TOKEN
    response = client.get("/metrics")
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.SIMIA_METRICS_TOKEN = ""
    settings.SIMIA_METRICS_ALLOWED_IPS = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1")]
    assert client.get("/metrics").status_code == 200  # the test client's address is 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9").status_code == 403


def test_a_signed_in_admin_is_not_enough(client, users, metrics_token):
    client.force_login(users["admin"])
    assert client.get("/metrics").status_code == 401


def test_web_requests_are_counted_by_route_name(client, users, metrics_token):
    client.force_login(users["annotator"])
    before = scrape(client)
    client.get("/jobs/")
    after = scrape(client)
    labels = {"view": "job-list", "method": "GET", "status": "200"}
    assert (
        total(after, "simia_http_requests_total", **labels) == total(before, "simia_http_requests_total", **labels) + 1
    )


def test_recorded_and_invalidated_calls_are_counted(client, db, metrics_token, llm_stub):
    """A call written on its own (an RL step's) is counted as it is written; an answer found unusable later is an
    error of its kind. Latency goes into its bucket and sum; cache hits have no latency."""
    before = scrape(client)
    call = llm_call_record(
        LLMCall(
            stage="judge",
            profile=llm_stub.profile,
            model="m",
            request_hash="h",
            request={},
            tokens_in=30,
            tokens_out=7,
            latency_ms=1800,
        )
    )
    llm_call_record(
        LLMCall(stage="judge", profile=llm_stub.profile, model="m", request_hash="h", request={}, cache_hit=True)
    )
    llm_call_mark_invalid(call, kind="invalid_json", problem="not JSON")
    after = scrape(client)

    def moved(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    profile = {"profile": "stub"}
    assert moved("simia_llm_calls_total", stage="judge", **profile) == 2
    assert moved("simia_llm_calls_total", stage="judge", cache_hit="true", **profile) == 1
    assert moved("simia_llm_tokens_total", direction="in", **profile) == 30
    assert moved("simia_llm_tokens_total", direction="out", **profile) == 7
    assert moved("simia_llm_errors_total", reason="invalid_json", **profile) == 1
    assert moved("simia_llm_latency_seconds_bucket", le="1.0", **profile) == 0
    assert moved("simia_llm_latency_seconds_bucket", le="2.5", **profile) == 1
    assert moved("simia_llm_latency_seconds_count", **profile) == 1
    assert moved("simia_llm_latency_seconds_sum", **profile) == pytest.approx(1.8)


def test_a_scrape_costs_the_same_whatever_the_data(client, db, metrics_token, llm_stub, django_assert_max_num_queries):
    for _ in range(3):
        llm_call_record(LLMCall(stage="agent", profile=llm_stub.profile, model="m", request_hash="h", request={}))
    with django_assert_max_num_queries(5):  # counters, active jobs, active units, pending deliveries
        scrape(client)


def test_broker_out_of_reach_is_reported_not_failed(client, db, metrics_token, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:9/0"
    samples = scrape(client)
    assert total(samples, "simia_broker_up") == 0
    assert not any(name == "simia_queue_messages" for name, _ in samples)


@pytest.mark.integration
def test_counters_move_with_a_job_run_by_a_worker(client, celery_worker, llm_stub, metrics_token, settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    before = scrape(client)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=2, rollouts=1)
    queued = scrape(client)  # no worker yet: the job and its start message wait
    assert total(queued, "simia_jobs_active", status="queued") == 1
    assert total(queued, "simia_queue_messages", queue="celery") >= 1
    assert total(queued, "simia_broker_up") == 1
    celery_worker()
    wait_for(lambda: not _refreshed(job).is_active, timeout=120, message="the job to finish")
    assert job.status == JobStatus.SUCCEEDED, job.error
    after = scrape(client)

    def moved(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    calls = LLMCall.objects.filter(job=job)
    assert moved("simia_jobs_ended_total", kind="synthesize", status="succeeded") == 1
    assert moved("simia_job_units_ended_total", kind="synthesize", status="done") == job.units.count()
    assert moved("simia_llm_calls_total", profile="stub") == calls.count() > 0
    assert moved("simia_llm_tokens_total", profile="stub", direction="out") == sum(c.tokens_out for c in calls)
    assert moved("simia_llm_latency_seconds_count", profile="stub") == calls.filter(cache_hit=False).count()
    assert total(after, "simia_jobs_active", status="running") == 0
    assert total(after, "simia_queue_messages", queue="celery") == 0


def _refreshed(job):
    job.refresh_from_db()
    return job
