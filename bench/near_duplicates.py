"""The near-duplicate index at 100k trajectories on PostgreSQL: how long it takes to build, what one write adds,
and how fast a lookup answers.

Loads (once; kept for later runs) 100k trajectories with the review-pages bench's loader, then, each run:
builds the index from scratch (every text signed again, bands written, clusters computed: `manage.py
near_duplicates --resign`), adds near-copies of random trajectories (one word changed) through trajectory_create,
which signs and clusters each as it is written, and times lookups: one trajectory's near-duplicates (the index
query alone, and the trajectory page's section with its rows), the trajectory page and the clusters page through
Django's test client, and the count an export keeping one per cluster makes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python bench/near_duplicates.py [--rows 100000]
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import review_pages  # noqa: E402  (the loader of the review-pages bench; sets up the path and settings)

LOOKUPS = 200
COPIES = 500


def _timed(action, repeats: int) -> tuple[float, float]:
    """Median and p95 in milliseconds of `action(i)` over `repeats` calls."""
    times = []
    for i in range(repeats):
        started = time.perf_counter()
        action(i)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def _near_copy(messages: list[dict], rng: random.Random) -> list[dict]:
    copy = [dict(m) for m in messages]
    answer = copy[-1]
    words = answer["content"].split()
    words[rng.randrange(len(words))] = "zeppelin"
    answer["content"] = " ".join(words)
    return copy


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    review_pages.django_setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from simia_web.accounts.models import User
    from simia_web.curation.duplicates import TRAJECTORIES, trajectory_duplicates
    from simia_web.curation.models import Trajectory
    from simia_web.curation.services import trajectory_create
    from simia_web.dedup.selectors import near_duplicates
    from simia_web.dedup.services import index_rebuild, index_sign_missing
    from simia_web.exports.selectors import export_deduplicated, export_queryset

    review_pages.load(args.rows)
    total = Trajectory.objects.count()
    print(f"{total} trajectories\n")

    started, cpu = time.perf_counter(), time.process_time()
    signed = index_sign_missing(corpus=TRAJECTORIES, resign=True)
    signing, signing_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    outcome = index_rebuild(corpus=TRAJECTORIES)
    rebuilding, rebuilding_cpu = time.perf_counter() - started, time.process_time() - cpu
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE dedup_signature")
        cursor.execute("VACUUM ANALYZE dedup_band")
        cursor.execute(
            "SELECT pg_total_relation_size('dedup_signature'), pg_total_relation_size('dedup_band'), "
            "(SELECT count(*) FROM dedup_band)"
        )
        signature_bytes, band_bytes, bands = cursor.fetchone()
    print("build (manage.py near_duplicates --resign)                 wall s   this process's CPU s")
    print(f"  sign {signed} texts (read, shingle, MinHash, write)   {signing:8.1f} {signing_cpu:8.1f}")
    print(f"  bands and clusters from stored signatures          {rebuilding:8.1f} {rebuilding_cpu:8.1f}")
    total, total_cpu = signing + rebuilding, signing_cpu + rebuilding_cpu
    print(f"  total                                              {total:8.1f} {total_cpu:8.1f}")
    print(
        f"  {outcome['signatures']} signatures ({signature_bytes / 2**20:.0f} MiB with indexes), {bands} bands "
        f"({band_bytes / 2**20:.0f} MiB), {outcome['clusters']} clusters holding {outcome['clustered']} items\n"
    )

    rng = random.Random(11)
    ids = list(Trajectory.objects.order_by("pk").values_list("pk", flat=True))
    originals = Trajectory.objects.in_bulk(rng.sample(ids, COPIES))
    copies = []
    started = time.perf_counter()
    for original in originals.values():
        copy = trajectory_create(
            violations=[],
            kind="rollout",
            domain_id=original.domain_id,
            messages=_near_copy(original.messages, rng),
            tools=original.tools,
        )
        copies.append(copy.pk)
    writing = (time.perf_counter() - started) / COPIES * 1000
    Trajectory.objects.filter(pk__in=copies).update(status="accepted")
    clustered = sum(1 for pk in copies if trajectory_duplicates(pk).cluster is not None)
    print(f"write: trajectory_create of a near-copy, signed and clustered as it is written: {writing:.1f} ms each")
    print(f"  {clustered} of {COPIES} copies found their original and joined its cluster\n")

    sample = rng.sample(ids, LOOKUPS)
    index_only = _timed(lambda i: near_duplicates(corpus=TRAJECTORIES, item_id=sample[i]), LOOKUPS)
    section = _timed(lambda i: trajectory_duplicates(sample[i]), LOOKUPS)
    with_copies = _timed(lambda i: trajectory_duplicates(copies[i % len(copies)]), LOOKUPS)
    print(f"lookup, {LOOKUPS} random trajectories            median ms   p95 ms")
    print(f"  index query (1 query)                           {index_only[0]:8.2f} {index_only[1]:8.2f}")
    print(f"  page section with rows (2 queries)              {section[0]:8.2f} {section[1]:8.2f}")
    print(f"  page section of a near-copy (has neighbours)    {with_copies[0]:8.2f} {with_copies[1]:8.2f}\n")

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench-curator", defaults={"role": "curator"})
    client = Client()
    client.force_login(user)
    print(f"{'page':<48} {'median ms':>10} {'p95 ms':>8} {'queries':>8}")
    for label, url in (
        ("trajectory page of a near-copy", f"/trajectories/{copies[0]}/"),
        ("near-duplicate clusters, first page", "/review/duplicates/"),
        ("one cluster", f"/review/duplicates/{trajectory_duplicates(copies[0]).cluster}/"),
    ):
        median, p95, queries, _ = review_pages.measure(client, url)
        print(f"{label:<48} {median:>10.1f} {p95:>8.1f} {queries:>8}")

    started = time.perf_counter()
    _, about = export_deduplicated(export_queryset({"status": "accepted"}), "accepted_first")
    print(
        f"\nexport dedup (accepted, keep accepted first): {about['removed']} to remove, counted in "
        f"{time.perf_counter() - started:.1f} s"
    )
    Trajectory.objects.filter(pk__in=copies).delete()  # the next run starts from the same rows


if __name__ == "__main__":
    main()
