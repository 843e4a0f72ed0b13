"""Rollout throughput of worker processes against a slow OpenAI-compatible server (run apart).

Targets: with 200 ms per LLM call and 32 concurrent requests allowed, a job of 200 rollouts of
about 4 LLM calls each reaches at least 95% of the ideal 32 / 0.2 = 160 calls/s, also with
--workers 2 (two processes sharing the endpoint's 32, which the server must never see exceeded),
and one process reaches at least 95% of the practical ceiling: a bare AsyncOpenAI client behind an
asyncio semaphore sending the job's own requests to the same server, measured in the same run
after each job. Beside it, the same client sending the job's rollouts as they ran, each one's calls
one after another and as many rollouts at once as the worker has threads: what the job's shape leaves,
so that the gap between the two ceilings is the shape's and the rest is the worker's own. Under each job,
the worker's CPU seconds per LLM call beside the bare client's (this process's own while it sends the job's
requests), and the median of that ratio over the jobs with its range: targets at most 1.5x at --concurrency 32
and 1.65x at 256. The worker pays for what the bare client does not do (a thread per unit handing the GIL over at
each blocking call, the unit's rows, prompts and checks), and single jobs vary by about 20% either way on a shared
machine, so the median of at least six jobs is the figure to compare.

With --concurrency 256 --latency 1 --workers 2, at least 90% of the ideal: give it --threads 512
--rollouts 1000 (200 rollouts hold at most 200 requests at once) and a database pool
(SIMIA_DB_POOL_SIZE=40: 512 threads would otherwise open more connections than PostgreSQL's 100).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 python bench/rollout_throughput.py [--rollouts 200]

Uses (and resets) the database named in DATABASE_URL. Shared machines are noisy (a CPU-bound loop
varies by 15% from one run to the next here, and by 2x over an afternoon), so the job runs --repeat
times on the same worker and the median is the figure to quote. Under each job, where it lost time: how
long before its first unit started, the mean time a call held its slot (the server answers in --latency),
and the time after its last unit started against the least it could take then.

With --instructions, the worker runs instead under valgrind's callgrind (solo pool, zero-latency
server) and the figure is CPU instructions per rollout unit on the thread that runs the units: the same on
a busy machine as on a quiet one (the worker's timer threads, which run per second of wall time, are
counted apart), so a change to the per-unit work can be compared exactly (about a minute; needs valgrind).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/simia_bench")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def reset_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def fresh_environment() -> None:
    """Reset the database named in DATABASE_URL, set Django up on it and empty the broker."""
    reset_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).flushdb()


def scripted_server(latency: float, **profile) -> tuple[subprocess.Popen, str]:
    """The tests' scripted server answering after `latency` seconds, in a process of its own so that its threads do
    not compete with this one's, made the default endpoint profile (with `profile`'s fields)."""
    from simia_web.llm.models import EndpointProfile

    stub = subprocess.Popen(
        [sys.executable, "-m", "tests.support.llm_stub", str(latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    url = stub.stdout.readline().strip()
    EndpointProfile.objects.create(name="bench", base_url=url, model="stub", is_default=True, **profile)
    return stub, url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, help="Rollouts per job (default 200; 30 with --instructions).")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32, help="Concurrent requests the endpoint allows.")
    parser.add_argument("--threads", type=int, default=64, help="Worker threads (across all worker processes).")
    parser.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--workers", type=int, default=1, help="Worker processes; the endpoint's concurrency holds across them."
    )
    parser.add_argument("--repeat", type=int, default=3, help="Jobs to measure; the median is reported.")
    parser.add_argument("--instructions", action="store_true", help="Count CPU instructions per unit instead.")
    args = parser.parse_args()
    if args.instructions:
        if not shutil.which("valgrind"):
            sys.exit("--instructions needs valgrind (apt-get install -y valgrind)")
        args.latency = 0.0
    args.rollouts = args.rollouts or (30 if args.instructions else 200)

    fresh_environment()
    from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
    from simia_web.synthesis.services import rollout_queue
    from tests.support.processes import WorkerProcess
    from tests.support.scripts import SHOP, tasks_answer

    stub, stub_url = scripted_server(args.latency, max_concurrency=args.concurrency, timeout_seconds=30)
    domain = domain_ensure(name="bench")
    apis_store(domain=domain, apis=SHOP["apis"], state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"])
    # One rollout per task: the same 200 units as 50 tasks x 4, and the warm-up can take a subset.
    task_count = args.rollouts
    tasks_store(domain=domain, tasks=tasks_answer(task_count)["tasks"][:task_count])

    if args.instructions:
        try:
            count_instructions(task_count)
        finally:
            stub.terminate()
        return

    workers = [
        WorkerProcess(os.environ.copy(), args.threads // args.workers, hostname=f"bench{i}@%h").start()
        for i in range(args.workers)
    ]
    try:
        time.sleep(3)  # let the worker connect before the clock starts
        import psutil

        def cpu_seconds() -> float:
            return sum(sum(psutil.Process(w.pid).cpu_times()[:2]) for w in workers)

        def run_job(rollouts: int):
            return wait_for(rollout_queue(domain="bench", rollouts=1, tasks=rollouts))

        if args.warm_up:
            # A long-running worker has its threads, database connections and LLM clients open; a fresh
            # one opens them during its first units. Measure the steady state unless --no-warm-up is given.
            run_job(min(args.threads, task_count))
        loop_before = reference_loop_seconds()
        results = []
        for _ in range(args.repeat):
            server_in_flight(stub_url)  # counts from here
            server_cpu = sum(psutil.Process(stub.pid).cpu_times()[:2])
            result = measure(run_job, cpu_seconds, task_count, args.concurrency)
            result["server_cpu"] = sum(psutil.Process(stub.pid).cpu_times()[:2]) - server_cpu
            result["in_flight"] = server_in_flight(stub_url)
            chains = job_chains(result["job"])
            requests = [[request] for chain in chains for request in chain]
            result["ceiling"], result["ceiling_cpu"] = asyncio_ceiling(
                stub_url, requests, args.concurrency, len(requests)
            )
            result["chained_ceiling"], result["chained_cpu"] = asyncio_ceiling(
                stub_url, chains, args.concurrency, args.threads
            )
            results.append(result)
    finally:
        for worker in workers:
            worker.stop()
        stub.terminate()

    ideal = args.concurrency / args.latency
    for result in results:
        print(
            f"job {result['job']}: {result['trajectories']} in {result['seconds']:.2f} s, {result['calls']} LLM calls "
            f"({result['calls'] / task_count:.1f} per rollout); worker CPU {result['cpu'] / result['seconds']:.0%} "
            f"of one core, {result['cpu'] / result['calls'] * 1000:.1f} ms per call; {result['rate']:.1f} calls/s "
            f"= {result['rate'] / ideal:.1%} of ideal; at most {result['in_flight']} requests in flight at the server, "
            f"whose CPU was {result['server_cpu'] / result['seconds']:.0%} of one core"
            f"\n    {result['losses']}\n    asyncio ceiling (AsyncOpenAI + semaphore, the job's requests): "
            f"{result['ceiling']:.1f} calls/s; the worker reached {result['rate'] / result['ceiling']:.1%} of it"
            f"\n    the same client sending the job's rollouts, each one call after another, {args.threads} at once: "
            f"{result['chained_ceiling']:.1f} calls/s; the worker reached "
            f"{result['rate'] / result['chained_ceiling']:.1%} of it"
            f"\n    CPU per LLM call: worker {result['cpu'] / result['calls'] * 1000:.2f} ms, bare client "
            f"{result['ceiling_cpu'] * 1000:.2f} ms ({result['cpu'] / result['calls'] / result['ceiling_cpu']:.2f}x), "
            f"the same sending chains {result['chained_cpu'] * 1000:.2f} ms"
        )
    print(
        f"machine speed: a fixed pure-Python loop took {loop_before:.2f} s before the jobs and "
        f"{reference_loop_seconds():.2f} s after (about 0.5 s when the machine is quiet)"
    )
    rates = sorted(r["rate"] for r in results)
    median = statistics.median(rates)
    ceiling = statistics.median(r["ceiling"] for r in results)
    chained = statistics.median(r["chained_ceiling"] for r in results)
    worker_cpu = statistics.median(r["cpu"] / r["calls"] for r in results)
    client_cpu = statistics.median(r["ceiling_cpu"] for r in results)
    job_ratios = sorted(r["cpu"] / r["calls"] / r["ceiling_cpu"] for r in results)
    print(
        f"{args.workers} worker process(es), {args.threads} threads: median {median:.1f} calls/s "
        f"(min {rates[0]:.1f}, max {rates[-1]:.1f}); ideal {ideal:.0f} calls/s; ratio {median / ideal:.1%}; "
        f"asyncio ceiling median {ceiling:.1f} calls/s, ratio {median / ceiling:.1%}; the same sending the "
        f"rollouts {args.threads} at once, median {chained:.1f} calls/s, ratio {median / chained:.1%}; "
        f"at most {max(r['in_flight'] for r in results)} in flight (limit {args.concurrency}); CPU per LLM call "
        f"median: worker {worker_cpu * 1000:.2f} ms, bare client {client_cpu * 1000:.2f} ms, "
        f"ratio {worker_cpu / client_cpu:.2f}x; per job {statistics.median(job_ratios):.2f}x "
        f"(min {job_ratios[0]:.2f}x, max {job_ratios[-1]:.2f}x)"
    )


def server_in_flight(stub_url: str) -> int:
    """The most requests the scripted server answered at once since the last look."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{stub_url}/in-flight") as answer:
        return json.load(answer)["max_in_flight"]


def job_chains(job_id: int) -> list[list[tuple[str, dict]]]:
    """The job's requests (stage, body), one list per trajectory in the order its rollout sent them."""
    from simia_web.curation.models import Trajectory
    from simia_web.llm.models import LLMCall

    rows = LLMCall.objects.filter(job_id=job_id).values_list("pk", "stage", "request")
    calls = {pk: (stage, request) for pk, stage, request in rows}
    chains = Trajectory.objects.filter(job_id=job_id).values_list("provenance", flat=True)
    return [[calls[pk] for pk in provenance["llm_calls"]] for provenance in chains]


def asyncio_ceiling(
    stub_url: str, chains: list[list[tuple[str, dict]]], concurrency: int, units: int
) -> tuple[float, float]:
    """Calls/s of a bare AsyncOpenAI client sending these chains of requests (each chain's one after
    another), at most `units` chains and `concurrency` requests at once, and its CPU seconds per call
    (this process's, which runs nothing else meanwhile)."""
    import asyncio

    from bench.concurrency_models import async_client

    async def send_all() -> tuple[float, float]:
        async with async_client(stub_url, concurrency) as client:
            gate, in_flight = asyncio.Semaphore(concurrency), asyncio.Semaphore(units)

            async def send(chain: list[tuple[str, dict]]) -> None:
                async with in_flight:
                    for stage, request in chain:
                        async with gate:
                            await client.chat.completions.create(**request, extra_headers={"X-Simia-Stage": stage})

            calls = sum(map(len, chains))
            started, cpu_started = time.perf_counter(), time.process_time()
            await asyncio.gather(*(send(chain) for chain in chains))
            cpu = time.process_time() - cpu_started
            return calls / (time.perf_counter() - started), cpu / calls

    return asyncio.run(send_all())


def wait_for(job):
    while job.is_active:
        time.sleep(0.1)
        job.refresh_from_db()
    return job


def count_instructions(task_count: int) -> None:
    import glob
    import signal
    import tempfile

    from simia_web.synthesis.services import rollout_queue

    out = tempfile.mkdtemp(prefix="simia-callgrind-")
    worker = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
        + [f"--callgrind-out-file={out}/callgrind.%p"]
        + [sys.executable, "-m", "celery", "-A", "simia_web", "worker", "--pool", "solo", "--loglevel", "WARNING"]
        + ["--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(rollout_queue(domain="bench", rollouts=1, tasks=10))  # warm-up: imports, connections
        subprocess.run(["callgrind_control", "--instr=on", str(worker.pid)], check=True, capture_output=True)
        job = wait_for(rollout_queue(domain="bench", rollouts=1, tasks=task_count))
        subprocess.run(["callgrind_control", "--instr=off", str(worker.pid)], check=True, capture_output=True)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait()
    # The solo pool runs the job's start and its units on the main thread (thread 1). The worker's timer threads
    # (heartbeat, watchdog, lease renewal) run per second of wall time, which a busy machine stretches: left out.
    totals = {
        thread: int(line.split()[1])
        for path in glob.glob(f"{out}/callgrind.*")
        for thread in [path.rsplit("-", 1)[1]]
        for line in Path(path).read_text().splitlines()
        if line.startswith("totals:")
    }
    print(
        f"job {job.pk} ({job.status}, {task_count} rollouts, solo worker under callgrind): "
        f"{totals['01'] / task_count / 1e6:.1f} M instructions per rollout unit on the thread that runs them (job "
        f"start and every unit included), {sum(totals.values()) / task_count / 1e6:.1f} M with the worker's other "
        "threads"
    )


def reference_loop_seconds() -> float:
    """The same CPU-bound work every time, so figures from a slowed-down shared machine can be told apart."""
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - started


def measure(run_job, cpu_seconds, task_count: int, slots: int) -> dict:
    from simia_web.jobs.models import Job
    from simia_web.llm.models import LLMCall

    idle_cpu = cpu_seconds()
    job = run_job(task_count)
    worker_cpu = cpu_seconds() - idle_cpu
    job = Job.objects.get(pk=job.pk)
    seconds = (job.finished_at - job.started_at).total_seconds()
    calls = LLMCall.objects.filter(job=job).count()
    return {
        "job": job.pk,
        "trajectories": job.summary.get("trajectories"),
        "seconds": seconds,
        "calls": calls,
        "cpu": worker_cpu,
        "rate": calls / seconds,
        "losses": losses(job, slots),
    }


def losses(job, slots: int) -> str:
    """Where the job lost time against the ideal: the start, each call's time in a slot, the end.

    A call's row is made when its answer is in, so it held its slot for the latency before that.
    The end is the time after the last unit started, against the least it could take: the slot time
    still to use then, spread over every slot.
    """
    from simia_web.llm.models import LLMCall

    started = sorted(job.units.values_list("started_at", flat=True))
    calls = list(LLMCall.objects.filter(job=job).values_list("created_at", "latency_ms"))
    last_start = started[-1]
    work_left = sum(
        min(latency / 1000, (made - last_start).total_seconds()) for made, latency in calls if made > last_start
    )
    return (
        f"first unit {(started[0] - job.started_at).total_seconds() * 1000:.0f} ms after the start; "
        f"{sum(latency for _, latency in calls) / len(calls):.0f} ms in a slot per call; after the last unit "
        f"started {(job.finished_at - last_start).total_seconds():.2f} s (at least {work_left / slots:.2f} s)"
    )


if __name__ == "__main__":
    main()
