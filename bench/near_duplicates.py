"""The near-duplicate index on PostgreSQL: how long a build from scratch takes in one process and as a job on 1 and
2 (or --processes) worker processes, what one write adds, and how fast a lookup answers.

Loads (once; kept for later runs, and a run asking for more rows adds the rest) --rows trajectories with the review
benchmarks' loader (bench/review_data.py), then, each run, adds near-copies (one word changed) of 2% of them through
trajectory_create, so that a build has clusters to find, and:

- builds the index from scratch in this process (`manage.py near_duplicates --resign`: one range, every text signed
  again, bands written, clusters computed), and keeps the clusters it made;
- for each process count, starts a Celery worker of that many prefork processes, warms it up on a build of the (empty)
  task corpus, and times the same build queued as a job (`manage.py near_duplicates --resign --queue`): ranges of
  --items-per-range items signed and banded by any process, one final unit clustering them; each build must make the
  same clusters and as many bands as the single pass;
- adds more near-copies, timing trajectory_create, which signs and clusters each as it is written, and times
  lookups: one trajectory's near-duplicates (the index query alone, and the trajectory page's section with its rows).

Every build starts from an empty index (the index's tables are truncated: this database holds no other corpus).

With --no-single-pass the build in this process is left out (at 1M it takes several times as long as a job on 2
processes): the first job's clusters and bands are then the reference the other jobs must make, and the copies of 2%
of the rows can be made fewer with --copied-share.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python bench/near_duplicates.py [--rows 100000]
        [--processes 1,2] [--items-per-range 10000] [--no-single-pass] [--copied-share 0.02]
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import review_pages  # noqa: E402  (sets up the path and settings; its django_setup makes and migrates the database)

LOOKUPS = 200
COPIES = 200
COPIED_SHARE = 0.02  # of the rows, copied before the builds


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--processes", default="1,2", help="worker process counts to time the job with")
    parser.add_argument("--items-per-range", type=int, default=None, help="a unit's items (default: the command's)")
    parser.add_argument(
        "--no-single-pass",
        dest="single_pass",
        action="store_false",
        help="time the jobs only, without the build in this process; the first job's clusters are the reference",
    )
    parser.add_argument(
        "--copied-share",
        type=float,
        default=COPIED_SHARE,
        help=f"share of the rows near-copied before the builds (default {COPIED_SHARE})",
    )
    args = parser.parse_args()
    review_pages.django_setup()
    import psutil
    import review_data
    from copy_rows import PeakMemory
    from django.db import connection

    from simia_web.curation.duplicates import TRAJECTORIES, trajectory_duplicates
    from simia_web.curation.models import Trajectory
    from simia_web.curation.services import trajectory_create
    from simia_web.dedup.models import Band, Signature
    from simia_web.dedup.selectors import near_duplicates
    from simia_web.dedup.services import ITEMS_PER_RANGE, index_build, index_build_queue
    from simia_web.jobs.models import JobStatus
    from tests.support.processes import WorkerProcess

    items_per_range = args.items_per_range or ITEMS_PER_RANGE
    review_data.load(args.rows)

    rng = random.Random(11)
    ids = list(Trajectory.objects.order_by("pk").values_list("pk", flat=True))

    def near_copies(count: int) -> list[int]:
        copies = []
        for original in Trajectory.objects.in_bulk(rng.sample(ids, count)).values():
            copy = trajectory_create(
                violations=[],
                kind="rollout",
                domain_id=original.domain_id,
                messages=_near_copy(original.messages, rng),
                tools=original.tools,
            )
            copies.append(copy.pk)
        return copies

    with connection.cursor() as cursor:  # the index's statistics as they are: its read of bands is planned on them
        cursor.execute("ANALYZE dedup_signature, dedup_band")
    seeded = near_copies(int(args.copied_share * len(ids)))
    total = Trajectory.objects.count()
    print(f"{total} trajectories ({len(seeded)} near-copies among them), {os.cpu_count()} CPUs, ", end="")
    print(f"load average {os.getloadavg()[0]:.1f} at start\n")

    def index_empty():
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {Band._meta.db_table}, {Signature._meta.db_table}")

    def clusters() -> tuple[dict, int]:
        signatures = Signature.objects.filter(corpus=TRAJECTORIES, cluster__isnull=False)
        return dict(signatures.values_list("item_id", "cluster")), Band.objects.count()

    rows = []
    reference = outcome = None
    if args.single_pass:
        index_empty()
        started, cpu = time.perf_counter(), time.process_time()
        outcome = index_build(corpus=TRAJECTORIES, resign=True)
        single = time.perf_counter() - started, time.process_time() - cpu
        reference = clusters()
        rows.append(("single pass, this process", single[0], single[1], None, "reference"))
        print(f"single pass: {single[0]:.1f} s, {outcome}", file=sys.stderr)

    for processes in [int(n) for n in args.processes.split(",")]:
        index_empty()
        worker = WorkerProcess(os.environ.copy(), processes, hostname=f"bench-dedup-{processes}@%h", pool="prefork")
        worker.start()
        try:
            warm_up = index_build_queue(corpus="task")
            while warm_up.refresh_from_db() or warm_up.is_active:
                time.sleep(0.2)
            before = psutil.Process(worker.pid)
            with PeakMemory(worker.pid, every=0.2) as memory:
                started = time.perf_counter()
                job = index_build_queue(corpus=TRAJECTORIES, resign=True, items_per_range=items_per_range)
                while job.refresh_from_db() or job.is_active:
                    time.sleep(0.2)
                wall = time.perf_counter() - started
            worker_cpu = sum(
                sum(p.cpu_times()[:2]) for p in [before, *before.children(recursive=True)] if p.is_running()
            )
        finally:
            worker.stop()
        if job.status != JobStatus.SUCCEEDED:
            sys.exit(f"the build job {job.pk} {job.status}: {job.error}")
        made = clusters()
        if reference is None:
            reference, same = made, "reference (no single pass)"
            outcome = {"signatures": Signature.objects.filter(corpus=TRAJECTORIES).count()}
            outcome["clusters"] = len(set(made[0].values()))
            outcome["clustered"] = len(made[0])
        else:
            first = "the single pass" if args.single_pass else "the first job"
            same = "same clusters and bands" if made == reference else f"DIFFERENT from {first}"
        units = job.units.count()
        rows.append((f"job, {processes} worker process(es), {units} units", wall, worker_cpu, memory.peak, same))
        print(f"{processes} process(es): {wall:.1f} s, {same}", file=sys.stderr)

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE dedup_signature")
        cursor.execute("VACUUM ANALYZE dedup_band")
        cursor.execute(
            "SELECT pg_total_relation_size('dedup_signature'), pg_total_relation_size('dedup_band'), "
            "(SELECT count(*) FROM dedup_band)"
        )
        signature_bytes, band_bytes, bands = cursor.fetchone()
    print(f"build from scratch of {total} trajectories (--resign)   wall s   CPU s   peak RSS a process   result")
    for label, wall, cpu_seconds, peak, same in rows:
        peak_said = "" if peak is None else f"{peak / 2**20:.0f} MiB"
        print(f"  {label:<44} {wall:7.1f} {cpu_seconds:7.1f}   {peak_said:>10}   {same}")
    print(
        f"  {outcome['signatures']} signatures ({signature_bytes / 2**20:.0f} MiB with indexes), {bands} bands "
        f"({band_bytes / 2**20:.0f} MiB), {outcome['clusters']} clusters holding {outcome['clustered']} items\n"
    )

    started = time.perf_counter()
    copies = near_copies(COPIES)
    writing = (time.perf_counter() - started) / COPIES * 1000
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
    print(f"  page section of a near-copy (has neighbours)    {with_copies[0]:8.2f} {with_copies[1]:8.2f}")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    Trajectory.objects.filter(pk__in=seeded + copies).delete()  # the next run starts from the same rows


if __name__ == "__main__":
    main()
