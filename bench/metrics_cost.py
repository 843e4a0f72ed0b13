"""What /metrics costs: a scrape's time and queries as the LLM call log grows, against the GROUP BY over the log
that a scrape without counters would run; and what counting costs each job unit's write of its calls.

Writes inside a transaction that is rolled back, so nothing is left in the database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python manage.py migrate
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python bench/metrics_cost.py [--calls 100000]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

STAGES = ("agent", "simulator", "judge", "user_simulator")
UNIT_CALLS = 4  # a rollout unit's calls
REPEATS = 20


class Rollback(Exception):
    pass


def _median_ms(action, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000, help="LLM call rows in the log")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection, transaction
    from django.db.models import Count, Sum
    from django.test.utils import CaptureQueriesContext

    from simia_web.llm.models import EndpointProfile, LLMCall
    from simia_web.operations.counters import llm_calls_count
    from simia_web.operations.metrics import metrics_exposition

    def calls(profile, n: int, start: int = 0) -> list:
        return [
            LLMCall(
                stage=STAGES[i % len(STAGES)],
                profile=profile,
                model="bench",
                request_hash=f"{i}",
                request={},
                tokens_in=300 + i % 50,
                tokens_out=60 + i % 20,
                latency_ms=200 + (i * 37) % 5000,
                error_kind="timeout" if i % 97 == 0 else "",
            )
            for i in range(start, start + n)
        ]

    def naive_scrape():
        """What a scrape would run without counters: the log grouped by profile, stage and error."""
        grouped = LLMCall.objects.values("profile__name", "stage", "error_kind", "cache_hit")
        list(grouped.annotate(n=Count("id"), tin=Sum("tokens_in"), tout=Sum("tokens_out"), ms=Sum("latency_ms")))

    try:
        with transaction.atomic():
            profile = EndpointProfile.objects.create(name="bench-metrics", model="bench")
            print(
                f"{'LLM call rows':>14} {'scrape ms':>10} {'queries':>8} {'bytes':>8} {'GROUP BY over the log ms':>25}"
            )
            written = 0
            for target in (0, args.calls // 10, args.calls):
                while written < target:
                    batch = calls(profile, min(5000, target - written), written)
                    LLMCall.objects.bulk_create(batch)
                    llm_calls_count(batch)
                    written += len(batch)
                with CaptureQueriesContext(connection) as queries:
                    size = len(metrics_exposition())
                scrape_ms = _median_ms(metrics_exposition)
                naive_ms = _median_ms(naive_scrape, repeats=3)
                print(f"{written:>14,} {scrape_ms:>10.1f} {len(queries):>8} {size:>8,} {naive_ms:>25.1f}")

            unit = calls(profile, UNIT_CALLS)
            insert_ms = _median_ms(lambda: LLMCall.objects.bulk_create(calls(profile, UNIT_CALLS)), repeats=200)
            count_ms = _median_ms(lambda: llm_calls_count(unit), repeats=200)
            print(
                f"a unit's {UNIT_CALLS} calls: INSERT {insert_ms:.2f} ms, counting them {count_ms:.2f} ms "
                "(one INSERT ... ON CONFLICT for its series)"
            )
            raise Rollback
    except Rollback:
        pass


if __name__ == "__main__":
    main()
