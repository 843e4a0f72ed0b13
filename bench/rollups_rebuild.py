"""The rollups counted again from every trajectory: the single pass (`manage.py rebuild_rollups`, one transaction in
this process) against the rebuild job (`--queue`: units of whole domains on a Celery worker of 1, 2 and 4 prefork
processes), over a database the review benchmarks loaded (bench/review_pages.py --load-only). It loads nothing.

Each run starts from rows made wrong in three ways (a third of them gone, a seventh counting 3 more, rows of a job
that does not exist), and must leave exactly the rows the single pass left (counts equal, sums within 1e-9). A job is
timed from its queueing to its end on a worker already up (it answered a ping); "worker CPU" is the user and system
time of the worker and its pool's processes over the job (PostgreSQL's is not in it); the single pass's CPU is this
process's. While each runs, a thread of this process decides a waiting trajectory and takes the decision back, over
and over (the rollups end as they were): the longest a decision waited says whether writers wait for the rebuild
(--without-decisions: nothing else writes).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_100k_copy CELERY_BROKER_URL=redis://127.0.0.1:6379/6 \\
        python bench/rollups_rebuild.py [--processes 1,2,4] [--trajectories-per-unit 20000] [--repeats 1] \
        [--without-decisions]

The database's rollup rows are the single pass's at the end.
"""

import argparse
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def _rows() -> dict:
    from simia_web.curation.models import Rollup
    from simia_web.curation.rollups import KEY_COLUMNS

    found = Rollup.objects.exclude(n=0).values_list(*KEY_COLUMNS, "n", "total")
    return {tuple(row[:7]): (row[7], round(row[8], 9)) for row in found}


def _damage() -> None:
    from django.db.models import F

    from simia_web.curation.models import Figure, Rollup

    stored = list(Rollup.objects.order_by("pk").values_list("pk", "domain_id", "reviewer"))
    Rollup.objects.filter(pk__in=[pk for pk, *_ in stored[::3]]).delete()
    Rollup.objects.filter(pk__in=[pk for pk, *_ in stored[1::7]]).update(n=F("n") + 3)
    _, domain, _ = stored[0]
    Rollup.objects.update_or_create(figure=Figure.DECISIONS, domain_id=domain, job=2**31 - 1, defaults={"n": 5})


class Decisions(threading.Thread):
    """Decides waiting trajectories one after another (accept, then undo: the rollups end as they were) until
    stopped, timing each decision."""

    def __init__(self, ids: list[int], reviewer):
        super().__init__(daemon=True)
        self.ids, self.reviewer, self.waits, self.halt = ids, reviewer, [], threading.Event()

    def run(self):
        from django.db import connection

        from simia_web.curation.models import Trajectory
        from simia_web.curation.services import review_decide, review_undo

        try:
            for pk in self.ids:
                if self.halt.is_set():
                    return
                trajectory = Trajectory.objects.get(pk=pk)
                started = time.perf_counter()
                review = review_decide(
                    trajectory=trajectory,
                    reviewer=self.reviewer,
                    decision="accept",
                    expected_version=trajectory.version,
                )
                self.waits.append(time.perf_counter() - started)
                review_undo(review=review, actor=self.reviewer)
        finally:
            connection.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.halt.set()
        self.join()

    def said(self) -> str:
        if not self.waits:
            return "none"
        return (
            f"{len(self.waits)}, median {statistics.median(self.waits) * 1000:.0f} ms, longest {max(self.waits):.2f} s"
        )


def _tree_cpu(pid: int) -> float:
    import psutil

    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)] if p.is_running())


def _worker_up(hostname: str, timeout: float = 60) -> None:
    from simia_web.celery import app

    deadline = time.monotonic() + timeout
    while not app.control.ping(destination=[hostname], timeout=1):
        if time.monotonic() > deadline:
            sys.exit(f"the worker {hostname} did not answer in {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="1,2,4", help="worker process counts to time the job with")
    parser.add_argument("--trajectories-per-unit", type=int, default=None, help="default: the setting's")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each, the fastest reported")
    parser.add_argument(
        "--without-decisions",
        action="store_true",
        help="make no decisions while the rebuilds run (nothing else writes)",
    )
    args = parser.parse_args()
    import django

    django.setup()
    from copy_rows import PeakMemory
    from django.conf import settings
    from django.db import connection

    from simia_web.accounts.models import User
    from simia_web.catalog.models import Domain
    from simia_web.curation.models import Rollup, Trajectory, TrajectoryStatus
    from simia_web.curation.rollups import rollups_rebuild, rollups_rebuild_queue
    from simia_web.jobs.models import JobStatus
    from tests.support.processes import WorkerProcess

    if connection.vendor != "postgresql" or not settings.CELERY_BROKER_URL.startswith("redis://"):
        sys.exit("Set DATABASE_URL to a loaded PostgreSQL database and CELERY_BROKER_URL to Redis.")
    trajectories = Trajectory.objects.count()
    if not trajectories:
        sys.exit("No trajectories: load the database first (bench/review_pages.py --rows N --load-only).")
    per_unit = args.trajectories_per_unit or settings.ROLLUP_UNIT_TRAJECTORIES
    print(
        f"{trajectories} trajectories in {Domain.objects.count()} domains; {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )

    waiting = Trajectory.objects.filter(status=TrajectoryStatus.JUDGED_PASS, reserved_by__isnull=True)
    pending = list(waiting.order_by("pk").values_list("pk", flat=True)[:5000])
    reviewer = User.objects.filter(username__startswith="bench-annotator-").order_by("pk").first()

    def decisions() -> Decisions:
        return Decisions([] if args.without_decisions else pending[len(runs) * 1000 :], reviewer)

    runs: list[tuple] = []
    single = []
    for _ in range(args.repeats):
        _damage()
        with decisions() as writer:
            started, cpu = time.perf_counter(), time.process_time()
            rows = rollups_rebuild()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        single.append((wall, cpu, writer.said()))
    reference = _rows()
    wall, cpu, said = min(single)
    runs.append(("single pass, this process (one transaction)", wall, cpu, None, f"{rows} rows, the reference", said))
    print(f"single pass: {wall:.1f} s, {cpu:.1f} s CPU, {rows} rows", file=sys.stderr)

    for processes in [int(n) for n in args.processes.split(",")]:
        hostname = f"bench-rollups-{processes}@{socket.gethostname()}"
        worker = WorkerProcess(os.environ.copy(), processes, hostname=hostname, pool="prefork").start()
        timed = []
        try:
            _worker_up(hostname)
            for _ in range(args.repeats):
                _damage()
                cpu_before = _tree_cpu(worker.pid)
                with PeakMemory(worker.pid, every=0.2) as memory, decisions() as writer:
                    started = time.perf_counter()
                    job = rollups_rebuild_queue(trajectories_per_unit=per_unit)
                    while job.refresh_from_db() or job.is_active:
                        time.sleep(0.1)
                    wall = time.perf_counter() - started
                if job.status != JobStatus.SUCCEEDED:
                    sys.exit(f"the rebuild job {job.pk} {job.status}: {job.error}")
                cpu_spent = _tree_cpu(worker.pid) - cpu_before
                same = _rows() == reference
                timed.append((wall, cpu_spent, memory.peak, same, job.units.count(), writer.said()))
        finally:
            worker.stop()
        wall, worker_cpu, peak, _, units, said = min(timed)
        same = "same rows as the single pass" if all(run[3] for run in timed) else "DIFFERENT from the single pass"
        label = f"job, {processes} worker process(es), {units} units"
        runs.append((label, wall, worker_cpu, peak, same, said))
        print(f"{processes} process(es): {wall:.1f} s, {same}", file=sys.stderr)

    print(f"\nrebuild of {trajectories} trajectories' rollups, units of about {per_unit} trajectories (whole domains)")
    print("| run | wall s | × single pass | CPU s | peak RSS a process | rows | decisions made meanwhile |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for label, wall, cpu_seconds, peak, same, said in runs:
        peak_said = "" if peak is None else f"{peak / 2**20:.0f} MiB"
        print(f"| {label} | {wall:.1f} | {wall / runs[0][1]:.2f} | {cpu_seconds:.1f} | {peak_said} | {same} | {said} |")
    print(f"\n{Rollup.objects.count()} rollup rows; load average {os.getloadavg()[0]:.1f} at the end")
    rollups_rebuild()  # the rows as the single pass leaves them, zero rows gone


if __name__ == "__main__":
    main()
