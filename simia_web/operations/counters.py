"""Counters for Prometheus, kept in the database by the writers of what they count.

Workers run on any number of machines and the web process that answers a scrape sees none of their memory, so
job and LLM counters are rows (MetricCount) that each writer adds to in the transaction of its own write: one
INSERT ... ON CONFLICT DO UPDATE for all the series a write touches. Every scrape then sees every machine's work,
counted exactly once, and reads one row per series however large the data grows.
"""

import functools
import json
from collections import Counter
from collections.abc import Iterable

from django.db import connection

from .models import MetricCount

# Upper bounds (seconds) of the LLM latency histogram's buckets; the last is +Inf.
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))
NO_PROFILE = "none"

# Metric names as stored (the exposition adds the simia_ prefix and _total, see metrics.py).
JOBS_ENDED = "jobs_ended"
UNITS_ENDED = "job_units_ended"
LLM_CALLS = "llm_calls"
LLM_ERRORS = "llm_errors"
LLM_TOKENS = "llm_tokens"
LLM_LATENCY_BUCKET = "llm_latency_bucket"
LLM_LATENCY_MS = "llm_latency_ms"
WEBHOOK_ATTEMPTS = "webhook_attempts"
UNIT_LEASES_TAKEN_BACK = "job_unit_leases_taken_back"


def series_key(metric: str, **labels: str) -> tuple[str, str]:
    return metric, _labels_json(tuple(labels.items()))


@functools.lru_cache(maxsize=4096)
def _labels_json(labels: tuple[tuple[str, str], ...]) -> str:
    """The labels as stored, written once per set: every unit counts its LLM calls in five series each."""
    return json.dumps(dict(labels), sort_keys=True, separators=(",", ":"))


def bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def metric_counts_add(amounts: Counter) -> None:
    """Add {(metric, labels): amount} to the stored totals in one statement.

    The series are written in sorted order, so two writers that touch the same series lock them in the same
    order and never deadlock; each series' row is locked only until the writer's transaction ends.
    """
    rows = sorted((key, amount) for key, amount in amounts.items() if amount)
    if not rows:
        return
    table = connection.ops.quote_name(MetricCount._meta.db_table)
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    params = [part for (metric, labels), amount in rows for part in (metric, labels, amount)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (metric, labels, value) VALUES {values} "
            f"ON CONFLICT (metric, labels) DO UPDATE SET value = {table}.value + excluded.value",
            params,
        )


def _profile_name(call) -> str:
    return call.profile.name if call.profile_id else NO_PROFILE


def llm_calls_count(calls: Iterable) -> None:
    """Count written LLM calls: calls, tokens and errors per profile and stage, latency per profile."""
    amounts: Counter[tuple] = Counter()
    for call in calls:
        profile, stage = _profile_name(call), call.stage
        amounts[series_key(LLM_CALLS, profile=profile, stage=stage, cache_hit=str(call.cache_hit).lower())] += 1
        amounts[series_key(LLM_TOKENS, profile=profile, stage=stage, direction="in")] += call.tokens_in
        amounts[series_key(LLM_TOKENS, profile=profile, stage=stage, direction="out")] += call.tokens_out
        if call.error_kind:
            amounts[series_key(LLM_ERRORS, profile=profile, stage=stage, reason=call.error_kind)] += 1
        if not call.cache_hit:  # a cache hit sent no request: it has no latency to count
            seconds = call.latency_ms / 1000
            bound = next(bound for bound in LATENCY_BUCKETS if seconds <= bound)
            amounts[series_key(LLM_LATENCY_BUCKET, profile=profile, le=bucket_label(bound))] += 1
            amounts[series_key(LLM_LATENCY_MS, profile=profile)] += call.latency_ms
    metric_counts_add(amounts)


def llm_call_invalid_count(call, kind: str) -> None:
    """An answer recorded as a success turned out unusable: one more error of that kind."""
    metric_counts_add(Counter({series_key(LLM_ERRORS, profile=_profile_name(call), stage=call.stage, reason=kind): 1}))


def job_end_count(job, units: dict[str, int]) -> None:
    """Count an ended job and its units by how they ended ({status: n}, "errored" among them)."""
    amounts = Counter({series_key(JOBS_ENDED, kind=job.kind, status=job.status): 1})
    for status, n in units.items():
        amounts[series_key(UNITS_ENDED, kind=job.kind, status=status)] += n
    metric_counts_add(amounts)


def webhook_attempt_count(*, event: str, outcome: str) -> None:
    metric_counts_add(Counter({series_key(WEBHOOK_ATTEMPTS, event=event, outcome=outcome): 1}))
