"""The Prometheus exposition: the web tier's request metrics, and job, LLM, queue and webhook metrics read from
the database and the broker at scrape time.

Where each number lives decides how it is read:

- Requests are counted in the web process that served them (prometheus_client). Under gunicorn's several
  processes, gunicorn.conf.py sets PROMETHEUS_MULTIPROC_DIR and a scrape sums every process's files
  (prometheus_client's multiprocess mode); with one process, its own registry.
- Job and LLM counters come from the workers, on any number of machines, whose memory no web process sees:
  the writers keep them in the database (counters.py) and a scrape reads one row per series.
- Work in flight (active jobs, their units by status, undelivered webhooks) is counted at scrape time over
  active work only, and the queue's depth is asked of the broker.
"""

import os
import time

from prometheus_client import REGISTRY as PROCESS_REGISTRY
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from simia_web.core.outages import is_outage
from simia_web.llm.selectors import adaptive_limits

from . import counters, selectors
from .broker import queue_depths

PREFIX = "simia_"

HTTP_REQUESTS = Counter(
    f"{PREFIX}http_requests", "Requests answered, by route name, method and status.", ["view", "method", "status"]
)
HTTP_LATENCY = Histogram(
    f"{PREFIX}http_request_duration_seconds",
    "Time to answer a request, by route name.",
    ["view"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)

# Stored counters: name, help, label names.
STORED_COUNTERS = {
    counters.JOBS_ENDED: ("jobs_ended", "Jobs that reached a final status.", ("kind", "status")),
    counters.UNITS_ENDED: (
        "job_units_ended",
        "Units of ended jobs, by how they ended (errored: stored an error, not counted as done).",
        ("kind", "status"),
    ),
    counters.LLM_CALLS: ("llm_calls", "LLM calls (HTTP attempts and cache hits).", ("profile", "stage", "cache_hit")),
    counters.LLM_ERRORS: (
        "llm_errors",
        "LLM calls that failed or whose answer was unusable, by reason.",
        ("profile", "stage", "reason"),
    ),
    counters.LLM_TOKENS: ("llm_tokens", "Tokens sent (in) and received (out).", ("profile", "stage", "direction")),
    counters.UNIT_LEASES_TAKEN_BACK: (
        "job_unit_leases_taken_back",
        "Units the watchdog took back from a worker that leased them and did not start them (a wedged process).",
        ("kind",),
    ),
    counters.WEBHOOK_ATTEMPTS: (
        "webhook_attempts",
        "Webhook delivery attempts, by event and outcome (delivered, retried, failed).",
        ("event", "outcome"),
    ),
}


class RequestMetricsMiddleware:
    """Counts and times each request by its route's name (a bounded set), never by its path."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name if match else "") or "unmatched"
        HTTP_REQUESTS.labels(view, request.method, str(response.status_code)).inc()
        HTTP_LATENCY.labels(view).observe(time.perf_counter() - started)
        return response


class StoredMetricsCollector:
    """Job, LLM, queue and webhook metrics, read when Prometheus scrapes."""

    def collect(self):
        series = selectors.metric_counts()
        for metric, (name, documentation, labels) in STORED_COUNTERS.items():
            family = CounterMetricFamily(f"{PREFIX}{name}", documentation, labels=labels)
            for values, total in series.get(metric, []):
                family.add_metric([values.get(label, "") for label in labels], total)
            yield family
        yield _latency_histogram(series)
        yield from _work_in_flight()
        yield from _queue()


def _latency_histogram(series) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        f"{PREFIX}llm_latency_seconds",
        "LLM request latency per endpoint profile (cache hits excluded).",
        labels=["profile"],
    )
    buckets: dict[str, dict[str, int]] = {}
    for labels, n in series.get(counters.LLM_LATENCY_BUCKET, []):
        buckets.setdefault(labels["profile"], {})[labels["le"]] = n
    sums = {labels["profile"]: total / 1000 for labels, total in series.get(counters.LLM_LATENCY_MS, [])}
    for profile, counts in sorted(buckets.items()):
        cumulative, running = [], 0
        for bound in counters.LATENCY_BUCKETS:
            le = counters.bucket_label(bound)
            running += counts.get(le, 0)
            cumulative.append((le, running))
        family.add_metric([profile], cumulative, sum_value=sums.get(profile, 0.0))
    return family


def _work_in_flight():
    jobs = GaugeMetricFamily(f"{PREFIX}jobs_active", "Jobs queued or running.", labels=["status"])
    for status, n in selectors.active_job_counts().items():
        jobs.add_metric([status], n)
    yield jobs
    units = GaugeMetricFamily(
        f"{PREFIX}job_units_active", "Units of queued and running jobs, by status.", labels=["kind", "stage", "status"]
    )
    for kind, stage, status, n in selectors.active_unit_counts():
        units.add_metric([kind, stage, status], n)
    yield units
    yield GaugeMetricFamily(
        f"{PREFIX}webhook_deliveries_pending",
        "Webhook deliveries waiting for their first or next attempt.",
        value=selectors.pending_delivery_count(),
    )
    yield from _llm_concurrency()


def _llm_concurrency():
    """Each profile's adaptive concurrency limit and its ceiling (llm/adaptive.py); a limit Redis did not give is
    left out rather than fail the scrape."""
    limit = GaugeMetricFamily(
        f"{PREFIX}llm_concurrency_limit",
        "Requests an endpoint profile is allowed in flight now, adapted to its latency (at most its ceiling).",
        labels=["profile"],
    )
    ceiling = GaugeMetricFamily(
        f"{PREFIX}llm_concurrency_ceiling", "An endpoint profile's max_concurrency.", labels=["profile"]
    )
    for name, state in sorted(adaptive_limits().items()):
        if state["known"]:
            limit.add_metric([name], state["allowed"])
        ceiling.add_metric([name], state["ceiling"])
    yield limit
    yield ceiling


def _queue():
    up = GaugeMetricFamily(f"{PREFIX}broker_up", "Whether the broker answered this scrape.")
    depth = GaugeMetricFamily(f"{PREFIX}queue_messages", "Messages waiting in the broker's queue.", labels=["queue"])
    try:
        depths = queue_depths()
    except Exception as exc:
        if not is_outage(exc):
            raise
        depths = None  # the broker out of reach: say so, and leave the depth out rather than fail the scrape
    up.add_metric([], 0 if depths is None else 1)
    for queue, n in (depths or {}).items():
        depth.add_metric([queue], n)
    yield up
    yield depth


def _web_registry():
    """Every web process's request metrics under gunicorn (multiprocess mode), else this process's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return PROCESS_REGISTRY


def metrics_exposition() -> bytes:
    """The text exposition format: the web tier's metrics, then those read from the database and the broker."""
    stored = CollectorRegistry(auto_describe=False)
    stored.register(StoredMetricsCollector())
    return generate_latest(_web_registry()) + generate_latest(stored)
